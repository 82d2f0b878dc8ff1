// Quantized matrix-vector products for t tokens at once: y[i] = W x[i] for
// i < t, W [m, k] in ggml blocks (FMT = the ggml type id: Q4_0 2, Q4_1 3,
// Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14,
// IQ2_XXS 16, IQ2_XS 17, IQ3_XXS 18, IQ4_NL 20, IQ3_S 21, IQ2_S 22, IQ4_XS 23,
// MXFP4 39),
// each x[i] given as 8-bit blocks of 32 from quantize_q8 (q, scale d, sum s
// per block). t = 1 is decode's GEMV; larger t is prompt processing, where
// BLOCK_T tokens share every weight block a program decodes.
//
// Dequantisation is fused: a program streams BLOCK_M rows and unpacks each
// 32-weight sub-block's nibbles or bytes in registers once; TokenDots
// (token_dots.h) multiplies them with every token's x block. Per format,
// the scale and offset of that reduction:
// - Q4_0 (w = (q - 8) d): scale d, offset 8 d.
// - Q4_1 and Q5_1 (w = q d + m): scale d, offset -m, against d_x * sum(x_q)
//   rounded to f16 as llama.cpp's Q8_1 activations hold it.
// - Q5_0 (w = (q - 16) d, q's 5th bit from a u32 of bits): scale d, offset 16 d.
// - Q8_0 (w = q d, q signed): bytes flipped to q ^ 0x80 = q + 128; scale d,
//   offset 128 d.
// - Q4_K and Q5_K (w = d sc q - dmin m per 32-weight sub-block, 6-bit sc
//   and m; Q5_K's 5th bits from qh): scale d sc, offset dmin m.
// - Q2_K (w = d sc q - dmin m per 16 weights, 4-bit sc and m): each lane
//   takes its 16-weight group's scale and min (TokenDots' lane_min).
// - Q3_K and Q6_K (w = d sc (q - c), signed 6- or 8-bit sc per 16
//   weights, c = 4 or 32): each lane takes its group's scale; c is taken
//   off in the integer lanes (TokenDots' lane_offset).
// - IQ4_NL, IQ4_XS and MXFP4 (w = d table[q], a signed 16-entry codebook):
//   each nibble looked up in the table + 128 (a byte shuffle on SIMD
//   CPUs), so codes are unsigned as Q8_0's; scale d (IQ4_XS: d (ls - 32)
//   per 32 weights; MXFP4: 2^(e - 128)), offset 128 d.
// - The lattice formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S (w = db
//   (+-mag), mag a byte of a grid point): each point looked up whole as 8
//   (IQ2) or 4 (IQ3) bytes, the sign bits spread to byte masks by a lookup,
//   codes 128 +- mag; scale db per 32 weights (IQ2_XS, IQ2_S: per 16, lane
//   scales), the 128 taken off in the integer lanes (TokenDots'
//   lane_offset). Correct, not yet tuned for speed.
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/quant/e8m0.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/iq_grids.h"
#include "kernels/quant/rows16.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

// Formats with a scale per 16-weight group: Q2_K, Q3_K, Q6_K.
bool group_scales(int64_t fmt) { return fmt == 10 || fmt == 11 || fmt == 14; }

// Formats of 32-weight blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4):
// short rows of small blocks, whose decode wants more rows per program and
// the next row block prefetched.
bool small_blocks(int64_t fmt) { return ggml::is_blocks32(static_cast<ggml::QuantType>(fmt)); }

bool lattice(int64_t fmt) { return ggml::is_lattice(static_cast<ggml::QuantType>(fmt)); }

// The sign bytes of a lattice format's 8-weight groups as byte masks: entry
// i holds 0xFF in byte j where bit j of sign byte i is set (sign7: i is a
// 7-bit index completed by parity).
std::vector<int64_t> sign_masks(bool sign7) {
  std::vector<int64_t> t;
  for (int i = 0; i < (sign7 ? 128 : 256); ++i) {
    const int bits = sign7 ? ggml::lattice_signs(i) : i;
    uint64_t m = 0;
    for (int j = 0; j < 8; ++j)
      if (bits >> j & 1) m |= uint64_t{0xFF} << (8 * j);
    t.push_back(static_cast<int64_t>(m));
  }
  return t;
}

// Decodes a format's blocks into sub-blocks. Two shapes of code, chosen by
// how many tokens share the decoded weights:
// - one token (decode's GEMV, bandwidth-bound): a whole block per loop
//   iteration, unrolled, with 32-byte code pieces (8 lanes per row), the
//   fewest instructions per weight byte;
// - several tokens (compute-bound): a runtime loop over steps of a block
//   (Q4_K: 64 weights, Q6_K: 128) small enough that the codes and every
//   token's accumulators stay in registers, and 16-byte code pieces (4
//   lanes per row), which halves the f32 work per token.
int64_t code_piece_bytes(int64_t fmt, bool stepped) {
  // Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4: weight j, j + 16 share a byte.
  const bool nibbles =
      fmt == 2 || fmt == 3 || fmt == 6 || fmt == 7 || fmt == 20 || fmt == 23 || fmt == 39;
  // 16-weight group scales take 4 lanes each of a 32-byte piece; a lattice
  // sub-block is one 32-byte piece.
  if (lattice(fmt)) return 32;
  return nibbles || (stepped && !group_scales(fmt)) ? 16 : 32;
}

// Formats with Q4_K's 12-byte 6-bit scales and mins per 32 weights.
bool scale_min_k(int64_t fmt) { return fmt == 12 || fmt == 13; }

// v >> by, by a scalar (any int dtype) or per-lane amount, in v's dtype.
Value shr(const Value& v, const Value& by) {
  return v >> broadcast_to(by.to(v.dtype()), v.shape());
}

// The f16 held in each row's two little-endian bytes ([.., 2] u8), as f32.
Value f16_value(const Value& two_bytes) {
  return two_bytes.bitcast(DType::u16).bitcast(DType::f16).to(DType::f32);
}

// Q4_0 and Q8_0 as unsigned codes: w = (code - offset) d, Q8_0's signed
// bytes flipped by ^ 128.
int64_t code_offset(int64_t fmt) { return fmt == 8 ? 128 : 8; }

class Decoder {
 public:
  // `x`, `xbase` (the one token's first x block) and `dots` serve the
  // single-token Q4_K path, which scales with the activations itself.
  Decoder(int64_t fmt, int64_t bm, bool stepped, Buffer w, std::function<Value(const Pointer&)> ld,
          QuantizedActivations x, Value xbase, TokenDots& dots)
      : FMT(fmt),
        BM(bm),
        stepped(stepped),
        w_(w),
        ld_(std::move(ld)),
        x_(x),
        xbase_(xbase),
        dots_(dots) {}

  int64_t steps_per_block() const {
    if (!stepped) return 1;
    if (lattice(FMT)) return 8;        // 32 weights a step
    if (scale_min_k(FMT)) return 4;    // 64 weights a step
    return group_scales(FMT) ? 2 : 1;  // 128
  }
  int64_t piece_bytes() const { return code_piece_bytes(FMT, stepped); }

  // The sub-blocks of step `step` (ignored unless stepped) of the block at
  // byte offsets `blk` [BM,1], whose x blocks start at `xb0`.
  std::vector<SubBlock> decode(const Value& blk, const Value& step, const Value& xb0) {
    switch (FMT) {
      case 2: return {q4_0(blk, xb0)};
      case 3: return {q4_1(blk, xb0)};
      case 6: return {q5(blk, xb0, false)};
      case 7: return {q5(blk, xb0, true)};
      case 8: return {q8_0(blk, xb0)};
      case 20: return {lookup_nibbles(blk + 2, f16_at(blk), xb0)};
      case 23: return iq4_xs(blk, xb0);
      case 39: return {lookup_nibbles(blk + 1, e8m0_half_value(bytes(blk, 1)), xb0)};
      case 12:
      case 13: return stepped ? k_step(blk, step, xb0) : k_block(blk, xb0);
      case 16:
      case 17:
      case 18:
      case 21:
      case 22: {
        if (stepped) return {lattice_sub(blk, step, xb0 + step)};
        std::vector<SubBlock> out;
        for (int s = 0; s < 8; ++s)
          out.push_back(lattice_sub(blk, full({}, s, DType::i32), xb0 + s));
        return out;
      }
      default: {  // 128-weight halves: Q2_K, Q3_K, Q6_K
        if (stepped) return half(blk, step, xb0);
        auto out = half(blk, full({}, 0, DType::i32), xb0);
        auto second = half(blk, full({}, 1, DType::i32), xb0);
        out.insert(out.end(), second.begin(), second.end());
        return out;
      }
    }
  }

  const int64_t FMT, BM;
  const bool stepped;

 private:
  Value bytes(const Value& off, int64_t n) {
    return ld_(w_ + (off + arange(n).to(DType::i64)));  // [BM, n] u8
  }
  // The f16 at byte offset off of each row ([BM,1]), as f32: two bytes viewed
  // as one u16, then as f16.
  Value f16_at(const Value& off) { return f16_value(bytes(off, 2)); }
  // The 32 code bytes at `off` as pieces of piece_bytes(), each with the
  // index of its first weight, after `f` (a nibble pick or a sign flip).
  std::vector<SubBlock::Piece> pieces(const Value& off, const std::function<Value(Value)>& f) {
    std::vector<SubBlock::Piece> out;
    for (int64_t first = 0; first < 32; first += piece_bytes())
      out.push_back({f(bytes(off + static_cast<int>(first), piece_bytes())), first});
    return out;
  }

  SubBlock q4_0(const Value& blk, const Value& xb) {
    auto d = f16_at(blk);
    auto qs = bytes(blk + 2, 16);
    return {
        {{qs & 15, 0}, {qs >> 4, 16}}, d, {{d * static_cast<double>(code_offset(2)), 0, 32}}, xb};
  }

  // w = q d + m: the min enters as a negative offset.
  SubBlock q4_1(const Value& blk, const Value& xb) {
    auto d = f16_at(blk), m = f16_at(blk + 2);
    auto qs = bytes(blk + 4, 16);
    return {{{qs & 15, 0}, {qs >> 4, 16}}, d, {{-m, 0, 32, true}}, xb};
  }

  // Q5_0 (w = (q - 16) d) and Q5_1 (w = q d + m): nibbles as Q4_0's, and
  // the 5th bits, bit j of a little-endian u32 for weight j, as 16 where set.
  SubBlock q5(const Value& blk, const Value& xb, bool with_min) {
    auto d = f16_at(blk);
    const int64_t qh_at = with_min ? 4 : 2;
    auto qh = bytes(blk + static_cast<int>(qh_at), 4);  // [BM,4]
    auto qs = bytes(blk + static_cast<int>(qh_at + 4), 16);
    auto lane_bit = (full({16}, 1, DType::i32) << (arange(16) % 8)).to(DType::u8);  // [16]
    auto fifth = [&](int64_t first) {  // [BM,16]: 16 where weight first + j has its bit set
      auto two = reshape(slice(qh, {0, first / 8}, {BM, 2}), {BM, 2, 1});
      auto spread = reshape(broadcast_to(two, {BM, 2, 8}), {BM, 16});
      auto set = (spread & broadcast_to(lane_bit, {BM, 16})) != full({BM, 16}, 0, DType::u8);
      return where(set, full({BM, 16}, 16, DType::u8), full({BM, 16}, 0, DType::u8));
    };
    SubBlock sb{{{(qs & 15) | fifth(0), 0}, {(qs >> 4) | fifth(16), 16}}, d, {}, xb};
    if (with_min)
      sb.offsets = {{-f16_at(blk + 2), 0, 32, true}};
    else
      sb.offsets = {{d * 16.0, 0, 32}};
    return sb;
  }

  // 16 bytes of nibble codes at `qs` looked up in the unsigned codebook
  // (weights 0-15 low nibbles, 16-31 high), scale d, offset 128 d.
  SubBlock lookup_nibbles(const Value& qs_at, const Value& d, const Value& xb) {
    auto qs = bytes(qs_at, 16);
    auto table = ggml::unsigned_codebook(static_cast<ggml::QuantType>(FMT));
    return {{{lookup(table, DType::u8, qs & 15), 0}, {lookup(table, DType::u8, qs >> 4), 16}},
            d,
            {{d * 128.0, 0, 32}},
            xb};
  }

  // The 8 sub-blocks of an IQ4_XS super-block: sub-block s's 6-bit scale
  // is nibble s % 2 of scales_l[s / 2] with bits 2s..2s+1 of the u16
  // scales_h above it.
  std::vector<SubBlock> iq4_xs(const Value& blk, const Value& xb0) {
    auto d = f16_at(blk);
    auto high = bytes(blk + 2, 2).bitcast(DType::u16).to(DType::i32);  // [BM,1]
    auto low = bytes(blk + 4, 4).to(DType::i32);                       // [BM,4]
    std::vector<SubBlock> out;
    for (int64_t s = 0; s < 8; ++s) {
      auto ls = ((slice(low, {0, s / 2}, {BM, 1}) >> static_cast<int>(4 * (s % 2))) & 15) |
                (((high >> static_cast<int>(2 * s)) & 3) << 4);
      out.push_back(lookup_nibbles(blk + static_cast<int>(8 + 16 * s), d * (ls - 32).to(DType::f32),
                                   xb0 + static_cast<int>(s)));
    }
    return out;
  }

  // Sub-block s of a lattice block (layouts in ggml_blocks.h).
  SubBlock lattice_sub(const Value& blk, const Value& s, const Value& xb) {
    auto s64 = s.to(DType::i64);
    auto d = f16_at(blk);
    // The 4 sign7 indices and the scale step ls of IQ2_XXS/IQ3_XXS's u32.
    auto sign7_word = [&](const Value& four_bytes, double step, Value* scale) {
      auto a = four_bytes.bitcast(DType::u32);  // [BM,1]
      auto at = (arange(4) * 7).to(DType::u32);
      *scale = d * ((a >> 28).to(DType::f32) + 0.5) * step;
      return (broadcast_to(a, {BM, 4}) >> broadcast_to(at, {BM, 4})) & 127;
    };
    // IQ2_XS/IQ2_S's two 16-weight scales in a byte, as [BM,8] lane scales.
    auto nibble_scales = [&](const Value& byte) {
      auto low = broadcast_to(arange(8) < 4, {BM, 8});
      auto b = broadcast_to(byte, {BM, 8});
      return d * (where(low, b & 15, b >> 4).to(DType::f32) + 0.5) * 0.25;
    };
    Value points, signs, scale;
    bool sign7 = true;
    switch (FMT) {
      case 16: {  // IQ2_XXS
        auto q = bytes(blk + 2 + s64 * 8, 8);
        points = slice(q, {0, 0}, {BM, 4});
        signs = sign7_word(slice(q, {0, 4}, {BM, 4}), 0.25, &scale);
        break;
      }
      case 17: {                                                   // IQ2_XS
        auto q = bytes(blk + 2 + s64 * 8, 8).bitcast(DType::u16);  // [BM,4]
        points = q & 511;
        signs = q >> 9;
        scale = nibble_scales(bytes(blk + 66 + s64, 1));
        break;
      }
      case 22: {  // IQ2_S
        auto high = (broadcast_to(bytes(blk + 66 + s64, 1), {BM, 4}).to(DType::i32) >>
                     broadcast_to(arange(4) * 2, {BM, 4})) &
                    3;
        points = bytes(blk + 2 + s64 * 4, 4).to(DType::i32) | (high << 8);
        signs = bytes(blk + 34 + s64 * 4, 4);
        sign7 = false;
        scale = nibble_scales(bytes(blk + 74 + s64, 1));
        break;
      }
      case 18: {  // IQ3_XXS
        points = bytes(blk + 2 + s64 * 8, 8);
        signs = sign7_word(bytes(blk + 66 + s64 * 4, 4), 0.5, &scale);
        break;
      }
      default: {  // IQ3_S
        auto high = (broadcast_to(bytes(blk + 66 + s64, 1), {BM, 8}).to(DType::i32) >>
                     broadcast_to(arange(8), {BM, 8})) &
                    1;
        points = bytes(blk + 2 + s64 * 8, 8).to(DType::i32) | (high << 8);
        signs = bytes(blk + 74 + s64 * 4, 4);
        sign7 = false;
        auto ls = shr(bytes(blk + 106 + s64 / 2, 1), (s % 2) * 4) & 15;
        scale = d * (ls.to(DType::i32) * 2 + 1).to(DType::f32);
      }
    }
    const bool iq3 = FMT == 18 || FMT == 21;
    const auto& grid = ggml::lattice_grid(static_cast<ggml::QuantType>(FMT));
    auto mag =
        lookup(grid, iq3 ? DType::i32 : DType::i64, points.to(DType::i32)).bitcast(DType::u8);
    auto neg = lookup(sign_masks(sign7), DType::i64, signs.to(DType::i32)).bitcast(DType::u8);
    auto mid = full({BM, 32}, 128, DType::u8);
    auto codes = where(neg != full({BM, 32}, 0, DType::u8), mid - mag, mid + mag);
    SubBlock sb{{{codes, 0}}, scale, {}, xb};
    sb.lane_offset = 128;
    return sb;
  }

  SubBlock q8_0(const Value& blk, const Value& xb) {
    auto d = f16_at(blk);
    return {pieces(blk + 2, [](Value q) { return q ^ 128; }),
            d,
            {{d * static_cast<double>(code_offset(8)), 0, 32}},
            xb};
  }

  // Sub-block j of a Q4_K or Q5_K block, as pieces: the low (even j) or
  // high nibbles of the 32 bytes of qs at 32 (j / 2) (`chunk_off`), and for
  // Q5_K bit j of qh's byte l as the 5th bit of weight l.
  std::vector<SubBlock::Piece> k_codes(const Value& blk, const Value& chunk_off, int64_t half,
                                       const Value& j) {
    const bool q5 = FMT == 13;
    std::vector<SubBlock::Piece> out;
    for (int64_t first = 0; first < 32; first += piece_bytes()) {
      auto q = bytes(blk + (q5 ? 48 : 16) + chunk_off + static_cast<int>(first), piece_bytes());
      auto code = half == 0 ? (q & 15) : (q >> 4);
      if (q5)
        code = code | ((shr(bytes(blk + 16 + static_cast<int>(first), piece_bytes()), j) & 1) << 4);
      out.push_back({code, first});
    }
    return out;
  }

  // The whole super-block for one token. The 6-bit scales and mins
  // (FORMATS.md: sub-blocks 0-3 keep them in the low 6 bits of bytes j and
  // j+4; 4-7 split them between byte j+4's nibbles and the top 2 bits of
  // bytes j-4 and j) are unpacked from one 12-byte load into [BM,8] tiles
  // and multiplied by the 8 activation scales at once, so each sub-block
  // only picks its column; the min terms go to TokenDots in one [BM,8] op.
  std::vector<SubBlock> k_block(const Value& blk, const Value& xb0) {
    auto d = f16_at(blk), dmin = f16_at(blk + 2);  // [BM,1]
    auto sc = bytes(blk + 4, 12);                  // [BM,12]
    auto four = [&](int64_t first) { return slice(sc, {0, first}, {BM, 4}); };
    // [BM,4] -> [BM,8] with both halves equal; where() then picks a half.
    auto twice = [&](const Value& v) {
      return reshape(broadcast_to(reshape(v, {BM, 1, 4}), {BM, 2, 4}), {BM, 8});
    };
    auto first_half = broadcast_to(arange(8) < 4, {BM, 8});
    auto s6 = where(first_half, twice(four(0) & 63), twice((four(8) & 15) | ((four(0) >> 6) << 4)));
    auto m6 = where(first_half, twice(four(4) & 63), twice((four(8) >> 4) | ((four(4) >> 6) << 4)));
    auto xb = xbase_ + xb0 + arange(8);
    auto dx = load(x_.d + xb);                      // [8]
    auto sx = load(x_.s + xb).to(DType::f32) * dx;  // [8]
    auto scales = d * s6.to(DType::f32) * dx;       // [BM,8]
    dots_.subtract(dmin * m6.to(DType::f32) * sx);  // [BM,8]
    std::vector<SubBlock> out;
    for (int64_t j = 0; j < 8; ++j) {
      auto chunk = full({}, 32.0 * (j / 2), DType::i64);
      SubBlock sb{k_codes(blk, chunk, j % 2, full({}, static_cast<double>(j), DType::i32)),
                  slice(scales, {0, j}, {BM, 1}),
                  {},
                  xb0 + static_cast<int>(j)};
      sb.scale_has_dx = true;
      out.push_back(sb);
    }
    return out;
  }

  // Step c: sub-blocks 2c and 2c+1, their scale bytes loaded one by one.
  std::vector<SubBlock> k_step(const Value& blk, const Value& c, const Value& xb0) {
    auto d = f16_at(blk), dmin = f16_at(blk + 2);  // [BM,1]
    std::vector<SubBlock> out;
    for (int64_t half = 0; half < 2; ++half) {
      auto j = c * 2 + static_cast<int>(half);
      auto byte = [&](const Value& i) { return bytes(blk + 4 + i.to(DType::i64), 1); };
      auto a = byte(j % 4), b = byte(j + 4), hi = byte(j);
      auto low = j < 4;
      auto s6 = where(low, a & 63, (b & 15) | ((a >> 6) << 4));
      auto m6 = where(low, b & 63, (b >> 4) | ((hi >> 6) << 4));
      out.push_back({k_codes(blk, (c * 32).to(DType::i64), half, j),
                     d * s6.to(DType::f32),
                     {{dmin * m6.to(DType::f32), 0, 32}},
                     xb0 + j});
    }
    return out;
  }

  // [BM,8] per-group values -> the [BM,8] lane values of sub-block s
  // (groups 2s and 2s+1 over lanes 0-3 and 4-7).
  Value lane_pair(const Value& groups, int64_t s) {
    auto pair = reshape(slice(groups, {0, 2 * s}, {BM, 2}), {BM, 2, 1});
    return reshape(broadcast_to(pair, {BM, 2, 4}), {BM, 8});
  }

  std::vector<SubBlock> half(const Value& blk, const Value& h, const Value& xb0) {
    switch (FMT) {
      case 10: return q2_k(blk, h, xb0);
      case 11: return q3_k(blk, h, xb0);
      default: return q6_k(blk, h, xb0);
    }
  }

  // Half h of a Q6_K super-block: sub-blocks 4h .. 4h+3, low bits from
  // ql[64h .. 64h+63], high bits from qh[32h .. 32h+31], scales 8h .. 8h+7.
  std::vector<SubBlock> q6_k(const Value& blk, const Value& h, const Value& xb0) {
    auto d = f16_at(blk + 208);  // [BM,1]
    auto h64 = h.to(DType::i64);
    auto scd = bytes(blk + 192 + h64 * 8, 8).bitcast(DType::i8).to(DType::f32) * d;  // [BM,8]
    auto ql_lo = bytes(blk + h64 * 64, 32), ql_hi = bytes(blk + h64 * 64 + 32, 32);
    auto qh = bytes(blk + 128 + h64 * 32, 32);
    std::vector<SubBlock> out;
    for (int64_t s = 0; s < 4; ++s) {
      auto low = s % 2 == 0 ? ql_lo : ql_hi;
      auto q = (s < 2 ? (low & 15) : (low >> 4)) | (((qh >> static_cast<int>(2 * s)) & 3) << 4);
      SubBlock sb{{{q, 0}}, lane_pair(scd, s), {}, xb0 + h * 4 + static_cast<int>(s)};
      sb.lane_offset = 32;
      out.push_back(sb);
    }
    return out;
  }

  // Half h of a Q3_K super-block: quarter s takes bits 2s..2s+1 of
  // qs[32h .. 32h+31] and bit 4h + s of hmask as the 3rd bit; groups 8h ..
  // 8h+7 have 6-bit scales (low nibbles of bytes 0-7 for h = 0, high
  // nibbles for h = 1; bits 4-5 from byte 8 + g % 4 at bit 2 (g / 4)).
  std::vector<SubBlock> q3_k(const Value& blk, const Value& h, const Value& xb0) {
    auto d = f16_at(blk + 108);
    auto h64 = h.to(DType::i64);
    auto lo = bytes(blk + 96, 8);
    auto low4 = where(broadcast_to(h == 0, {BM, 8}), lo & 15, lo >> 4);
    auto hi = bytes(blk + 104, 4);
    auto hi8 = reshape(broadcast_to(reshape(hi, {BM, 1, 4}), {BM, 2, 4}), {BM, 8});
    auto hi_shift = (arange(8) / 4) * 2 + h * 4;  // [8]
    auto s6 = low4 | ((shr(hi8, broadcast_to(hi_shift, {BM, 8})) & 3) << 4);
    auto scd = (s6.to(DType::i32) - 32).to(DType::f32) * d;  // [BM,8]
    auto qs = bytes(blk + 32 + h64 * 32, 32), hm = bytes(blk, 32);
    std::vector<SubBlock> out;
    for (int64_t s = 0; s < 4; ++s) {
      auto q =
          ((qs >> static_cast<int>(2 * s)) & 3) | ((shr(hm, h * 4 + static_cast<int>(s)) & 1) << 2);
      SubBlock sb{{{q, 0}}, lane_pair(scd, s), {}, xb0 + h * 4 + static_cast<int>(s)};
      sb.lane_offset = 4;
      out.push_back(sb);
    }
    return out;
  }

  // Half h of a Q2_K super-block: quarter s takes bits 2s..2s+1 of
  // qs[32h .. 32h+31]; group g's byte scales[g] holds its 4-bit scale (low)
  // and min (high), each lane taking its group's scale and min.
  std::vector<SubBlock> q2_k(const Value& blk, const Value& h, const Value& xb0) {
    auto d = f16_at(blk + 80), dmin = f16_at(blk + 82);
    auto h64 = h.to(DType::i64);
    auto sc = bytes(blk + h64 * 8, 8);
    auto scd = (sc & 15).to(DType::f32) * d, mins = (sc >> 4).to(DType::f32) * dmin;  // [BM,8]
    auto qs = bytes(blk + 16 + h64 * 32, 32);
    std::vector<SubBlock> out;
    for (int64_t s = 0; s < 4; ++s) {
      SubBlock sb{{{(qs >> static_cast<int>(2 * s)) & 3, 0}},
                  lane_pair(scd, s),
                  {},
                  xb0 + h * 4 + static_cast<int>(s)};
      sb.lane_min = lane_pair(mins, s);
      out.push_back(sb);
    }
    return out;
  }

  Buffer w_;
  std::function<Value(const Pointer&)> ld_;
  QuantizedActivations x_;
  Value xbase_;
  TokenDots& dots_;
};

// One row, one token, Q4_0 or Q8_0 (decode's GEMV at BLOCK_M = 1): a
// 32-weight block is too little work to pay for its scale and offset, so a
// step takes kBlocksPerStep consecutive blocks of the row as the rows of
// one tile, each against its own x block: [8,32] codes times [8,32] x is
// one 512-bit-wide dot, and the 8 scales and offsets are vector ops.
constexpr int64_t kBlocksPerStep = 8;

void one_row_pass(KernelBuilder& k, int64_t fmt, const ggml::BlockFormat& f, Buffer w,
                  QuantizedActivations x, Buffer y, Value M, Value nb, Value kb) {
  const int64_t S = kBlocksPerStep;
  auto row = k.program_id(1), tok = k.program_id(0);
  auto row_base = row.to(DType::i64) * (nb * f.block_bytes).to(DType::i64);
  auto xblk0 = tok.to(DType::i64) * kb.to(DType::i64);
  auto acc = k.var(zeros(DType::f32, {S, 8}));
  auto accm = k.var(zeros(DType::f32, {S}));
  auto step = [&](const Value& first, bool masked) {
    auto bidx = first + arange(S);  // [S] block indices
    auto live = bidx < nb;
    auto live2 = expand_dims(live, 1);
    auto blk = expand_dims(row_base + (bidx * f.block_bytes).to(DType::i64), 1);  // [S,1]
    auto ld = [&](const Pointer& p, const Value& mask) {
      return masked ? load(p, broadcast_to(mask, p.offsets.shape()), 0.0) : load(p);
    };
    auto bytes = [&](const Value& off, int64_t n) {
      return ld(w + (off + arange(n).to(DType::i64)), live2);
    };
    auto d = f16_value(bytes(blk, 2));  // [S,1]
    Value codes;
    if (fmt == 8) {
      codes = bytes(blk + 2, 32) ^ 128;
    } else {  // low nibbles: weights 0-15, high nibbles: 16-31
      auto qs = bytes(blk + 2, 16);
      auto both = reshape(broadcast_to(reshape(qs, {S, 1, 16}), {S, 2, 16}), {S, 32});
      codes = where(broadcast_to(arange(32) < 16, {S, 32}), both & 15, both >> 4);
    }
    auto xb = xblk0 + bidx.to(DType::i64);  // [S]
    auto xq = ld(x.q + (expand_dims(xb * 32, 1) + arange(32).to(DType::i64)), live2);
    auto dot = sum(reshape(codes.to(DType::i32) * xq.to(DType::i32), {S, 8, 4}), 2);  // [S,8]
    auto dx = ld(x.d + xb, live);  // 0 for blocks past the row: they add nothing
    auto sx = ld(x.s + xb, live).to(DType::f32);
    auto dd = reshape(d, {S}) * dx;
    acc = fma(dot.to(DType::f32), broadcast_to(expand_dims(dd, 1), {S, 8}), Value(acc));
    accm = fma(dd * static_cast<double>(code_offset(fmt)), sx, Value(accm));
  };
  auto full = nb / static_cast<int>(S);
  k.for_(0, full, 1, [&](Value i) { step(i * static_cast<int>(S), false); });
  k.if_(full * static_cast<int>(S) < nb, [&] { step(full * static_cast<int>(S), true); });
  auto out = sum(Value(acc)) - sum(Value(accm));
  store(y + (tok.to(DType::i64) * M.to(DType::i64) + row.to(DType::i64)), out);
}

Kernel build_qgemv(const Spec& s) {
  KernelBuilder k("qgemv", s);
  const int64_t FMT = s.constexpr_("FMT"), BM = s.constexpr_("BLOCK_M"),
                BT = s.constexpr_("BLOCK_T");
  // The block geometry of the weight format (throws for formats qgemv lacks).
  const ggml::BlockFormat& f = ggml::block_format(static_cast<int>(FMT));
  auto w = k.buffer("w", DType::u8), xq = k.buffer("xq", DType::i8);
  auto xd = k.buffer("xd", DType::f32), xs = k.buffer("xs", DType::i32);
  auto y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  auto nb = K / f.block_elems;
  auto kb = K / 32;  // x blocks per token
  ExpertTiles tiles(k, s, BT, T);
  if (BM == 1 && BT == 1 && (FMT == 2 || FMT == 8) && !tiles.grouped()) {
    one_row_pass(k, FMT, f, w, {xq, xd, xs}, y, M, nb, kb);
    return k.finish();
  }
  // Plain, token blocks vary fastest, so a row block's weights stay in
  // cache while every token block passes over them (ExpertTiles::row_block).
  tiles.run([&] {
    auto row0 = tiles.row_block() * static_cast<int>(BM);
    auto tok0 = tiles.first();
    auto toks = tiles.x_rows(BT);
    auto we = tiles.weights(w);
    // Full row blocks load unmasked (contiguous vector loads); only the last
    // row block, whose rows run past m, takes the masked path.
    auto rows_pass = [&](bool row_masked) {
      auto rows = row0 + arange(BM);
      auto rmask = expand_dims(rows < M, 1);
      auto row_bytes = (nb * f.block_bytes).to(DType::i64);
      auto row_base = expand_dims(rows.to(DType::i64) * row_bytes, 1);  // [BM,1]
      const bool stepped = BT > 1;
      TokenDots dots(k, {xq, xd, xs}, toks, kb, BM, code_piece_bytes(FMT, stepped) / 4,
                     scale_min_k(FMT) && !stepped ? 8 : 0);
      Decoder dec(
          FMT, BM, stepped, we,
          [&](const Pointer& p) { return row_masked ? load(p, rmask, 0.0) : load(p); },
          {xq, xd, xs}, toks[0] * kb, dots);
      auto step = [&](const Value& b, const Value& part) {
        auto blk = row_base + (b * f.block_bytes).to(DType::i64);  // [BM,1]
        for (const SubBlock& sb : dec.decode(blk, part, b * static_cast<int>(f.block_elems / 32)))
          dots.add(sb);
      };
      k.for_(0, nb, 1, [&](Value b) {
        // The 32-weight formats' next row block a block at a time, as gemv
        // does: hardware prefetch stops at each page, and their rows are
        // short (kiln bench, 2 threads, alternated 3x, at 14336x4096: Q4_1
        // 0.68 -> 0.83-0.86 of the probe, Q5_0 0.49-0.57 -> 0.83-0.85,
        // MXFP4 0.52 -> 0.74-0.93; at 4096x14336 0.68-0.75 -> 0.70-0.89).
        // The 256-weight formats' plain pass gained nothing clear (Q4_K lost).
        if (!row_masked && !stepped && small_blocks(FMT))
          prefetch(we + (row_base + (b * f.block_bytes).to(DType::i64) +
                         static_cast<int64_t>(BM) * row_bytes));
        if (dec.steps_per_block() == 1)
          step(b, b);
        else
          k.for_(0, static_cast<int>(dec.steps_per_block()), 1, [&](Value p) { step(b, p); });
      });
      dots.store_tokens(y, tok0, T, M, rows, row_masked);
    };
    split_row_block(k, s.target, row0, BM, M, rows_pass);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemv",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens, W in ggml blocks (FMT = type id: Q4_0 2, Q4_1 3, "
               "Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14, IQ2_XXS 16, "
               "IQ2_XS 17, IQ3_XXS 18, IQ4_NL 20, IQ3_S 21, IQ2_S 22, IQ4_XS 23, MXFP4 39), x from "
               "quantize_q8",
    .dtype_roles = {},
    // GROUPED: plain or one launch for a layer's experts (expert_tiles.h).
    .constexpr_defaults = {{"FMT", 8}, {"BLOCK_M", 8}, {"BLOCK_T", 1}, {"GROUPED", 0}},
    .build = build_qgemv,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k"), t = a.i("t");
          const ggml::BlockFormat& f = ggml::block_format(static_cast<int>(s.constexpr_("FMT")));
          if (kk % f.block_elems)
            throw Error("kernel 'qgemv': k = " + std::to_string(kk) + " is not a multiple of the " +
                        std::to_string(f.block_elems) + "-weight block");
          LaunchShape shape = token_launch("qgemv", s, m, kk, t);
          shape.buffer_elems["w"] = m * (kk / f.block_elems) * f.block_bytes;
          return expert_tiles_launch("qgemv", s, a, shape, s.constexpr_("BLOCK_T"), "w",
                                     {{"xq", kk}, {"xd", kk / 32}, {"xs", kk / 32}});
        },
    // Prompts share each decoded weight block among BLOCK_T tokens of 8
    // rows: 8 tokens for Q4_K and Q5_K (TinyLlama Q4_K_M prefill, mean of 3
    // runs: 128 -> 139 tok/s), 4 for the rest (Q6_K spills at 8). Decode
    // streams the weights from DRAM: one row per program (one prefetchable
    // stream per thread) for Q4_0 and Q8_0, whose one-row pass takes 8
    // blocks per step as a tile (1.7x the tok/s of 8 interleaved rows on
    // TinyLlama); 4 rows for the 16-weight-group formats, whose per-group
    // scales are [rows, 8] tiles; 16 for the other 32-weight blocks and 8
    // for the rest, which gain most from sharing x's blocks. kiln bench, 2
    // threads, fraction of the probe at 4096x14336 / 14336x4096 (rows per
    // program), on Zen 5, 8 and 16 alternated 3x, medians: Q4_1 0.69 / 0.60
    // (8), 0.75 / 0.69 (16); Q5_0 0.63 / 0.42, 0.68 / 0.53; Q5_1 0.72 /
    // 0.66, 0.76 / 0.61; IQ4_NL 0.60 / 0.47, 0.72 / 0.51; MXFP4 0.59 / 0.38,
    // 0.71 / 0.52. Earlier, on Zen 4:
    //   Q4_1 0.19 / 0.22 (1), 0.66 / 0.47 (4), 0.75 / 0.44 (8); Q5_0 and
    //   Q5_1 alike; IQ4_NL 0.69 / 0.45 (4), 0.80 / 0.52 (8); IQ4_XS and
    //   MXFP4 alike; Q2_K 0.24 / 0.23 (1), 0.47 / 0.31 (4), 0.48 / 0.29 (8);
    //   Q3_K 0.49 / 0.47 (1), 0.60 / 0.43 (4), 0.62 / 0.38 (8); Q6_K 0.66 /
    //   0.66 (1), 0.84 (4), 0.85 / 0.68 (8); Q4_K 33 -> 55 GB/s (1 -> 8).
    .shape_heuristic = [](const Spec& s, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      int64_t fmt = s.constexpr_("FMT");
      if (a.i("t") >= 4) return {{"BLOCK_T", scale_min_k(fmt) ? 8 : 4}, {"BLOCK_M", 8}};
      const bool one_row = fmt == 2 || fmt == 8;
      return {{"BLOCK_T", 1},
              {"BLOCK_M", one_row             ? 1
                          : group_scales(fmt) ? 4
                          : small_blocks(fmt) ? 16
                                              : 8}};
    },
    .tunables = {{"BLOCK_M", {1, 2, 4, 8, 16}}, {"BLOCK_T", {1, 2, 4, 8}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over k/32 blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
