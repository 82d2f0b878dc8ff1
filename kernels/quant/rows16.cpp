#include "kernels/quant/rows16.h"

#include <cstring>
#include <string>
#include <string_view>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"

namespace kiln::ggml {

namespace {

void check_shape(std::string_view format, int64_t m, int64_t k) {
  if (m <= 0 || m % 16 || k <= 0 || k % 256)
    throw Error(std::string(format) + " 16-row interleave: [" + std::to_string(m) + ", " +
                std::to_string(k) + "] needs rows a multiple of 16 and columns a multiple of 256");
}

// Visits row r (0-15) of every chunk of every layout: `chunk`, the index
// of the chunk of row group g and 256-weight span b (g * spans + b), and
// the row's index g * 16 + r in the matrix. Spans innermost, so each row is
// read front to back: a row group's chunks fit the L2 cache, while 16 rows
// read a block at a time defeat the prefetchers (the source is mapped from
// the file and comes from DRAM).
template <class F>
void each_chunk_row(int64_t m, int64_t k, F fn) {
  const int64_t spans = k / 256;
  for (int64_t g = 0; g < m / 16; ++g)
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t b = 0; b < spans; ++b) fn(g * spans + b, r, g * 16 + r, b);
}

// The super-block formats' interleave walk: put(c, blk, r) for row r of
// every chunk, c the chunk in `out` (chunk_bytes each) and blk the row's
// ggml block of type t that the chunk holds.
template <class F>
void each_block_to_chunk(TensorType t, const uint8_t* blocks, int64_t m, int64_t k,
                         int64_t chunk_bytes, uint8_t* out, F put) {
  const int64_t block_bytes = tensor_type_info(t).block_bytes;
  each_chunk_row(m, k, [&](int64_t chunk, int64_t r, int64_t row, int64_t b) {
    put(out + chunk * chunk_bytes, blocks + (row * (k / 256) + b) * block_bytes, r);
  });
}

// Their dequantisers' walk: get(c, r, row) for row r of every chunk c
// (chunk_bytes each), row pointing at that row's 256 weights of the chunk
// in the returned [m, k] matrix.
template <class F>
std::vector<float> dequantize_each_chunk(const uint8_t* rows16, int64_t m, int64_t k,
                                         int64_t chunk_bytes, F get) {
  std::vector<float> w(static_cast<size_t>(m * k));
  each_chunk_row(m, k, [&](int64_t chunk, int64_t r, int64_t row, int64_t b) {
    get(rows16 + chunk * chunk_bytes, r, w.data() + row * k + b * 256);
  });
  return w;
}

float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_bits_to_f32(h);
}

// Q4_K (144-byte blocks: d, dmin, scales[12], qs[128]) and Q5_K (176:
// qh[32] before qs).
template <bool Q5>
void interleave_k_rows16(const uint8_t* blocks, int64_t m, int64_t k, uint8_t* out) {
  using L = KRows16<Q5>;
  using F = fields::Q5_K;  // Q4_K's header, then qh; Q4_K's qs where Q5_K's qh is
  const int64_t qs = Q5 ? F::qs : fields::Q4_K::qs;
  check_shape(Q5 ? "Q5_K" : "Q4_K", m, k);
  auto put = [&](uint8_t* c, const uint8_t* blk, int64_t r) {
    std::memcpy(c + L::kD + 2 * r, blk + F::d, 2);
    std::memcpy(c + L::kDmin + 2 * r, blk + F::dmin, 2);
    for (int j = 0; j < 8; ++j) {
      int sc, mn;
      q4k_scale_min(blk + F::scales, j, &sc, &mn);
      c[L::kScales + 16 * j + r] = static_cast<uint8_t>(sc);
      c[L::min_at(j, r)] = static_cast<uint8_t>(mn);
    }
    for (int64_t p = 0; p < 4; ++p)
      for (int64_t q = 0; q < 8; ++q)
        std::memcpy(c + L::kCodes + L::code_at(p, q, r, 0), blk + qs + 32 * p + 4 * q, 4);
    if constexpr (Q5)
      for (int64_t p = 0; p < 4; ++p)
        for (int64_t l = 0; l < 32; ++l) {  // weights 64 p + l (lo) and 64 p + 32 + l (hi)
          const int byte = blk[qs + 32 * p + l], bits = blk[F::qh + l] >> (2 * p);
          const int lo = (byte & 15) | (bits & 1) << 4, hi = (byte >> 4) | (bits >> 1 & 1) << 4;
          c[L::kCodes + L::code_at(p, l / 4, r, l % 4)] = static_cast<uint8_t>(lo | (hi >> 2) << 5);
          uint8_t& hl = c[L::high_at(l / 4, r) + l % 4];
          hl = static_cast<uint8_t>((p ? hl : 0) | (hi & 3) << (2 * p));
        }
  };
  each_block_to_chunk(Q5 ? TensorType::q5_K : TensorType::q4_K, blocks, m, k, L::kChunkBytes, out,
                      put);
}

template <bool Q5>
std::vector<float> dequantize_k_rows16(const uint8_t* rows16, int64_t m, int64_t k) {
  using L = KRows16<Q5>;
  auto get = [&](const uint8_t* c, int64_t r, float* row) {
    float d = f16(c + L::kD + 2 * r), dmin = f16(c + L::kDmin + 2 * r);
    for (int64_t p = 0; p < 4; ++p)
      for (int64_t q = 0; q < 8; ++q)
        for (int64_t i = 0; i < 4; ++i) {
          uint8_t byte = c[L::kCodes + L::code_at(p, q, r, i)];
          for (int64_t half = 0; half < 2; ++half) {
            int64_t j = 2 * p + half;
            int code = half ? byte >> 4 : byte & 15;
            if constexpr (Q5)
              code = half ? (byte >> 5) << 2 | (c[L::high_at(q, r) + i] >> (2 * p) & 3) : byte & 31;
            row[32 * j + 4 * q + i] =
                d * c[L::kScales + 16 * j + r] * code - dmin * c[L::min_at(j, r)];
          }
        }
  };
  return dequantize_each_chunk(rows16, m, k, L::kChunkBytes, get);
}

void interleave_iq4_xs_rows16(const uint8_t* blocks, int64_t m, int64_t k, uint8_t* out) {
  using L = IQ4XSRows16;
  check_shape("IQ4_XS", m, k);
  using F = fields::IQ4_XS;
  auto put = [&](uint8_t* c, const uint8_t* blk, int64_t r) {
    std::memcpy(c + L::kD + 2 * r, blk + F::d, 2);
    const int scales_h = blk[F::scales_h] | (blk[F::scales_h + 1] << 8);
    for (int64_t s = 0; s < 8; ++s) {
      c[L::scale_at(s, r)] = static_cast<uint8_t>(
          ((blk[F::scales_l + s / 2] >> (4 * (s % 2))) & 15) | (((scales_h >> (2 * s)) & 3) << 4));
      for (int64_t g = 0; g < 4; ++g)
        std::memcpy(c + L::code_at(s, g, r), blk + F::qs + 16 * s + 4 * g, 4);
    }
  };
  each_block_to_chunk(TensorType::iq4_xs, blocks, m, k, L::kChunkBytes, out, put);
}

std::vector<float> dequantize_iq4_xs_rows16(const uint8_t* rows16, int64_t m, int64_t k) {
  using L = IQ4XSRows16;
  auto get = [&](const uint8_t* c, int64_t r, float* row) {
    const float d = f16(c + L::kD + 2 * r);
    for (int64_t s = 0; s < 8; ++s) {
      const float dl = d * static_cast<float>(c[L::scale_at(s, r)] - 32);
      for (int64_t g = 0; g < 4; ++g)
        for (int64_t i = 0; i < 4; ++i) {
          const uint8_t byte = c[L::code_at(s, g, r) + i];
          row[32 * s + 4 * g + i] = dl * kIq4nlValues[byte & 15];
          row[32 * s + 16 + 4 * g + i] = dl * kIq4nlValues[byte >> 4];
        }
    }
  };
  return dequantize_each_chunk(rows16, m, k, L::kChunkBytes, get);
}

using L6 = Q6KRows16;
// Byte offset in a chunk of group (h, g)'s piece `part` (0: p, 1: q, 2: r)
// for row r.
int64_t q6_code(int64_t h, int64_t g, int64_t part, int64_t r) {
  return L6::kCodes + (h * 8 + g) * L6::kGroupBytes + part * 64 + r * 4;
}

void interleave_q6_k_rows16(const uint8_t* blocks, int64_t m, int64_t k, uint8_t* out) {
  check_shape("Q6_K", m, k);
  using F = fields::Q6_K;
  auto put = [&](uint8_t* c, const uint8_t* blk, int64_t r) {
    std::memcpy(c + L6::kD + 2 * r, blk + F::d, 2);
    for (int64_t s = 0; s < 16; ++s) c[L6::scale_at(s, r)] = blk[F::scales + s] ^ 0x80;  // i8 + 128
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t l = 0; l < 32; ++l) {
        // Weights 128 h + l + 32 j: ql[64 h + l] holds j = 0 (low nibble)
        // and 2, ql[64 h + 32 + l] j = 1 and 3, qh[32 h + l] their top bits.
        const uint8_t* ql = blk + F::ql + 64 * h;
        const int a = ql[l], b = ql[32 + l], hb = blk[F::qh + 32 * h + l];
        const int c0 = (a & 15) | (hb & 3) << 4, c1 = (b & 15) | (hb >> 2 & 3) << 4;
        const int c2 = (a >> 4) | (hb >> 4 & 3) << 4, c3 = (b >> 4) | (hb >> 6) << 4;
        const int64_t at = q6_code(h, l / 4, 0, r) + l % 4;
        c[at] = static_cast<uint8_t>(c0 << 2 | (c3 & 3));
        c[at + 64] = static_cast<uint8_t>(c1 << 2 | (c3 >> 2 & 3));
        c[at + 128] = static_cast<uint8_t>(c2 << 2 | c3 >> 4);
      }
  };
  each_block_to_chunk(TensorType::q6_K, blocks, m, k, L6::kChunkBytes, out, put);
}

std::vector<float> dequantize_q6_k_rows16(const uint8_t* rows16, int64_t m, int64_t k) {
  auto get = [&](const uint8_t* c, int64_t r, float* row) {
    float d = f16(c + L6::kD + 2 * r);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t g = 0; g < 8; ++g)
        for (int64_t i = 0; i < 4; ++i) {
          const int p = c[q6_code(h, g, 0, r) + i], q = c[q6_code(h, g, 1, r) + i];
          const int rr = c[q6_code(h, g, 2, r) + i];
          const int codes[4] = {p >> 2, q >> 2, rr >> 2, (p & 3) | (q & 3) << 2 | (rr & 3) << 4};
          for (int64_t q = 0; q < 4; ++q) {
            int64_t at = 128 * h + 32 * q + 4 * g + i;
            int sc = c[L6::scale_at(at / 16, r)] - 128;
            row[at] = d * sc * static_cast<float>(codes[q] - 32);
          }
        }
  };
  return dequantize_each_chunk(rows16, m, k, L6::kChunkBytes, get);
}

// Q2_K (84-byte blocks: scales[16], qs[64], d, dmin).
void interleave_q2_k_rows16(const uint8_t* blocks, int64_t m, int64_t k, uint8_t* out) {
  using L = Q2KRows16;
  check_shape("Q2_K", m, k);
  auto put = [&](uint8_t* c, const uint8_t* blk, int64_t r) {
    using F = fields::Q2_K;
    std::memcpy(c + L::kD + 2 * r, blk + F::d, 2);
    std::memcpy(c + L::kDmin + 2 * r, blk + F::dmin, 2);
    for (int s = 0; s < 16; ++s) c[L::scale_at(s, r)] = blk[F::scales + s];
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t g = 0; g < 8; ++g)
        std::memcpy(c + L::code_at(h, g, r), blk + F::qs + 32 * h + 4 * g, 4);
  };
  each_block_to_chunk(TensorType::q2_K, blocks, m, k, L::kChunkBytes, out, put);
}

std::vector<float> dequantize_q2_k_rows16(const uint8_t* rows16, int64_t m, int64_t k) {
  using L = Q2KRows16;
  auto get = [&](const uint8_t* c, int64_t r, float* row) {
    const float d = f16(c + L::kD + 2 * r), dmin = f16(c + L::kDmin + 2 * r);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t g = 0; g < 8; ++g)
        for (int64_t i = 0; i < 4; ++i)
          for (int64_t j = 0; j < 4; ++j) {
            const int64_t at = 128 * h + 32 * j + 4 * g + i;
            const uint8_t sc = c[L::scale_at(at / 16, r)];
            const int q = (c[L::code_at(h, g, r) + i] >> (2 * j)) & 3;
            row[at] = d * (sc & 15) * q - dmin * (sc >> 4);
          }
  };
  return dequantize_each_chunk(rows16, m, k, L::kChunkBytes, get);
}

// Q3_K (110-byte blocks: hmask[32], qs[64], scales[12], d). Weight 128 h +
// 32 j + l has its low code bits at bits 2 j of qs[32 h + l] and its third
// bit at bit 4 h + j of hmask[l].
void interleave_q3_k_rows16(const uint8_t* blocks, int64_t m, int64_t k, uint8_t* out) {
  using L = Q3KRows16;
  check_shape("Q3_K", m, k);
  auto put = [&](uint8_t* c, const uint8_t* blk, int64_t r) {
    using F = fields::Q3_K;
    std::memcpy(c + L::kD + 2 * r, blk + F::d, 2);
    for (int s = 0; s < 16; ++s)
      c[L::scale_at(s, r)] = static_cast<uint8_t>(q3k_scale(blk + F::scales, s) + 128);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t l = 0; l < 32; ++l) {
        int code[4];
        for (int j = 0; j < 4; ++j)
          code[j] = (blk[F::qs + 32 * h + l] >> (2 * j) & 3) |
                    (blk[F::hmask + l] >> (4 * h + j) & 1) << 2;
        const int64_t g = l / 4, i = l % 4, e = g % 2;
        c[L::code_at(h, g / 2, e, r) + i] =
            static_cast<uint8_t>(code[0] | code[1] << 3 | (code[3] & 3) << 6);
        uint8_t& y = c[L::code_at(h, g / 2, 2, r) + i];
        y = static_cast<uint8_t>((y & (0xF0 >> (4 * e))) | (code[2] | (code[3] >> 2) << 3)
                                                               << (4 * e));
      }
  };
  each_block_to_chunk(TensorType::q3_K, blocks, m, k, L::kChunkBytes, out, put);
}

std::vector<float> dequantize_q3_k_rows16(const uint8_t* rows16, int64_t m, int64_t k) {
  using L = Q3KRows16;
  auto get = [&](const uint8_t* c, int64_t r, float* row) {
    const float d = f16(c + L::kD + 2 * r);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t g = 0; g < 8; ++g)
        for (int64_t i = 0; i < 4; ++i) {
          const int x = c[L::code_at(h, g / 2, g % 2, r) + i];
          const int y = c[L::code_at(h, g / 2, 2, r) + i] >> (4 * (g % 2)) & 15;
          const int codes[4] = {x & 7, x >> 3 & 7, y & 7, x >> 6 | (y >> 3) << 2};
          for (int64_t j = 0; j < 4; ++j) {
            const int64_t at = 128 * h + 32 * j + 4 * g + i;
            row[at] = d * (c[L::scale_at(at / 16, r)] - 128) * (codes[j] - 4);
          }
        }
  };
  return dequantize_each_chunk(rows16, m, k, L::kChunkBytes, get);
}

// Row r's block j of a chunk of a 32-weight-block format, in ggml's bytes
// and back.
void put_block32(const Blocks32Rows16& L, const uint8_t* blk, int64_t j, int64_t r, uint8_t* c) {
  const int64_t at = 16 * j + r;
  std::memcpy(c + L.d + L.scale_bytes * at, blk, static_cast<size_t>(L.scale_bytes));
  int64_t qs = L.scale_bytes;
  if (L.min >= 0) {
    std::memcpy(c + L.min + 2 * at, blk + 2, 2);
    qs += 2;
  }
  if (L.high >= 0) {
    uint32_t qh;
    std::memcpy(&qh, blk + qs, 4);
    qs += 4;
    for (int64_t i = 0; i < 4; ++i) {
      uint8_t byte = 0;
      for (int64_t g = 0; g < 4; ++g)
        byte |= static_cast<uint8_t>(((qh >> (4 * g + i)) & 1) << g | ((qh >> (16 + 4 * g + i)) & 1)
                                                                          << (4 + g));
      c[L.high + 4 * at + i] = byte;
    }
  }
  for (int64_t g = 0; g < L.code_bytes / 4; ++g)
    std::memcpy(c + L.code_at(j, g, r), blk + qs + 4 * g, 4);
}

void get_block32(const Blocks32Rows16& L, const uint8_t* c, int64_t j, int64_t r, uint8_t* blk) {
  const int64_t at = 16 * j + r;
  std::memcpy(blk, c + L.d + L.scale_bytes * at, static_cast<size_t>(L.scale_bytes));
  int64_t qs = L.scale_bytes;
  if (L.min >= 0) {
    std::memcpy(blk + 2, c + L.min + 2 * at, 2);
    qs += 2;
  }
  if (L.high >= 0) {
    uint32_t qh = 0;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t g = 0; g < 4; ++g) {
        const uint8_t byte = c[L.high + 4 * at + i];
        qh |= static_cast<uint32_t>((byte >> g) & 1) << (4 * g + i);
        qh |= static_cast<uint32_t>((byte >> (4 + g)) & 1) << (16 + 4 * g + i);
      }
    std::memcpy(blk + qs, &qh, 4);
    qs += 4;
  }
  for (int64_t g = 0; g < L.code_bytes / 4; ++g)
    std::memcpy(blk + qs + 4 * g, c + L.code_at(j, g, r), 4);
}

void interleave_blocks32_rows16(TensorType t, const uint8_t* blocks, int64_t m, int64_t k,
                                uint8_t* out) {
  const TensorTypeInfo& f = tensor_type_info(t);
  const Blocks32Rows16 L = Blocks32Rows16::of(t);
  check_shape(f.name, m, k);
  each_chunk_row(m, k, [&](int64_t chunk, int64_t r, int64_t row, int64_t b) {
    for (int64_t j = 0; j < 8; ++j)
      put_block32(L, blocks + (row * (k / 32) + b * 8 + j) * f.block_bytes, j, r,
                  out + chunk * L.chunk_bytes);
  });
}

// Through ggml's own dequantiser: the block is rebuilt from the chunk, so a
// field the interleave misplaces shows as a wrong weight.
std::vector<float> dequantize_blocks32_rows16(TensorType t, const uint8_t* rows16, int64_t m,
                                              int64_t k) {
  const TensorTypeInfo& f = tensor_type_info(t);
  const Blocks32Rows16 L = Blocks32Rows16::of(t);
  std::vector<float> w(static_cast<size_t>(m * k));
  std::vector<uint8_t> blk(static_cast<size_t>(f.block_bytes));
  each_chunk_row(m, k, [&](int64_t chunk, int64_t r, int64_t row_index, int64_t b) {
    for (int64_t j = 0; j < 8; ++j) {
      get_block32(L, rows16 + chunk * L.chunk_bytes, j, r, blk.data());
      dequantize(t, blk.data(), 32, w.data() + row_index * k + b * 256 + j * 32);
    }
  });
  return w;
}

}  // namespace

bool is_blocks32(TensorType t) {
  return t == TensorType::q4_0 || t == TensorType::q4_1 || t == TensorType::q5_0 ||
         t == TensorType::q5_1 || t == TensorType::q8_0 || t == TensorType::iq4_nl ||
         t == TensorType::mxfp4;
}

Blocks32Rows16 Blocks32Rows16::of(TensorType t) {
  if (!is_blocks32(t))
    throw Error("16-row interleave: " + std::string(tensor_type_info(t).name) +
                " is not a 32-weight block format");
  Blocks32Rows16 L;
  L.scale_bytes = t == TensorType::mxfp4 ? 1 : 2;
  int64_t at = 8 * kRows * L.scale_bytes;
  if (t == TensorType::q4_1 || t == TensorType::q5_1) L.min = at, at += 8 * kRows * 2;
  if (t == TensorType::q5_0 || t == TensorType::q5_1) L.high = at, at += 8 * kRows * 4;
  L.codes = at;
  L.code_bytes = t == TensorType::q8_0 ? 32 : 16;
  L.chunk_bytes = at + 8 * kRows * L.code_bytes;
  return L;
}

bool has_rows16(TensorType t) {
  return is_blocks32(t) || t == TensorType::q2_K || t == TensorType::q3_K ||
         t == TensorType::q4_K || t == TensorType::q5_K || t == TensorType::q6_K ||
         t == TensorType::iq4_xs;
}

int64_t rows16_bytes(TensorType t, int64_t m, int64_t k) {
  switch (t) {
    case TensorType::q2_K: return Q2KRows16::bytes(m, k);
    case TensorType::q3_K: return Q3KRows16::bytes(m, k);
    case TensorType::q5_K: return Q5KRows16::bytes(m, k);
    case TensorType::q6_K: return L6::bytes(m, k);
    case TensorType::iq4_xs: return IQ4XSRows16::bytes(m, k);
    case TensorType::q4_K: return Q4KRows16::bytes(m, k);
    default: return Blocks32Rows16::of(t).bytes(m, k);
  }
}

void interleave_rows16(TensorType t, const uint8_t* blocks, int64_t m, int64_t k, uint8_t* out) {
  switch (t) {
    case TensorType::q4_K: return interleave_k_rows16<false>(blocks, m, k, out);
    case TensorType::q5_K: return interleave_k_rows16<true>(blocks, m, k, out);
    case TensorType::q2_K: return interleave_q2_k_rows16(blocks, m, k, out);
    case TensorType::q3_K: return interleave_q3_k_rows16(blocks, m, k, out);
    case TensorType::q6_K: return interleave_q6_k_rows16(blocks, m, k, out);
    case TensorType::iq4_xs: return interleave_iq4_xs_rows16(blocks, m, k, out);
    default:
      if (is_blocks32(t)) return interleave_blocks32_rows16(t, blocks, m, k, out);
      throw Error("16-row interleave: no layout for " + std::string(tensor_type_info(t).name));
  }
}

std::vector<uint8_t> interleave_rows16(TensorType t, const uint8_t* blocks, int64_t m, int64_t k) {
  std::vector<uint8_t> out(has_rows16(t) ? static_cast<size_t>(rows16_bytes(t, m, k)) : 0);
  interleave_rows16(t, blocks, m, k, out.data());
  return out;
}

std::vector<float> dequantize_rows16(TensorType t, const uint8_t* rows16, int64_t m, int64_t k) {
  switch (t) {
    case TensorType::q4_K: return dequantize_k_rows16<false>(rows16, m, k);
    case TensorType::q5_K: return dequantize_k_rows16<true>(rows16, m, k);
    case TensorType::q2_K: return dequantize_q2_k_rows16(rows16, m, k);
    case TensorType::q3_K: return dequantize_q3_k_rows16(rows16, m, k);
    case TensorType::q6_K: return dequantize_q6_k_rows16(rows16, m, k);
    case TensorType::iq4_xs: return dequantize_iq4_xs_rows16(rows16, m, k);
    default:
      if (is_blocks32(t)) return dequantize_blocks32_rows16(t, rows16, m, k);
      throw Error("16-row interleave: no layout for " + std::string(tensor_type_info(t).name));
  }
}

}  // namespace kiln::ggml
