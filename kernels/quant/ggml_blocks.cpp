#include "kernels/quant/ggml_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ir/dtype.h"
#include "ir/error.h"

namespace kiln::ggml {

namespace {

constexpr BlockFormat kFormats[] = {
    {QuantType::Q4_0, "q4_0", 32, 18},
    {QuantType::Q8_0, "q8_0", 32, 34},
    {QuantType::Q4_K, "q4_K", 256, 144},
    {QuantType::Q6_K, "q6_K", 256, 210},
};

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

// The 6-bit scale and min of sub-block j of a Q4_K block (FORMATS.md).
void q4k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

}  // namespace

const BlockFormat& block_format(QuantType t) { return block_format(static_cast<int>(t)); }

const BlockFormat& block_format(int id) {
  for (const BlockFormat& f : kFormats)
    if (static_cast<int>(f.type) == id) return f;
  throw Error("ggml type id " + std::to_string(id) +
              " is not a quantized format Kiln supports (q4_0=2, q8_0=8, q4_K=12, q6_K=14)");
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
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(out, d);
    for (int j = 0; j < 16; ++j) {
      int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      out[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize(QuantType t, const uint8_t* blk, int64_t n, float* y) {
  const BlockFormat& f = block_format(t);
  check_multiple(n, f.block_elems, "dequantize " + std::string(f.name));
  for (int64_t b = 0; b < n / f.block_elems; ++b, blk += f.block_bytes) {
    switch (t) {
      case QuantType::Q8_0: {
        float d = f16_at(blk);
        for (int j = 0; j < 32; ++j) *y++ = d * static_cast<int8_t>(blk[2 + j]);
        break;
      }
      case QuantType::Q4_0: {
        float d = f16_at(blk);
        for (int j = 0; j < 16; ++j) y[j] = d * ((blk[2 + j] & 0xF) - 8);
        for (int j = 0; j < 16; ++j) y[16 + j] = d * ((blk[2 + j] >> 4) - 8);
        y += 32;
        break;
      }
      case QuantType::Q4_K: {
        float d = f16_at(blk), dmin = f16_at(blk + 2);
        const uint8_t* scales = blk + 4;
        const uint8_t* qs = blk + 16;
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
      case QuantType::Q6_K: {
        const uint8_t* ql = blk;
        const uint8_t* qh = blk + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
        float d = f16_at(blk + 208);
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
    }
  }
}

}  // namespace kiln::ggml
