#include "kernels/quant/ggml_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/iq_grids.h"

namespace kiln::ggml {

namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_bits_to_f32(h);
}

void put_f16(uint8_t* p, float x) {
  uint16_t h = f32_to_f16_bits(x);
  std::memcpy(p, &h, 2);
}

void check_multiple(int64_t n, int block, std::string_view what) {
  if (n < 0 || n % block)
    throw Error(std::string(what) + ": " + std::to_string(n) +
                " elements is not a multiple of the " + std::to_string(block) + "-element block");
}

// The value of largest magnitude of n values (the first on ties), with its
// sign: the symmetric formats map it to their most negative code.
float signed_max(const float* x, int n = 32) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Round to nearest, ties to even, through the float mantissa (exact for
// |x| < 2^22): the rounding ggml's K-quant search uses.
int nearest_int(float x) {
  float v = x + 12582912.0f;  // 1.5 * 2^23
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Weighted fit of x ~ scale * L + min with L in 0..nmax (min <= 0): starts
// from the plain min/max grid, then tries nstep + 1 stretched grids and keeps
// the one with the least weighted squared (or, with `abs_error`, absolute)
// error. Returns the scale and stores -min.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                    float rmin, float rdelta, int nstep, bool abs_error = false) {
  auto error = [&](float diff) { return abs_error ? std::fabs(diff) : diff * diff; };
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -lo;
    return 0.0f;
  }
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float best = 0;
  for (int i = 0; i < n; ++i) {
    int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - lo))));
    L[i] = static_cast<uint8_t>(l);
    best += w[i] * error(scale * L[i] + lo - x[i]);
  }
  uint8_t aux[32];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * step + nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - lo))));
      aux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      err += w[i] * error(this_scale * aux[i] + this_min - x[i]);
    }
    if (err < best) {
      std::memcpy(L, aux, static_cast<size_t>(n));
      best = err;
      scale = this_scale;
      lo = this_min;
    }
  }
  *neg_min = -lo;
  return scale;
}

// Symmetric fit of x ~ scale * (L - nmax), L in 0..2*nmax-1, weighted by
// x^2: the grid through the largest |x|, then 18 stretched grids; keeps the
// one maximising the explained weighted energy. Returns the scale.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < 1e-15f) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto sums = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
      float w = x[i] * x[i];
      *sumlx += w * x[i] * l;
      *suml2 += w * l * l;
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(nmax +
                                 std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i]))));
  };
  float iscale = -nmax / max;
  float sumlx, suml2;
  assign(iscale);
  sums(iscale, &sumlx, &suml2);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sums(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Sub-block s (32 weights) of a lattice block, unpacked as ggml's
// dequantize_row_iq* reads it (layouts in ggml_blocks.h): its grid points
// (4 of 8 weights for IQ2, 8 of 4 for IQ3), the sign byte of each 8
// weights, and the scale of each 16.
struct LatticeSub {
  int points[8];
  uint8_t signs[4];
  float db[2];
};

LatticeSub lattice_sub_block(TensorType t, const uint8_t* blk, int s) {
  LatticeSub L{};
  const float d = f16_at(blk);
  auto u32_at = [](const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  // IQ2_XXS and IQ3_XXS: a u32 of four 7-bit sign indices and the scale.
  auto sign7_and_scale = [&](uint32_t a, float step) {
    for (int l = 0; l < 4; ++l) L.signs[l] = lattice_signs((a >> (7 * l)) & 127);
    L.db[0] = L.db[1] = d * (0.5f + static_cast<float>(a >> 28)) * step;
  };
  auto nibble_scales = [&](uint8_t sc) {
    L.db[0] = d * (0.5f + static_cast<float>(sc & 0xF)) * 0.25f;
    L.db[1] = d * (0.5f + static_cast<float>(sc >> 4)) * 0.25f;
  };
  switch (t) {
    case TensorType::iq2_xxs:
      for (int l = 0; l < 4; ++l) L.points[l] = blk[2 + 8 * s + l];
      sign7_and_scale(u32_at(blk + 2 + 8 * s + 4), 0.25f);
      break;
    case TensorType::iq2_xs:
      for (int l = 0; l < 4; ++l) {
        const int q = blk[2 + 8 * s + 2 * l] | (blk[3 + 8 * s + 2 * l] << 8);
        L.points[l] = q & 511;
        L.signs[l] = lattice_signs(q >> 9);
      }
      nibble_scales(blk[66 + s]);
      break;
    case TensorType::iq2_s:
      for (int l = 0; l < 4; ++l) {
        L.points[l] = blk[2 + 4 * s + l] | (((blk[66 + s] >> (2 * l)) & 3) << 8);
        L.signs[l] = blk[34 + 4 * s + l];
      }
      nibble_scales(blk[74 + s]);
      break;
    case TensorType::iq3_xxs:
      for (int k = 0; k < 8; ++k) L.points[k] = blk[2 + 8 * s + k];
      sign7_and_scale(u32_at(blk + 66 + 4 * s), 0.5f);
      break;
    case TensorType::iq3_s:
      for (int k = 0; k < 8; ++k)
        L.points[k] = blk[2 + 8 * s + k] | (((blk[66 + s] >> k) & 1) << 8);
      for (int l = 0; l < 4; ++l) L.signs[l] = blk[74 + 4 * s + l];
      L.db[0] = L.db[1] =
          d * static_cast<float>(1 + 2 * ((blk[106 + s / 2] >> (4 * (s % 2))) & 0xF));
      break;
    default: throw Error("not a lattice format: " + std::string(tensor_type_info(t).name));
  }
  return L;
}

}  // namespace

void q4k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

std::vector<int64_t> unsigned_codebook(TensorType t) {
  const int8_t* v = t == TensorType::mxfp4 ? kMxfp4Values : kIq4nlValues;
  std::vector<int64_t> out;
  for (int i = 0; i < 16; ++i) out.push_back(v[i] + 128);
  return out;
}

void quantize_q8_0(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 32, "quantize_q8_0");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 34) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(out, d);
    for (int j = 0; j < 32; ++j)
      out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
  }
}

void quantize_q4_0(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 32, "quantize_q4_0");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 18) {
    // The signed value of largest magnitude (the first one on ties) maps to -8.
    const float d = signed_max(x) / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(out, d);
    for (int j = 0; j < 16; ++j) {
      int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      out[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

namespace {

// Q4_1/Q5_1's block header: d = (max - min) / levels and the min, as f16
// at out and out + 2. Returns the min and, in *id, 1/d (0 for d = 0).
float put_scale_min(const float* x, float levels, uint8_t* out, float* id) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  const float d = (hi - lo) / levels;
  *id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(out, d);
  put_f16(out + 2, lo);
  return lo;
}

// Stores 32 5-bit codes: low nibbles in 16 bytes (weight j and j + 16 share
// byte j), the 5th bits as a little-endian u32 (bit j for weight j).
void put_5bit(const int* q, uint8_t* qh, uint8_t* qs) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
    h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    h |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh, &h, 4);
}

// The 5-bit code of weight j.
int code_5bit(const uint8_t* qh, const uint8_t* qs, int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  int lo = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
  return lo | static_cast<int>(((h >> j) & 1) << 4);
}

}  // namespace

void quantize_q4_1(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 32, "quantize_q4_1");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 20) {
    float id;
    const float lo = put_scale_min(x, 15.0f, out, &id);
    for (int j = 0; j < 16; ++j) {
      int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f)));
      int q1 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - lo) * id + 0.5f)));
      out[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 32, "quantize_q5_0");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 22) {
    const float d = signed_max(x) / -16.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(out, d);
    int q[32];
    for (int j = 0; j < 32; ++j)
      q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    put_5bit(q, out + 2, out + 6);
  }
}

void quantize_q5_1(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 32, "quantize_q5_1");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 24) {
    float id;
    const float lo = put_scale_min(x, 31.0f, out, &id);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>((x[j] - lo) * id + 0.5f);
    put_5bit(q, out + 4, out + 8);
  }
}

namespace {

// Q4_K and Q5_K's shared search: 32-weight sub-blocks fitted with codes
// 0..nmax over grids from `rmin`, their scales and mins as 6-bit values
// against the block's d and dmin (stored with the packed scales in the
// 16-byte header at `hdr`), then every code refitted to the quantised
// scales. Codes go to L[256].
void quantize_k_scale_min(const float* x, int nmax, float rmin, int nstep, uint8_t* hdr,
                          uint8_t* L) {
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* sc = hdr + 4;
  std::memset(sc, 0, 12);
  for (int j = 0; j < 8; ++j) {
    // ggml stores these through uint8_t, so the int wraps before the clamp.
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      sc[j] = ls;
      sc[j + 4] = lm;
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      sc[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  put_f16(hdr, max_scale / 63.0f);
  put_f16(hdr + 2, max_min / 63.0f);
  float d = f16_at(hdr), dmin = f16_at(hdr + 2);
  for (int j = 0; j < 8; ++j) {
    int s6, m6;
    q4k_scale_min(sc, j, &s6, &m6);
    const float dj = d * s6;
    if (dj == 0) continue;
    const float mj = dmin * m6;
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] =
          static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int((x[32 * j + l] + mj) / dj))));
  }
}

// Symmetric 3-bit fit of 16 weights, x ~ scale * (L - nmax), weighted by
// x^2: the grid through the largest |x|, then up to 5 passes moving single
// codes while that raises sum(w x l)^2 / sum(w l^2). Returns the scale.
float fit_q3(const float* x, int8_t* L) {
  const int n = 16, nmax = 4;
  const float max = signed_max(x, n);
  if (std::fabs(max) < 1e-15f) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<int8_t>(l);
    float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx <= 0) continue;
      float sl2 = suml2 - w * L[i] * L[i];
      int l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
      if (l == L[i]) continue;
      slx += w * x[i] * l;
      sl2 += w * l * l;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

// Packs 256 2-bit codes as Q2_K and Q3_K hold them: weight 128 h + 32 j + l
// in bits 2j..2j+1 of qs[32 h + l].
void put_2bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h, L += 128, qs += 32)
    for (int l = 0; l < 32; ++l)
      qs[l] = static_cast<uint8_t>(L[l] | (L[l + 32] << 2) | (L[l + 64] << 4) | (L[l + 96] << 6));
}

}  // namespace

int q3k_scale(const uint8_t* s, int g) {
  int low = g < 8 ? s[g] & 0xF : s[g - 8] >> 4;
  return (low | (((s[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
}

void quantize_q4_k(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 256, "quantize_q4_k");
  for (int64_t b = 0; b < n / 256; ++b, x += 256, out += 144) {
    uint8_t L[256];
    quantize_k_scale_min(x, 15, -1.0f, 20, out, L);
    uint8_t* q = out + fields::Q4_K::qs;
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        q[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 256, "quantize_q5_k");
  for (int64_t b = 0; b < n / 256; ++b, x += 256, out += 176) {
    uint8_t L[256];
    quantize_k_scale_min(x, 31, -0.5f, 15, out, L);
    uint8_t* qh = out + fields::Q5_K::qh;
    uint8_t* q = out + fields::Q5_K::qs;
    std::memset(qh, 0, 32);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        q[32 * c + l] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
        qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
  }
}

void quantize_q3_k(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 256, "quantize_q3_k");
  for (int64_t b = 0; b < n / 256; ++b, x += 256, out += 110) {
    int8_t L[256];
    float scales[16];
    for (int g = 0; g < 16; ++g) scales[g] = fit_q3(x + 16 * g, L + 16 * g);
    const float max_scale = signed_max(scales, 16);
    uint8_t* sc = out + fields::Q3_K::scales;
    std::memset(sc, 0, 12);
    if (max_scale != 0) {
      const float iscale = -32.0f / max_scale;
      for (int g = 0; g < 16; ++g) {
        // ggml keeps the rounded value in an int8_t: it wraps before the clamp.
        int l = static_cast<int8_t>(nearest_int(iscale * scales[g]));
        l = std::max(-32, std::min(31, l)) + 32;
        sc[g % 8] |= static_cast<uint8_t>((l & 0xF) << (g < 8 ? 0 : 4));
        sc[8 + g % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (g / 4)));
      }
      put_f16(out + fields::Q3_K::d, 1 / iscale);
    } else {
      put_f16(out + fields::Q3_K::d, 0.0f);
    }
    const float d = f16_at(out + fields::Q3_K::d);
    for (int g = 0; g < 16; ++g) {
      const float dg = d * q3k_scale(sc, g);
      if (dg == 0) continue;
      for (int i = 0; i < 16; ++i)
        L[16 * g + i] =
            static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * g + i] / dg))) + 4);
    }
    // The 3rd bit of weight e goes to bit e / 32 of hmask[e % 32].
    uint8_t low[256];
    std::memset(out, 0, 32);
    for (int e = 0; e < 256; ++e) {
      if (L[e] > 3) out[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
      low[e] = static_cast<uint8_t>(L[e] & 3);
    }
    put_2bit(low, out + fields::Q3_K::qs);
  }
}

void quantize_q2_k(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 256, "quantize_q2_k");
  for (int64_t b = 0; b < n / 256; ++b, x += 256, out += 84) {
    uint8_t L[256];
    float scales[16], mins[16], w[16];
    float max_scale = 0, max_min = 0;
    for (int g = 0; g < 16; ++g) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * g + l]);
      scales[g] = fit_scale_min(16, 3, x + 16 * g, w, L + 16 * g, &mins[g], -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[g]);
      max_min = std::max(max_min, mins[g]);
    }
    uint8_t* sc = out;
    std::memset(sc, 0, 16);
    put_f16(out + fields::Q2_K::d, max_scale > 0 ? max_scale / 15.0f : 0.0f);
    put_f16(out + fields::Q2_K::dmin, max_min > 0 ? max_min / 15.0f : 0.0f);
    if (max_scale > 0)
      for (int g = 0; g < 16; ++g)
        sc[g] = static_cast<uint8_t>(nearest_int(15.0f / max_scale * scales[g]));
    if (max_min > 0)
      for (int g = 0; g < 16; ++g)
        sc[g] |= static_cast<uint8_t>(nearest_int(15.0f / max_min * mins[g]) << 4);
    const float d = f16_at(out + fields::Q2_K::d), dmin = f16_at(out + fields::Q2_K::dmin);
    for (int g = 0; g < 16; ++g) {
      const float dg = d * (sc[g] & 0xF);
      if (dg == 0) continue;
      const float mg = dmin * (sc[g] >> 4);
      for (int i = 0; i < 16; ++i)
        L[16 * g + i] =
            static_cast<uint8_t>(std::max(0, std::min(3, nearest_int((x[16 * g + i] + mg) / dg))));
    }
    put_2bit(L, out + fields::Q2_K::qs);
  }
}

void quantize_q6_k(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 256, "quantize_q6_k");
  for (int64_t b = 0; b < n / 256; ++b, x += 256, out += 210) {
    int8_t L[256];
    float scales[16];
    for (int g = 0; g < 16; ++g) scales[g] = fit_symmetric(16, 32, x + 16 * g, L + 16 * g);
    const float max_scale = signed_max(scales, 16);
    std::memset(out, 0, 210);
    if (std::fabs(max_scale) < 1e-15f) continue;  // all zero: d = 0 too
    float iscale = -128.0f / max_scale;
    using F = fields::Q6_K;
    put_f16(out + F::d, 1 / iscale);
    auto* sc = reinterpret_cast<int8_t*>(out + F::scales);
    for (int g = 0; g < 16; ++g)
      sc[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
    float d = f16_at(out + F::d);
    for (int g = 0; g < 16; ++g) {
      float dg = d * sc[g];
      if (dg == 0) continue;
      for (int i = 0; i < 16; ++i)
        L[16 * g + i] =
            static_cast<int8_t>(std::max(-32, std::min(31, nearest_int(x[16 * g + i] / dg))) + 32);
    }
    uint8_t* ql = out + F::ql;
    uint8_t* qh = out + F::qh;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32) {
      const int8_t* l8 = L + 128 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((l8[l] & 0xF) | ((l8[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((l8[l + 32] & 0xF) | ((l8[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((l8[l] >> 4) | ((l8[l + 32] >> 4) << 2) |
                                     ((l8[l + 64] >> 4) << 4) | ((l8[l + 96] >> 4) << 6));
      }
    }
  }
}

namespace {

// The index of the entry of the ascending table `v` nearest x (the lower
// one on ties), by bisection as ggml's best_index_int8.
int nearest_entry(const int8_t* v, float x) {
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    (x < v[mid] ? hi : lo) = mid;
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// IQ4's fit of 32 weights to scale * kIq4nlValues[L]: the grid through the
// largest |x|, then 15 stretched grids, by x^2-weighted least squares.
// Returns the scale (0 for an all-zero block).
float fit_iq4(const float* x, uint8_t* L) {
  const int8_t* v = kIq4nlValues;
  const float max = signed_max(x);
  if (std::fabs(max) < 1e-15f) return 0.0f;
  auto fit = [&](float id, float* sumqx, float* sumq2, bool keep) {
    *sumqx = *sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      int l = nearest_entry(v, id * x[j]);
      if (keep) L[j] = static_cast<uint8_t>(l);
      float q = v[l], w = x[j] * x[j];
      *sumqx += w * q * x[j];
      *sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  fit(1 / (-max / v[0]), &sumqx, &sumq2, true);
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -7; t <= 7; ++t) {
    fit((t + v[0]) / max, &sumqx, &sumq2, false);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Packs 32 4-bit codes as Q4_0 holds them.
void put_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

}  // namespace

float e8m0_half(uint8_t e) {
  uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void quantize_iq4_nl(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 32, "quantize_iq4_nl");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 18) {
    uint8_t L[32];
    const float d = fit_iq4(x, L);
    put_f16(out, d);
    // ggml re-picks every code against the unrounded scale.
    const float id = d != 0 ? 1 / d : 0.0f;
    for (int j = 0; j < 32; ++j)
      L[j] = static_cast<uint8_t>(nearest_entry(kIq4nlValues, id * x[j]));
    put_nibbles(L, out + 2);
  }
}

void quantize_iq4_xs(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 256, "quantize_iq4_xs");
  for (int64_t b = 0; b < n / 256; ++b, x += 256, out += 136) {
    uint8_t L[32];
    float scales[8];
    for (int s = 0; s < 8; ++s) scales[s] = fit_iq4(x + 32 * s, L);
    const float d = -signed_max(scales, 8) / 32;
    put_f16(out, d);
    const float id = d != 0 ? 1 / d : 0.0f;
    uint16_t scales_h = 0;
    using F = fields::IQ4_XS;
    std::memset(out + F::scales_l, 0, 4);
    for (int s = 0; s < 8; ++s) {
      int l = std::max(-32, std::min(31, nearest_int(id * scales[s])));
      const float dl = d * l, idl = dl != 0 ? 1 / dl : 0.0f;
      for (int j = 0; j < 32; ++j)
        L[j] = static_cast<uint8_t>(nearest_entry(kIq4nlValues, idl * x[32 * s + j]));
      put_nibbles(L, out + F::qs + 16 * s);
      l += 32;
      out[F::scales_l + s / 2] |= static_cast<uint8_t>((l & 0xF) << (4 * (s % 2)));
      scales_h |= static_cast<uint16_t>((l >> 4) << (2 * s));
    }
    std::memcpy(out + F::scales_h, &scales_h, 2);
  }
}

void quantize_mxfp4(const float* x, int64_t n, uint8_t* out) {
  check_multiple(n, 32, "quantize_mxfp4");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 17) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const uint8_t e =
        amax > 0 ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : uint8_t{0};
    const float d = e8m0_half(e);
    out[0] = e;
    uint8_t L[32];
    for (int j = 0; j < 32; ++j) {
      int best = 0;
      float best_err = std::fabs(kMxfp4Values[0] * d - x[j]);
      for (int i = 1; i < 16; ++i) {
        float err = std::fabs(kMxfp4Values[i] * d - x[j]);
        if (err < best_err) best = i, best_err = err;
      }
      L[j] = static_cast<uint8_t>(best);
    }
    put_nibbles(L, out + 1);
  }
}

void quantize(TensorType t, const float* x, int64_t n, uint8_t* out) {
  switch (t) {
    case TensorType::q4_0: return quantize_q4_0(x, n, out);
    case TensorType::q4_1: return quantize_q4_1(x, n, out);
    case TensorType::q5_0: return quantize_q5_0(x, n, out);
    case TensorType::q5_1: return quantize_q5_1(x, n, out);
    case TensorType::q8_0: return quantize_q8_0(x, n, out);
    case TensorType::q2_K: return quantize_q2_k(x, n, out);
    case TensorType::q3_K: return quantize_q3_k(x, n, out);
    case TensorType::q4_K: return quantize_q4_k(x, n, out);
    case TensorType::q5_K: return quantize_q5_k(x, n, out);
    case TensorType::q6_K: return quantize_q6_k(x, n, out);
    case TensorType::iq4_nl: return quantize_iq4_nl(x, n, out);
    case TensorType::iq4_xs: return quantize_iq4_xs(x, n, out);
    case TensorType::mxfp4: return quantize_mxfp4(x, n, out);
    case TensorType::iq2_xxs:
    case TensorType::iq2_xs:
    case TensorType::iq2_s:
    case TensorType::iq3_xxs:
    case TensorType::iq3_s: break;
    default: throw Error("quantize: " + tensor_type_name(t) + " is not a block format");
  }
  throw Error("quantize: Kiln has no quantiser for " + std::string(tensor_type_info(t).name) +
              " (ggml's needs an importance matrix; llama-quantize writes these files)");
}

bool has_quantizer(TensorType t) { return is_block_quantized(t) && !is_lattice(t); }

void dequantize(TensorType t, const uint8_t* blk, int64_t n, float* y) {
  const TensorTypeInfo& f = tensor_type_info(t);
  if (f.kind != TensorKind::blocks)
    throw Error("dequantize: " + std::string(f.name) + " is not a block format");
  check_multiple(n, f.block_elems, "dequantize " + std::string(f.name));
  for (int64_t b = 0; b < n / f.block_elems; ++b, blk += f.block_bytes) {
    switch (t) {
      case TensorType::q8_0: {
        float d = f16_at(blk);
        for (int j = 0; j < 32; ++j) *y++ = d * static_cast<int8_t>(blk[2 + j]);
        break;
      }
      case TensorType::q4_0: {
        float d = f16_at(blk);
        for (int j = 0; j < 16; ++j) y[j] = d * ((blk[2 + j] & 0xF) - 8);
        for (int j = 0; j < 16; ++j) y[16 + j] = d * ((blk[2 + j] >> 4) - 8);
        y += 32;
        break;
      }
      case TensorType::q4_1: {
        float d = f16_at(blk), m = f16_at(blk + 2);
        for (int j = 0; j < 16; ++j) y[j] = (blk[4 + j] & 0xF) * d + m;
        for (int j = 0; j < 16; ++j) y[16 + j] = (blk[4 + j] >> 4) * d + m;
        y += 32;
        break;
      }
      case TensorType::q5_0: {
        float d = f16_at(blk);
        for (int j = 0; j < 32; ++j) *y++ = (code_5bit(blk + 2, blk + 6, j) - 16) * d;
        break;
      }
      case TensorType::q5_1: {
        float d = f16_at(blk), m = f16_at(blk + 2);
        for (int j = 0; j < 32; ++j) *y++ = code_5bit(blk + 4, blk + 8, j) * d + m;
        break;
      }
      case TensorType::q4_K: {
        using F = fields::Q4_K;
        float d = f16_at(blk + F::d), dmin = f16_at(blk + F::dmin);
        const uint8_t* scales = blk + F::scales;
        const uint8_t* qs = blk + F::qs;
        for (int c = 0; c < 4; ++c) {  // 64-weight chunks: low nibbles, then high
          int sc, m;
          q4k_scale_min(scales, 2 * c, &sc, &m);
          float d1 = d * sc, m1 = dmin * m;
          q4k_scale_min(scales, 2 * c + 1, &sc, &m);
          float d2 = d * sc, m2 = dmin * m;
          for (int l = 0; l < 32; ++l) y[l] = d1 * (qs[32 * c + l] & 0xF) - m1;
          for (int l = 0; l < 32; ++l) y[32 + l] = d2 * (qs[32 * c + l] >> 4) - m2;
          y += 64;
        }
        break;
      }
      case TensorType::q5_K: {
        using F = fields::Q5_K;
        float d = f16_at(blk + F::d), dmin = f16_at(blk + F::dmin);
        const uint8_t* qh = blk + F::qh;
        const uint8_t* qs = blk + F::qs;
        for (int s = 0; s < 8; ++s) {
          int sc, m;
          q4k_scale_min(blk + F::scales, s, &sc, &m);
          const float ds = d * sc, ms = dmin * m;
          for (int l = 0; l < 32; ++l) {
            int q = (s % 2 == 0 ? qs[32 * (s / 2) + l] & 0xF : qs[32 * (s / 2) + l] >> 4) +
                    ((qh[l] >> s) & 1 ? 16 : 0);
            *y++ = ds * q - ms;
          }
        }
        break;
      }
      case TensorType::q3_K: {
        using F = fields::Q3_K;
        const float d = f16_at(blk + F::d);
        for (int e = 0; e < 256; ++e) {
          const int l = e % 32, j = (e % 128) / 32;
          const int q = ((blk[F::qs + 32 * (e / 128) + l] >> (2 * j)) & 3) -
                        ((blk[F::hmask + l] >> (e / 32)) & 1 ? 0 : 4);
          *y++ = d * q3k_scale(blk + F::scales, e / 16) * q;
        }
        break;
      }
      case TensorType::q2_K: {
        using F = fields::Q2_K;
        const float d = f16_at(blk + F::d), dmin = f16_at(blk + F::dmin);
        for (int e = 0; e < 256; ++e) {
          const uint8_t sc = blk[e / 16];
          const int q = (blk[F::qs + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
          *y++ = d * (sc & 0xF) * q - dmin * (sc >> 4);
        }
        break;
      }
      case TensorType::iq4_nl:
      case TensorType::mxfp4: {
        const bool nl = t == TensorType::iq4_nl;
        const float d = nl ? f16_at(blk) : e8m0_half(blk[0]);
        const int8_t* v = nl ? kIq4nlValues : kMxfp4Values;
        const uint8_t* qs = blk + (nl ? fields::IQ4_NL::qs : fields::MXFP4::qs);
        for (int j = 0; j < 16; ++j) y[j] = nl ? d * v[qs[j] & 0xF] : v[qs[j] & 0xF] * d;
        for (int j = 0; j < 16; ++j) y[16 + j] = nl ? d * v[qs[j] >> 4] : v[qs[j] >> 4] * d;
        y += 32;
        break;
      }
      case TensorType::iq4_xs: {
        using F = fields::IQ4_XS;
        const float d = f16_at(blk + F::d);
        uint16_t scales_h;
        std::memcpy(&scales_h, blk + F::scales_h, 2);
        for (int s = 0; s < 8; ++s) {
          const int ls = ((blk[F::scales_l + s / 2] >> (4 * (s % 2))) & 0xF) |
                         (((scales_h >> (2 * s)) & 3) << 4);
          const float dl = d * (ls - 32);
          const uint8_t* qs = blk + F::qs + 16 * s;
          for (int j = 0; j < 16; ++j) y[j] = dl * kIq4nlValues[qs[j] & 0xF];
          for (int j = 0; j < 16; ++j) y[16 + j] = dl * kIq4nlValues[qs[j] >> 4];
          y += 32;
        }
        break;
      }
      case TensorType::iq2_xxs:
      case TensorType::iq2_xs:
      case TensorType::iq2_s:
      case TensorType::iq3_xxs:
      case TensorType::iq3_s: {
        const std::vector<int64_t>& grid = lattice_grid(t);
        const int per_point = t == TensorType::iq3_xxs || t == TensorType::iq3_s ? 4 : 8;
        for (int s = 0; s < 8; ++s) {
          const LatticeSub L = lattice_sub_block(t, blk, s);
          for (int e = 0; e < 32; ++e) {
            const auto mag = static_cast<float>(
                (static_cast<uint64_t>(grid[L.points[e / per_point]]) >> (8 * (e % per_point))) &
                255);
            const bool neg = (L.signs[e / 8] >> (e % 8)) & 1;
            *y++ = L.db[e / 16] * mag * (neg ? -1.f : 1.f);
          }
        }
        break;
      }
      case TensorType::q6_K: {
        using F = fields::Q6_K;
        const uint8_t* ql = blk + F::ql;
        const uint8_t* qh = blk + F::qh;
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + F::scales);
        float d = f16_at(blk + F::d);
        for (int half = 0; half < 2; ++half) {
          for (int l = 0; l < 32; ++l) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
          }
          y += 128;
          ql += 64;
          qh += 32;
          sc += 8;
        }
        break;
      }
      default: break;  // not a block format: refused above
    }
  }
}

}  // namespace kiln::ggml
