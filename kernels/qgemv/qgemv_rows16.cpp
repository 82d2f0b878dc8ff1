// Quantized GEMV/GEMM over 16-row interleaved weights (kernels/quant/rows16.h):
// y[i] = W x[i] for t tokens, W in a 32-weight block format (FMT = Q4_0 2,
// Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, IQ4_NL 20, MXFP4 39), Q2_K (10), Q3_K
// (11), Q4_K (12), Q5_K (13), Q6_K (14) or IQ4_XS (23), x from quantize_q8 (QBLOCK=32 for
// Q4_0/Q8_0, 256 (Q8_K) for the K-quants, as llama.cpp pairs them): buffers w, xq, xd, xs, xs8, y.
//
// Why a second kernel for these formats: qgemv reads ggml's row-major
// blocks, where a 32-bit lane of the int8 dot holds 4 codes of one row, so
// every lane of a sub-block's dot needs its own scaling per token. Here a
// lane is a row (rows16_program.h), and the scaling is paid once per
// sub-block and 16 rows, not per 4 weights.
//
// Per super-block b and token, dx the token's Q8_K scale:
// - Q4_K and Q5_K (w = d sc_j q - dmin m_j, 32-weight sub-blocks j):
//     y += dx (sum_j d sc_j dot_j(q, xq) - dmin sum_j m_j bsum_j),
//   bsum_j the sum of the token's 32 x codes in sub-block j (quantize_q8's s);
// - Q6_K and Q3_K (w = d sc_s (q - o), 16-weight groups s, signed sc, o 32
//   or 4), Q2_K (w = d sc_s q - dmin m_s):
//     y += dx d sum_s sc_s (dot_s(q, xq) - o bsum16_s) [- dx dmin sum_s m_s bsum16_s],
//   exactly (in i32, or f32 where it holds the sums exactly), bsum16_s the sum of the token's 16 x
//   codes of group s (quantize_q8's split s8); from 12 tokens per program
//   Q2_K's and Q3_K's codes are decoded times sc_s into bytes instead, and
//   each token's super-block is one i32 sum of byte dots;
// - IQ4_XS (w = d (ls_s - 32) table[q], 32-weight sub-blocks s), codes
//   looked up as table[q] + 128 (unsigned, a byte shuffle):
//     y += dx d sum_s (ls_s - 32) (dot_s(u, xq) - 128 bsum_s),
//   each dot exact (in i32, started at quantize_q8's -128 bsum_s), their
//   sum in f32.
#include <algorithm>
#include <array>
#include <map>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/rows16_program.h"
#include "kernels/quant/e8m0.h"
#include "kernels/quant/rows16.h"
#include "kernels/quant/split_sums.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t R = kRows16;
// Tokens per program from which Q2_K and Q3_K decode their codes times the
// group scale (groups16_scaled_superblock).
constexpr int64_t kScaledFrom = 12;

// Sets acc to the super-block's terms, in units of each token's dx.
template <bool Q5>
void k_superblock(KernelBuilder& k, const Rows16Context& x, std::vector<Var>& acc) {
  using L = ggml::KRows16<Q5>;
  const size_t BT = acc.size();
  auto d = x.f16s(x.at(L::kD)), neg_dmin = -x.f16s(x.at(L::kDmin));
  // The min terms sum_j m_j bsum_j, exactly in i32, as byte dots: m_j is
  // u8 (6 bits) and bsum_j = l_j + 64 h_j with l_j in [0, 63] and h_j in
  // [-64, 63], both i8 and stored so by quantize_q8 (s8). So the 8
  // sub-blocks take 4 vpdpbusd per token with x straight from memory (the
  // 4 mins of a row in a lane) instead of 8 widening multiplies.
  auto mins = [&](int64_t h) { return x.lanes4(x.at(L::min_at(4 * h, 0))); };
  auto mins_lo = mins(0), mins_hi = mins(1);
  for (size_t i = 0; i < BT; ++i) {
    auto low = dot4(mins_lo, x.split_sums4(i, 0).to(DType::i32)) +
               dot4(mins_hi, x.split_sums4(i, 1).to(DType::i32));
    auto high = dot4(mins_lo, x.split_sums4(i, 2).to(DType::i32)) +
                dot4(mins_hi, x.split_sums4(i, 3).to(DType::i32));
    acc[i] = ((high << 6) + low).to(DType::f32) * neg_dmin;
  }
  // A runtime loop over the 4 pairs of sub-blocks: unrolled, the scheduler
  // overlaps pairs and their accumulators spill.
  k.for_(0, 4, 1, [&](Value p) {
    x.prefetch_ahead(p, 4);
    auto p64 = p.to(DType::i64);
    NibblePairDots dots = nibble_pair_dots(x, p64, L::kCodes, BT, Q5 ? L::kHigh : -1);
    auto scale = [&](int64_t half) {
      return x.bytes(p64 * (2 * R) + static_cast<int>(L::kScales + half * R), R).to(DType::f32) * d;
    };
    auto s_lo = scale(0), s_hi = scale(1);
    if (dots.hi_times != 1) s_hi = s_hi * (1.0f / static_cast<float>(dots.hi_times));
    for (size_t i = 0; i < BT; ++i) {
      acc[i] = fma(dots.lo[i].to(DType::f32), s_lo, Value(acc[i]));
      acc[i] = fma(dots.hi[i].to(DType::f32), s_hi, Value(acc[i]));
    }
  });
}

// The formats of 16-weight groups s (Q2_K, Q3_K, Q6_K): per half h of the
// super-block and group g (weights 128 h + 32 j + 4 g + i, j and i < 4),
// the 4 code vectors ([16, 4] u8, j = 0..3), and the group bytes (4 per
// lane at `scales`, rows16.h's group16_at).
struct Groups16 {
  int64_t scales = 0;
  // Q6_K 32, Q3_K 4: w = d sc_s (q - offset), the byte sc_s + 128.
  int offset = 0;
  // Q2_K (w = d sc_s q - dmin m_s): the byte is sc_s | m_s << 4, dmin at this offset.
  int64_t dmin = -1;
  std::function<std::array<Value, 4>(const Rows16Context&, const Value& h64, int64_t g)> codes;
  // Sum the groups' terms in f32: exact when every partial sum stays below
  // 2^24 (Q3_K: |dot_s sc_s| < 2^19, 16 groups), and a convert and
  // an FMA per group and token instead of an i32 multiply (2 uops on one
  // port) and an add. Q6_K's terms reach 2^24, so it stays in i32.
  bool f32_sums = false;
  // Code vector j may hold its codes times 2^code_shift[j] (decoded in
  // place, not shifted down). With f32 sums the group's f32 scale takes it
  // off; in i32 the other groups' scales are shifted up to the largest
  // factor, which the final scaling takes off.
  std::array<int, 4> code_shift = {0, 0, 0, 0};
  // Each group's dot, shifted down by dot_down[j] bits (exact: its codes
  // carry that factor), fits i16 and its scale is a nibble (Q2_K: codes
  // times 1 or 4 after the shift, |dot| <= 16 * 12 * 128), so the scale
  // applies as an i16 pair dot into an i32 sum: x86 vpdpwssd, one
  // instruction per group and token, where f32 sums take a convert and an
  // FMA, and their scale a convert and a multiply.
  bool i16_dots = false;
  std::array<int, 4> dot_down = {0, 0, 0, 0};
  // The scaled decode (groups16_scaled_superblock), for formats whose
  // codes times their group's scale fit a byte: code bit n (lowest first)
  // of code vector j of group g is set in the bytes where piece & mask != 0.
  struct Bit {
    Value piece;
    int mask;
  };
  std::function<std::vector<Bit>(const Rows16Context&, const Value& h64, int64_t g, int64_t j)>
      code_bits;
  // The scaled codes are u = sc_s (q - offset) + bias, in [0, 255]
  // (offset 0 or 4).
  int bias = 0;
};

// sum_s u_s bsum16_s per token for a u8 u_s per group, exactly in i32, u_s
// the group byte (sc_s + 128: Q3_K, Q6_K) or its min (Q2_K), as byte dots:
// quantize_q8 splits bsum16_s = low + 64 high into i8, so it is
// sum_s u_s low_s + 64 sum_s u_s high_s: 8 vpdpbusd per token.
std::vector<Value> group_byte_sums(const Rows16Context& x, size_t tokens, const Groups16& f) {
  std::vector<Value> u(4);
  for (int64_t q = 0; q < 4; ++q) {
    u[q] = x.lanes4(x.at(f.scales + 64 * q));
    if (f.dmin >= 0) u[q] = u[q] >> 4;
  }
  std::vector<Value> sums(tokens);
  for (size_t i = 0; i < tokens; ++i) {
    Value low, high;
    for (int64_t q = 0; q < 4; ++q) {
      auto l = dot4(u[q], x.split_sums16_4(i, q, false).to(DType::i32));
      auto h = dot4(u[q], x.split_sums16_4(i, q, true).to(DType::i32));
      low = q == 0 ? l : low + l;
      high = q == 0 ? h : high + h;
    }
    sums[i] = low + (high << 6);
  }
  return sums;
}

// dot * sc, exactly, for i32 [16] lanes with dot in i16's range and sc in
// [0, 2^15): one i16 pair dot of the lanes as pairs (low half the value,
// high half its sign), sc's zero high half dropping dot's.
Value i16_times(const Value& dot, const Value& sc) {
  auto pairs = [](const Value& v) { return reshape(v, {R, 1}).bitcast(DType::i16); };
  return reshape(dot_groups(pairs(dot), pairs(sc)), {R});
}

// acc = d isum [- dmin min_sums]: the super-block's terms from its sums.
void groups16_finish(const Rows16Context& x, std::vector<Var>& acc, const std::vector<Value>& isum,
                     const std::vector<Value>& min_sums, const Groups16& f, float d_times) {
  auto d = x.f16s(x.at(0));
  if (d_times != 1.0f) d = d * d_times;
  for (size_t i = 0; i < acc.size(); ++i) {
    acc[i] = isum[i].to(DType::f32) * d;
    if (f.dmin >= 0) acc[i] = fma(min_sums[i].to(DType::f32), -x.f16s(x.at(f.dmin)), Value(acc[i]));
  }
}

// Sets acc to d sum_s sc_s (dot_s(q, xq) - offset bsum16_s) [- dmin sum_s
// m_s bsum16_s], exact up to the final scaling (Groups16::f32_sums,
// i16_dots); bsum16_s is the sum of the token's 16 x codes of group s
// (quantize_q8's split s8).
void groups16_superblock(KernelBuilder& k, const Rows16Context& x, std::vector<Var>& acc,
                         const Groups16& f) {
  const size_t BT = acc.size();
  const bool mins = f.dmin >= 0;
  // The factor 2^top of the i32 sums: the largest code shift, or with i16
  // dots the largest left after dot_down.
  std::array<int, 4> factor = f.code_shift;
  for (int j = 0; j < 4; ++j) factor[j] -= f.dot_down[j];
  const int top = f.f32_sums ? 0 : *std::max_element(factor.begin(), factor.end());
  // The offsets' sum_s sc_s bsum16_s is sum_s (sc_s + 128) bsum16_s - 128 B,
  // B the token's sum of the chunk's codes.
  std::vector<Value> byte_sums = group_byte_sums(x, BT, f);
  // Each token's sums by the factor 2^r they carry: one (r = top), or with
  // i16 dots one per factor, so no group's scale is shifted and two chains
  // of dependent dots run where one would be 16 long.
  auto key = [&](int64_t j) { return f.i16_dots ? factor[j] : top; };
  std::map<int, std::vector<Var>> isum;
  for (int64_t j = 0; j < 4; ++j) isum[key(j)];
  for (auto& [r, sums] : isum)
    for (size_t i = 0; i < BT; ++i) {
      Value start = zeros(DType::i32, {R});
      if (!mins && r == top) start = (byte_sums[i] - (x.chunk_sum(i) << 7)) * -(f.offset << top);
      sums.push_back(k.var(f.f32_sums ? start.to(DType::f32) : start));
    }
  // Half h: weights 128 h .. 128 h + 127, groups 8 h .. 8 h + 7.
  k.for_(0, 2, 1, [&](Value h) {
    auto h64 = h.to(DType::i64);
    // The half's 8 group bytes, 4 per i32 lane.
    Value quads[2];
    for (int64_t j = 0; j < 2; ++j)
      quads[j] = reshape(
          x.lanes4(h64 * 128 + static_cast<int>(f.scales + 64 * j)).bitcast(DType::i32), {R});
    for (int64_t quarter = 0; quarter < 2; ++quarter) {  // groups 8h + quarter + 2 j
      x.prefetch_ahead(h * 2 + static_cast<int>(quarter), 4);
      // The quarter's 16 code vectors, decoded once for all tokens; codes
      // j of group g are weights 32 j + 4 g .. 32 j + 4 g + 3 of the half.
      std::vector<std::array<Value, 4>> codes;
      for (int64_t g = 4 * quarter; g < 4 * quarter + 4; ++g) codes.push_back(f.codes(x, h64, g));
      // One group (one scale) at a time, so a token holds one dot, not 4,
      // and 8 tokens' sums fit the registers beside the codes.
      for (int64_t j = 0; j < 4; ++j) {
        int64_t s = quarter + 2 * j;  // group within the half
        auto byte = quads[s / 4] >> static_cast<int>(8 * (s % 4));
        auto sc = mins ? byte & 15 : (byte & 255) - 128;
        Value scf;
        if (f.f32_sums) scf = sc.to(DType::f32) * (1.0f / static_cast<float>(1 << f.code_shift[j]));
        if (!f.i16_dots && top > f.code_shift[j]) sc = sc << (top - f.code_shift[j]);
        std::vector<Var>& sums = isum[key(j)];
        for (size_t i = 0; i < BT; ++i) {
          Value dot;
          for (int64_t g = 0; g < 4; ++g) {
            auto dd = dot4(codes[g][j],
                           x.x4(i, h64 * 128 + static_cast<int>(32 * j + 4 * (4 * quarter + g))));
            dot = g == 0 ? dd : dot + dd;
          }
          if (f.i16_dots) {
            if (f.dot_down[j]) dot = dot >> f.dot_down[j];
            sums[i] = Value(sums[i]) + i16_times(dot, sc);
          } else {
            sums[i] = f.f32_sums ? fma(dot.to(DType::f32), scf, Value(sums[i]))
                                 : Value(sums[i]) + dot * sc;
          }
        }
      }
    }
  });
  std::vector<Value> total;
  for (size_t i = 0; i < BT; ++i) {
    Value t;
    for (auto& [r, sums] : isum) {
      Value v = sums[i];
      if (r < top) v = v << (top - r);
      t = t.valid() ? t + v : v;
    }
    total.push_back(t);
  }
  groups16_finish(x, acc, total, byte_sums, f, 1.0f / static_cast<float>(1 << top));
}

// The same sum with the codes decoded times their group's scale, as bytes
// u = sc_s (q - offset) + bias: one byte dot per code vector and token into
// a single i32 sum per super-block, less bias B. Per code vector the decode
// is a byte test and a masked byte add per code bit, about 7 instructions
// where groups16_superblock's is 2, but per token and group it saves a
// convert and an FMA (half as many instructions again as the 4 dots), so
// it pays from about 12 tokens per program on.
void groups16_scaled_superblock(KernelBuilder& k, const Rows16Context& x, std::vector<Var>& acc,
                                const Groups16& f) {
  const size_t BT = acc.size();
  std::vector<Value> min_sums;
  if (f.dmin >= 0) min_sums = group_byte_sums(x, BT, f);
  std::vector<Var> isum;
  for (size_t i = 0; i < BT; ++i)
    isum.push_back(k.var(f.bias ? x.chunk_sum(i) * -f.bias : zeros(DType::i32, {R})));
  k.for_(0, 2, 1, [&](Value h) {
    auto h64 = h.to(DType::i64);
    for (int64_t s = 0; s < 8; ++s) {  // group within the half
      if (s % 2 == 0) x.prefetch_ahead(h * 4 + static_cast<int>(s / 2), 8);
      // Group s's byte in each of its row's 4 bytes.
      auto quad = x.lanes4(h64 * 128 + static_cast<int>(f.scales + 64 * (s / 4)));
      auto byte = broadcast_to(slice(quad, {0, s % 4}, {R, 1}), {R, 4});
      Value sc = f.dmin >= 0 ? byte & 15 : byte ^ 128;  // sc_s, modulo 256
      std::array<Value, 3> times;                       // sc_s 2^n
      times[0] = sc;
      for (int n = 1; n < 3; ++n) times[n] = times[n - 1] + times[n - 1];
      Value base = full({R, 4}, f.bias, DType::u8);
      if (f.offset) base = base - times[2];  // Q3_K: bias - 4 sc_s
      // Group s's code vectors: j = s / 2, g = 4 (s % 2) .. 4 (s % 2) + 3.
      const int64_t j = s / 2;
      for (int64_t g = 4 * (s % 2); g < 4 * (s % 2) + 4; ++g) {
        Value u = base;
        std::vector<Groups16::Bit> bits = f.code_bits(x, h64, g, j);
        for (size_t n = 0; n < bits.size(); ++n)
          u = where((bits[n].piece & bits[n].mask) != 0, u + times[n], u);
        for (size_t i = 0; i < BT; ++i)
          isum[i] = Value(isum[i]) + dot4(u, x.x4(i, h64 * 128 + static_cast<int>(32 * j + 4 * g)));
      }
    }
  });
  groups16_finish(x, acc, {isum.begin(), isum.end()}, min_sums, f, 1.0f);
}

// Q6_K's codes 0-2 in place, times 4 (rows16.h), and code 3 gathered from
// the low 2 bits of the three bytes. The i32 sums stay below 2^31 with the
// factor: |sum_s sc_s dot_s| < 16 * 128 * 16 * 252 * 128 < 2^30, and the
// offsets' term below 2^30 as well.
Groups16 q6_k_groups() {
  using L = ggml::Q6KRows16;
  auto codes = [](const Rows16Context& x, const Value& h64, int64_t g) {
    auto piece = [&](int64_t part) {
      return u32_lanes(x.lanes4(h64 * (8 * L::kGroupBytes) +
                                static_cast<int>(L::kCodes + g * L::kGroupBytes + part * 64)));
    };
    auto p = piece(0), q = piece(1), r = piece(2);
    auto c3 = (p & 0x03030303) | ((q << 2) & 0x0C0C0C0C) | ((r << 4) & 0x30303030);
    return std::array<Value, 4>{u8_lanes(p & 0xFCFCFCFC), u8_lanes(q & 0xFCFCFCFC),
                                u8_lanes(r & 0xFCFCFCFC), u8_lanes(c3)};
  };
  return {.scales = L::kScales,
          .offset = 32,
          .codes = codes,
          .code_shift = {2, 2, 2, 0},
          .code_bits = nullptr};  // sc_s q reaches 127 * 63
}

// Q2_K's 2-bit codes with mins, each in place at bits 2j (times 4^j),
// one mask each.
Groups16 q2_k_groups() {
  using L = ggml::Q2KRows16;
  // Group g's code bytes in half h, [16, 4] u8.
  auto group = [](const Rows16Context& x, const Value& h64, int64_t g) {
    return x.lanes4(h64 * (8 * R * 4) + static_cast<int>(L::code_at(0, g, 0)));
  };
  auto codes = [group](const Rows16Context& x, const Value& h64, int64_t g) {
    auto a = u32_lanes(group(x, h64, g));
    std::array<Value, 4> c;
    for (int j = 0; j < 4; ++j) c[j] = u8_lanes(a & (int64_t{0x03030303} << (2 * j)));
    return c;
  };
  // sc_s q in [0, 45].
  auto bits = [group](const Rows16Context& x, const Value& h64, int64_t g, int64_t j) {
    auto a = group(x, h64, g);
    return std::vector<Groups16::Bit>{{a, 1 << (2 * j)}, {a, 2 << (2 * j)}};
  };
  return {.scales = L::kScales,
          .dmin = L::kDmin,
          .codes = codes,
          .code_shift = {0, 2, 4, 6},
          .i16_dots = true,
          .dot_down = {0, 0, 4, 4},
          .code_bits = bits};
}

// Q3_K's 3-bit codes (ggml's 2 low bits | the hmask bit << 2), offset 4:
// codes 0-2 in place (code 1 times 8; an odd group's y nibble shifted down
// first) and code 3, times 2, from its low bits in x and its third in y
// (rows16.h).
Groups16 q3_k_groups() {
  using L = ggml::Q3KRows16;
  // Piece `part` of group g's pair in half h (rows16.h), [16, 4] u8.
  auto piece = [](const Rows16Context& x, const Value& h64, int64_t g, int64_t part) {
    return x.lanes4(h64 * (4 * L::kPairBytes) + static_cast<int>(L::code_at(0, g / 2, part, 0)));
  };
  auto codes = [piece](const Rows16Context& x, const Value& h64, int64_t g) {
    auto b = u32_lanes(piece(x, h64, g, g % 2)), y = u32_lanes(piece(x, h64, g, 2));
    if (g % 2) y = y >> 4;
    auto c3 = ((b >> 5) & 0x06060606) | (y & 0x08080808);
    return std::array<Value, 4>{u8_lanes(b & 0x07070707), u8_lanes(b & 0x38383838),
                                u8_lanes(y & 0x07070707), u8_lanes(c3)};
  };
  // sc_s (q - 4) + 124 in [0, 252]: sc_s in [-32, 31], q in [0, 7]. The
  // bits as codes above: 0-2 of x (j 0), 3-5 (j 1), y's low or high 3 (j
  // 2), and code 3's bits 0-1 in x's 6-7, its third in y's bit 3 or 7.
  auto bits = [piece](const Rows16Context& x, const Value& h64, int64_t g, int64_t j) {
    auto b = piece(x, h64, g, g % 2), y = piece(x, h64, g, 2);
    const int up = g % 2 ? 4 : 0;
    switch (j) {
      case 0: return std::vector<Groups16::Bit>{{b, 1}, {b, 2}, {b, 4}};
      case 1: return std::vector<Groups16::Bit>{{b, 8}, {b, 16}, {b, 32}};
      case 2: return std::vector<Groups16::Bit>{{y, 1 << up}, {y, 2 << up}, {y, 4 << up}};
      default: return std::vector<Groups16::Bit>{{b, 64}, {b, 128}, {y, 8 << up}};
    }
  };
  return {.scales = L::kScales,
          .offset = 4,
          .codes = codes,
          .f32_sums = true,
          .code_shift = {0, 3, 0, 1},
          .code_bits = bits,
          .bias = 124};
}

void iq4_xs_superblock(KernelBuilder& k, const Rows16Context& x, std::vector<Var>& acc) {
  using L = ggml::IQ4XSRows16;
  const size_t BT = acc.size();
  const std::vector<int64_t> table = ggml::unsigned_codebook(TensorType::iq4_xs);
  // Each sub-block's dot starts from the codes' offset, -128 bsum_s, so it
  // is the signed table entries' and only a convert and an FMA per token
  // remain, where an i32 multiply is 2 uops on one port and an add. The
  // sums then round as f32 does (2^-24 relative per step, far inside the
  // kernel's tolerance), where ggml's are exact until its final scale.
  // Loaded into the accumulator, the offset costs no vector instruction,
  // where subtracting it once per super-block and token as sum_s (ls_s -
  // 32) bsum_s took 4 byte dots against the split sums and 7 more
  // instructions (kiln bench, 2 threads, 4096x14336, 512 tokens, 5
  // alternated rounds: median 479 -> 503 GFLOP/s).
  // x stored unsigned instead, with the offset a per-row constant of the
  // weights, was not faster: the x broadcasts then no longer fold into
  // vpdpbusd (its u8 operand is a register), one more uop per dot.
  std::vector<Var> sums;
  for (size_t i = 0; i < BT; ++i) sums.push_back(k.var(zeros(DType::f32, {R})));
  k.for_(0, 8, 1, [&](Value s) {
    x.prefetch_ahead(s, 8);
    auto s64 = s.to(DType::i64);
    std::vector<Value> dot(BT);
    for (size_t i = 0; i < BT; ++i) dot[i] = x.block_sum_neg128(i, s64);
    for (int64_t g = 0; g < 4; ++g) {
      auto c = x.lanes4(s64 * (4 * R * 4) + static_cast<int>(L::code_at(0, g, 0)));
      auto lo = lookup(table, DType::u8, c & 15), hi = lookup(table, DType::u8, c >> 4);
      for (size_t i = 0; i < BT; ++i)
        dot[i] = dot[i] + dot4(lo, x.x4(i, s64 * 32 + static_cast<int>(4 * g))) +
                 dot4(hi, x.x4(i, s64 * 32 + static_cast<int>(16 + 4 * g)));
    }
    // ls_s: byte s % 4 of the row's lane in its half.
    auto quad =
        reshape(x.lanes4((s64 >> 2) * 64 + static_cast<int>(L::kScales)).bitcast(DType::i32), {R});
    auto ls = (quad >> broadcast_to((s & 3) * 8, {R})) & 255;
    auto lsf = (ls - 32).to(DType::f32);
    for (size_t i = 0; i < BT; ++i) sums[i] = fma(dot[i].to(DType::f32), lsf, Value(sums[i]));
  });
  auto d = x.f16s(x.at(L::kD));
  for (size_t i = 0; i < BT; ++i) acc[i] = Value(sums[i]) * d;
}

// The 32-weight-block formats: 8 blocks per chunk, each with its own weight
// and activation scale, so each block's dot is scaled into `out` directly:
//   y += d dx dot(u - 128, xq) [+ m dx bsum],
// u the code + 128 with the format's offset taken off: the nibble + 120
// looked up (Q4_0, offset 8: a byte shuffle, which costs what the
// nibble's mask did), Q8_0's byte ^ 0x80, or IQ4_NL's and MXFP4's table
// entry + 128. Each token's dot starts from -128 bsum (quantize_q8's s8),
// so the offset costs no instruction (it cost a shift and a subtract per
// block and token, of about 16). Q5_0's u is its 5-bit code, offset 16,
// from -16 bsum. Q4_1 and Q5_1 have codes without offset and a min
// instead, m dx bsum, bsum the token's x block sum (quantize_q8's s) and
// dx bsum rounded to f16 as llama.cpp's Q8_1 holds it.
void blocks32_chunk(KernelBuilder& k, const Rows16Context& x, TensorType t, std::vector<Var>& out) {
  const ggml::Blocks32Rows16 L = ggml::Blocks32Rows16::of(t);
  const size_t BT = out.size();
  const bool offset = L.min < 0;
  // The lookup that turns a nibble into u.
  std::vector<int64_t> codebook;
  if (t == TensorType::iq4_nl || t == TensorType::mxfp4) codebook = ggml::unsigned_codebook(t);
  if (t == TensorType::q4_0)
    for (int64_t c = 0; c < 16; ++c) codebook.push_back(c + 120);
  const int64_t groups = L.code_bytes / 4;
  k.for_(0, 8, 1, [&](Value j) {
    x.prefetch_ahead(j, 8);
    auto j64 = j.to(DType::i64);
    // Two sums per token (groups' even and odd halves), so a decode's
    // chain of dependent dots is half as long.
    std::vector<Value> dot(2 * BT);
    // Q5_0's codes stay unsigned (its 5-bit code is the weight + 16), and
    // its start is -16 bsum, exactly the -128 one shifted: one shift per
    // token where + 112 on each code vector was 8 adds per block.
    for (size_t i = 0; offset && i < BT; ++i) {
      dot[2 * i] = x.block_sum_neg128(i, j64);
      if (L.high >= 0) dot[2 * i] = dot[2 * i] >> 3;
    }
    auto accumulate = [&](const Value& codes, size_t i, int64_t first) {
      auto dd = dot4(codes, x.x4(i, j64 * 32 + static_cast<int>(first)));
      Value& to = dot[2 * i + (first / 4) % 2];
      to = to.valid() ? to + dd : dd;
    };
    Value qh;
    if (L.high >= 0) qh = x.lanes4(j64 * (R * 4) + static_cast<int>(L.high));
    for (int64_t g = 0; g < groups; ++g) {
      auto raw = x.lanes4(j64 * (groups * R * 4) + static_cast<int>(L.code_at(0, g, 0)));
      if (L.code_bytes == 32) {
        for (size_t i = 0; i < BT; ++i) accumulate(raw ^ 128, i, 4 * g);
        continue;
      }
      auto lo = raw & 15, hi = raw >> 4;
      if (qh.valid()) {
        lo = lo | ((qh << static_cast<int>(4 - g)) & 16);
        hi = hi | (g == 0 ? qh & 16 : (qh >> static_cast<int>(g)) & 16);
      }
      if (!codebook.empty())
        lo = lookup(codebook, DType::u8, lo), hi = lookup(codebook, DType::u8, hi);
      for (size_t i = 0; i < BT; ++i) {
        accumulate(lo, i, 4 * g);
        accumulate(hi, i, 16 + 4 * g);
      }
    }
    Value d = t == TensorType::mxfp4 ? e8m0_half_value(x.bytes(j64 * R + static_cast<int>(L.d), R))
                                     : x.f16s(j64 * (2 * R) + static_cast<int>(L.d));
    Value m;
    if (L.min >= 0) m = x.f16s(j64 * (2 * R) + static_cast<int>(L.min));
    for (size_t i = 0; i < BT; ++i) {
      auto blk = x.xblk[i] + x.b64 * 8 + j64;
      auto dx = load(x.xd + blk);
      auto total = dot[2 * i] + dot[2 * i + 1];
      out[i] = fma(total.to(DType::f32), d * dx, Value(out[i]));
      // The min takes dx * s rounded to f16, as llama.cpp's Q8_1 activations hold it.
      if (m.valid()) {
        auto dxs = (load(x.xs + blk).to(DType::f32) * dx).to(DType::f16).to(DType::f32);
        out[i] = fma(m, broadcast_to(dxs, {R}), Value(out[i]));
      }
    }
  });
}

Kernel build_qgemv_rows16(const Spec& s) {
  KernelBuilder k("qgemv_rows16", s);
  const int64_t FMT = s.constexpr_("FMT"), BT = s.constexpr_("BLOCK_T");
  auto qt = static_cast<TensorType>(FMT);
  if (!ggml::has_rows16(qt))
    throw Error(
        "kernel 'qgemv_rows16': FMT must be a ggml type with a 16-row layout (2, 3, 6, 7, 8, "
        "10-14, 20, 23, 39), got " +
        std::to_string(FMT));
  // Every FMT takes xs8 (Q4_K reads it), so that one call signature serves all.
  Rows16Format f{.chunk_bytes = ggml::rows16_bytes(qt, R, 256),
                 .superblock_scaled = !ggml::is_blocks32(qt),
                 .split_sums = true,
                 .chunk = nullptr};
  switch (qt) {
    case TensorType::q4_K: f.chunk = k_superblock<false>; break;
    case TensorType::q5_K: f.chunk = k_superblock<true>; break;
    case TensorType::iq4_xs: f.chunk = iq4_xs_superblock; break;
    case TensorType::q2_K:
    case TensorType::q3_K:
    case TensorType::q6_K: {
      Groups16 g = qt == TensorType::q6_K   ? q6_k_groups()
                   : qt == TensorType::q3_K ? q3_k_groups()
                                            : q2_k_groups();
      f.chunk = [g](KernelBuilder& kb, const Rows16Context& x, std::vector<Var>& acc) {
        if (g.code_bits && static_cast<int64_t>(acc.size()) >= kScaledFrom)
          groups16_scaled_superblock(kb, x, acc, g);
        else
          groups16_superblock(kb, x, acc, g);
      };
      break;
    }
    default:
      f.chunk = [qt](KernelBuilder& kb, const Rows16Context& x, std::vector<Var>& out) {
        blocks32_chunk(kb, x, qt, out);
      };
  }
  build_rows16_program(k, s, BT, f);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemv_rows16",
    .family = "qgemv",
    .summary =
        "y[i] = W x[i] for t tokens, W in Q4_0/Q8_0/Q2_K/Q3_K/Q4_K/Q5_K/Q6_K/IQ4_XS "
        "(FMT=2/8/10/11/12/13/14/23) interleaved across 16 rows (rows16.h), x from quantize_q8",
    .dtype_roles = {},
    // GROUPED: plain or one launch for a layer's experts (expert_tiles.h).
    .constexpr_defaults = {{"FMT", 12}, {"BLOCK_T", 1}, {"GROUPED", 0}},
    .build = build_qgemv_rows16,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          auto qt = static_cast<TensorType>(s.constexpr_("FMT"));
          if (!ggml::has_rows16(qt))
            throw Error("kernel 'qgemv_rows16': no 16-row layout for FMT " +
                        std::to_string(s.constexpr_("FMT")));
          int64_t m = a.i("m"), kk = a.i("k"), bt = s.constexpr_("BLOCK_T");
          return expert_tiles_launch(
              "qgemv_rows16", s, a,
              rows16_launch("qgemv_rows16", bt, m, kk, a.i("t"), ggml::rows16_bytes(qt, m, kk),
                            true),
              bt, "w",
              {{"xq", kk}, {"xd", kk / 32}, {"xs", kk / 32}, {"xs8", split_sum_bytes(kk / 32)}});
        },
    // Q4_K: 6 tokens share each decoded code vector; 12 i32 accumulators
    // plus the codes fit the 32 vector registers with no spill (8 spills).
    // kiln bench, 2 threads, 4096x14336, n = 512: 1086 / 1080 / 1127
    // GFLOP/s at BLOCK_T 4 / 6 / 8, within noise. The others: 8, their
    // decoding costs more per code vector, so more tokens share it: Q5_K
    // 574 / 609 and 594 / 684 GFLOP/s at 6 / 8 in two runs, Q6_K 477 / 521
    // and Q3_K 427 / 481 at 4 / 8; Q4_1, Q5_0, MXFP4 and IQ4_XS equal at 6
    // and 8 within noise.
    // Q2_K, Q3_K and IQ4_XS: 12, Q2_K and Q3_K with their scaled decode
    // (groups16_scaled_superblock). llvm-mca (sapphirerapids) cycles per
    // byte dot of the chunk loop at 8 / 12: Q2_K 0.89 / 0.73, Q3_K 0.93 /
    // 0.87, IQ4_XS 0.81 / 0.74; beyond 12 the tokens' x pointers spill.
    .shape_heuristic = [](const Spec& s, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      const int64_t fmt = s.constexpr_("FMT");
      return rows16_block_t(a.i("t"), fmt == 12 ? 6 : fmt == 10 || fmt == 11 || fmt == 23 ? 12 : 8);
    },
    .tunables = {{"BLOCK_T", {1, 2, 4, 6, 8, 12, 16}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over the sub-blocks of a
    // super-block and k/256 super-blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
