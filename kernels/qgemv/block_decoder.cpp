#include "kernels/qgemv/block_decoder.h"

#include <vector>

#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/quant/e8m0.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/iq_grids.h"
#include "kernels/quant/rows16.h"

namespace kiln {
namespace {

using T = TensorType;

bool lattice(T fmt) { return ggml::is_lattice(fmt); }

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

// v >> by, by a scalar (any int dtype) or per-lane amount, in v's dtype.
Value shr(const Value& v, const Value& by) {
  return v >> broadcast_to(by.to(v.dtype()), v.shape());
}

}  // namespace

bool group_scales(T fmt) { return fmt == T::q2_K || fmt == T::q3_K || fmt == T::q6_K; }

bool small_blocks(T fmt) { return ggml::is_blocks32(fmt); }

bool scale_min_k(T fmt) { return fmt == T::q4_K || fmt == T::q5_K; }

int64_t code_piece_bytes(T fmt, DecodeSteps steps) {
  // Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4: weight j, j + 16 share a byte.
  const bool nibbles = fmt == T::q4_0 || fmt == T::q4_1 || fmt == T::q5_0 || fmt == T::q5_1 ||
                       fmt == T::iq4_nl || fmt == T::iq4_xs || fmt == T::mxfp4;
  // 16-weight group scales take 4 lanes each of a 32-byte piece; a lattice
  // sub-block is one 32-byte piece.
  if (lattice(fmt)) return 32;
  return nibbles || (steps == DecodeSteps::shared && !group_scales(fmt)) ? 16 : 32;
}

Value f16_value(const Value& two_bytes) {
  return two_bytes.bitcast(DType::u16).bitcast(DType::f16).to(DType::f32);
}

int64_t code_offset(T fmt) { return fmt == T::q8_0 ? 128 : 8; }

GgmlGemm declare_ggml_gemm(KernelBuilder& k, const Spec& s) {
  const TensorTypeInfo& f = block_type_info(s.constexpr_("FMT"));
  auto w = k.buffer("w", DType::u8), xq = k.buffer("xq", DType::i8);
  auto xd = k.buffer("xd", DType::f32), xs = k.buffer("xs", DType::i32);
  auto y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  return {w, {xq, xd, xs}, y, M, K, T, f, K / f.block_elems};
}

LaunchShape ggml_gemm_launch(const std::string& kernel, const Spec& s, const ScalarArgs& a) {
  int64_t m = a.i("m"), kk = a.i("k"), t = a.i("t");
  const TensorTypeInfo& f = block_type_info(s.constexpr_("FMT"));
  if (kk % f.block_elems)
    throw Error("kernel '" + kernel + "': k = " + std::to_string(kk) +
                " is not a multiple of the " + std::to_string(f.block_elems) + "-weight block");
  LaunchShape shape = token_launch(kernel, s, m, kk, t);
  shape.buffer_elems["w"] = m * (kk / f.block_elems) * f.block_bytes;
  return expert_tiles_launch(kernel, s, a, shape, s.constexpr_("BLOCK_T"), "w",
                             {{"xq", kk}, {"xd", kk / 32}, {"xs", kk / 32}});
}

BlockDecoder::BlockDecoder(T fmt, int64_t bm, DecodeSteps steps, Buffer w,
                           std::function<Value(const Pointer&)> ld, const OneTokenDots* one)
    : FMT(fmt), BM(bm), steps(steps), w_(w), ld_(std::move(ld)) {
  if (one) one_ = *one;
  if (steps == DecodeSteps::block && scale_min_k(fmt) && !(one_ && one_->dots))
    throw Error("BlockDecoder: a single-token Q4_K/Q5_K decode needs the token's dots");
}

int64_t BlockDecoder::steps_per_block() const {
  if (steps == DecodeSteps::sub_blocks) return tensor_type_info(FMT).block_elems / 32;
  if (!stepped()) return 1;
  if (lattice(FMT)) return 8;        // 32 weights a step
  if (scale_min_k(FMT)) return 4;    // 64 weights a step
  return group_scales(FMT) ? 2 : 1;  // 128
}

std::vector<SubBlock> BlockDecoder::decode(const Value& blk, const Value& step, const Value& xb0) {
  if (steps == DecodeSteps::sub_blocks) {
    switch (FMT) {
      case T::q2_K: return {q2_k_sub(blk, step, xb0)};
      case T::q3_K: return {q3_k_sub(blk, step, xb0)};
      case T::q6_K: return {q6_k_sub(blk, step, xb0)};
      case T::q4_K:
      case T::q5_K: {
        auto d = f16_at(blk), dmin = f16_at(blk + fields::Q4_K::dmin);
        auto chunk = ((step / 2) * 32).to(DType::i64);
        return {k_sub(
            blk, d, dmin, step, [&] { return k_codes(blk, chunk, -1, step); }, xb0)};
      }
      case T::iq4_xs: return {iq4_xs_sub(blk, step, xb0)};
      default: break;  // one sub-block a step already (or a block of one)
    }
  }
  switch (FMT) {
    case T::q4_0: return {q4_0(blk, xb0)};
    case T::q4_1: return {q4_1(blk, xb0)};
    case T::q5_0: return {q5(blk, xb0, false)};
    case T::q5_1: return {q5(blk, xb0, true)};
    case T::q8_0: return {q8_0(blk, xb0)};
    case T::iq4_nl: return {lookup_nibbles(blk + fields::IQ4_NL::qs, f16_at(blk), xb0)};
    case T::iq4_xs: return iq4_xs(blk, xb0);
    case T::mxfp4:
      return {lookup_nibbles(blk + fields::MXFP4::qs, e8m0_half_value(bytes(blk, 1)), xb0)};
    case T::q4_K:
    case T::q5_K: return stepped() ? k_step(blk, step, xb0) : k_block(blk, xb0);
    case T::iq2_xxs:
    case T::iq2_xs:
    case T::iq3_xxs:
    case T::iq3_s:
    case T::iq2_s: {
      if (stepped()) return {lattice_sub(blk, step, xb0 + step)};
      std::vector<SubBlock> out;
      for (int s = 0; s < 8; ++s) out.push_back(lattice_sub(blk, full({}, s, DType::i32), xb0 + s));
      return out;
    }
    default: {  // 128-weight halves: Q2_K, Q3_K, Q6_K
      if (stepped()) return half(blk, step, xb0);
      auto out = half(blk, full({}, 0, DType::i32), xb0);
      auto second = half(blk, full({}, 1, DType::i32), xb0);
      out.insert(out.end(), second.begin(), second.end());
      return out;
    }
  }
}

Value BlockDecoder::bytes(const Value& off, int64_t n) {
  return ld_(w_ + (off + arange(n).to(DType::i64)));  // [BM, n] u8
}
// The f16 at byte offset off of each row ([BM,1]), as f32: two bytes viewed
// as one u16, then as f16.
Value BlockDecoder::f16_at(const Value& off) { return f16_value(bytes(off, 2)); }
// The 32 code bytes at `off` as pieces of piece_bytes(), each with the
// index of its first weight, after `f` (a nibble pick or a sign flip).
std::vector<SubBlock::Piece> BlockDecoder::pieces(const Value& off,
                                                  const std::function<Value(Value)>& f) {
  std::vector<SubBlock::Piece> out;
  for (int64_t first = 0; first < 32; first += piece_bytes())
    out.push_back({f(bytes(off + static_cast<int>(first), piece_bytes())), first});
  return out;
}

SubBlock BlockDecoder::q4_0(const Value& blk, const Value& xb) {
  auto d = f16_at(blk);
  auto qs = bytes(blk + fields::Q4_0::qs, 16);
  return {{{qs & 15, 0}, {qs >> 4, 16}},
          d,
          {{d * static_cast<double>(code_offset(T::q4_0)), 0, 32}},
          xb};
}

// w = q d + m: the min enters as a negative offset.
SubBlock BlockDecoder::q4_1(const Value& blk, const Value& xb) {
  auto d = f16_at(blk), m = f16_at(blk + fields::Q4_1::m);
  auto qs = bytes(blk + fields::Q4_1::qs, 16);
  return {{{qs & 15, 0}, {qs >> 4, 16}}, d, {{-m, 0, 32, true}}, xb};
}

// Q5_0 (w = (q - 16) d) and Q5_1 (w = q d + m): nibbles as Q4_0's, and
// the 5th bits, bit j of a little-endian u32 for weight j, as 16 where set.
SubBlock BlockDecoder::q5(const Value& blk, const Value& xb, bool with_min) {
  auto d = f16_at(blk);
  const int64_t qh_at = with_min ? fields::Q5_1::qh : fields::Q5_0::qh;
  const int64_t qs_at = with_min ? fields::Q5_1::qs : fields::Q5_0::qs;
  auto qh = bytes(blk + qh_at, 4);  // [BM,4]
  auto qs = bytes(blk + qs_at, 16);
  auto lane_bit = (full({16}, 1, DType::i32) << (arange(16) % 8)).to(DType::u8);  // [16]
  auto fifth = [&](int64_t first) {  // [BM,16]: 16 where weight first + j has its bit set
    auto two = reshape(slice(qh, {0, first / 8}, {BM, 2}), {BM, 2, 1});
    auto spread = reshape(broadcast_to(two, {BM, 2, 8}), {BM, 16});
    auto set = (spread & broadcast_to(lane_bit, {BM, 16})) != full({BM, 16}, 0, DType::u8);
    return where(set, full({BM, 16}, 16, DType::u8), full({BM, 16}, 0, DType::u8));
  };
  SubBlock sb{{{(qs & 15) | fifth(0), 0}, {(qs >> 4) | fifth(16), 16}}, d, {}, xb};
  if (with_min)
    sb.offsets = {{-f16_at(blk + fields::Q5_1::m), 0, 32, true}};
  else
    sb.offsets = {{d * 16.0, 0, 32}};
  return sb;
}

// 16 bytes of nibble codes at `qs` looked up in the unsigned codebook
// (weights 0-15 low nibbles, 16-31 high), scale d, offset 128 d.
SubBlock BlockDecoder::lookup_nibbles(const Value& qs_at, const Value& d, const Value& xb) {
  auto qs = bytes(qs_at, 16);
  auto table = ggml::unsigned_codebook(FMT);
  return {{{lookup(table, DType::u8, qs & 15), 0}, {lookup(table, DType::u8, qs >> 4), 16}},
          d,
          {{d * 128.0, 0, 32}},
          xb};
}

// The 8 sub-blocks of an IQ4_XS super-block: sub-block s's 6-bit scale
// is nibble s % 2 of scales_l[s / 2] with bits 2s..2s+1 of the u16
// scales_h above it.
std::vector<SubBlock> BlockDecoder::iq4_xs(const Value& blk, const Value& xb0) {
  auto d = f16_at(blk);
  using F = fields::IQ4_XS;
  auto high = bytes(blk + F::scales_h, 2).bitcast(DType::u16).to(DType::i32);  // [BM,1]
  auto low = bytes(blk + F::scales_l, 4).to(DType::i32);                       // [BM,4]
  std::vector<SubBlock> out;
  for (int64_t s = 0; s < 8; ++s) {
    auto ls = ((slice(low, {0, s / 2}, {BM, 1}) >> static_cast<int>(4 * (s % 2))) & 15) |
              (((high >> static_cast<int>(2 * s)) & 3) << 4);
    out.push_back(lookup_nibbles(blk + (F::qs + 16 * s), d * (ls - 32).to(DType::f32),
                                 xb0 + static_cast<int>(s)));
  }
  return out;
}

// Sub-block s of a lattice block (layouts in ggml_blocks.h).
SubBlock BlockDecoder::lattice_sub(const Value& blk, const Value& s, const Value& xb) {
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
    case T::iq2_xxs: {
      auto q = bytes(blk + fields::IQ2_XXS::qs + s64 * 8, 8);
      points = slice(q, {0, 0}, {BM, 4});
      signs = sign7_word(slice(q, {0, 4}, {BM, 4}), 0.25, &scale);
      break;
    }
    case T::iq2_xs: {
      auto q = bytes(blk + fields::IQ2_XS::qs + s64 * 8, 8).bitcast(DType::u16);  // [BM,4]
      points = q & 511;
      signs = q >> 9;
      scale = nibble_scales(bytes(blk + fields::IQ2_XS::scales + s64, 1));
      break;
    }
    case T::iq2_s: {
      using F = fields::IQ2_S;
      auto high = (broadcast_to(bytes(blk + F::qh + s64, 1), {BM, 4}).to(DType::i32) >>
                   broadcast_to(arange(4) * 2, {BM, 4})) &
                  3;
      points = bytes(blk + F::qs + s64 * 4, 4).to(DType::i32) | (high << 8);
      signs = bytes(blk + F::signs + s64 * 4, 4);
      sign7 = false;
      scale = nibble_scales(bytes(blk + F::scales + s64, 1));
      break;
    }
    case T::iq3_xxs: {
      points = bytes(blk + fields::IQ3_XXS::qs + s64 * 8, 8);
      signs = sign7_word(bytes(blk + fields::IQ3_XXS::aux + s64 * 4, 4), 0.5, &scale);
      break;
    }
    default: {  // IQ3_S
      using F = fields::IQ3_S;
      auto high = (broadcast_to(bytes(blk + F::qh + s64, 1), {BM, 8}).to(DType::i32) >>
                   broadcast_to(arange(8), {BM, 8})) &
                  1;
      points = bytes(blk + F::qs + s64 * 8, 8).to(DType::i32) | (high << 8);
      signs = bytes(blk + F::signs + s64 * 4, 4);
      sign7 = false;
      auto ls = shr(bytes(blk + F::scales + s64 / 2, 1), (s % 2) * 4) & 15;
      scale = d * (ls.to(DType::i32) * 2 + 1).to(DType::f32);
    }
  }
  const bool iq3 = FMT == T::iq3_xxs || FMT == T::iq3_s;
  const auto& grid = ggml::lattice_grid(FMT);
  auto mag = lookup(grid, iq3 ? DType::i32 : DType::i64, points.to(DType::i32)).bitcast(DType::u8);
  auto neg = lookup(sign_masks(sign7), DType::i64, signs.to(DType::i32)).bitcast(DType::u8);
  auto mid = full({BM, 32}, 128, DType::u8);
  auto codes = where(neg != full({BM, 32}, 0, DType::u8), mid - mag, mid + mag);
  SubBlock sb{{{codes, 0}}, scale, {}, xb};
  sb.lane_offset = 128;
  return sb;
}

SubBlock BlockDecoder::q8_0(const Value& blk, const Value& xb) {
  auto d = f16_at(blk);
  return {pieces(blk + fields::Q8_0::qs, [](Value q) { return q ^ 128; }),
          d,
          {{d * static_cast<double>(code_offset(T::q8_0)), 0, 32}},
          xb};
}

// Sub-block j of a Q4_K or Q5_K block, as pieces: the low (even j) or
// high nibbles of the 32 bytes of qs at 32 (j / 2) (`chunk_off`), and for
// Q5_K bit j of qh's byte l as the 5th bit of weight l. `half` is j % 2,
// or -1 to take it from j at run time.
std::vector<SubBlock::Piece> BlockDecoder::k_codes(const Value& blk, const Value& chunk_off,
                                                   int64_t half, const Value& j) {
  const bool q5 = FMT == T::q5_K;
  const int64_t qs_at = q5 ? fields::Q5_K::qs : fields::Q4_K::qs;
  std::vector<SubBlock::Piece> out;
  for (int64_t first = 0; first < 32; first += piece_bytes()) {
    auto q = bytes(blk + qs_at + chunk_off + first, piece_bytes());
    auto code = half < 0 ? shr(q, (j % 2) * 4) & 15 : half == 0 ? (q & 15) : (q >> 4);
    if (q5) code = code | ((shr(bytes(blk + fields::Q5_K::qh + first, piece_bytes()), j) & 1) << 4);
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
std::vector<SubBlock> BlockDecoder::k_block(const Value& blk, const Value& xb0) {
  auto d = f16_at(blk), dmin = f16_at(blk + fields::Q4_K::dmin);  // [BM,1]
  auto sc = bytes(blk + fields::Q4_K::scales, 12);                // [BM,12]
  auto four = [&](int64_t first) { return slice(sc, {0, first}, {BM, 4}); };
  // [BM,4] -> [BM,8] with both halves equal; where() then picks a half.
  auto twice = [&](const Value& v) {
    return reshape(broadcast_to(reshape(v, {BM, 1, 4}), {BM, 2, 4}), {BM, 8});
  };
  auto first_half = broadcast_to(arange(8) < 4, {BM, 8});
  auto s6 = where(first_half, twice(four(0) & 63), twice((four(8) & 15) | ((four(0) >> 6) << 4)));
  auto m6 = where(first_half, twice(four(4) & 63), twice((four(8) >> 4) | ((four(4) >> 6) << 4)));
  auto xb = one_->xbase + xb0 + arange(8);
  auto dx = load(one_->x.d + xb);                       // [8]
  auto sx = load(one_->x.s + xb).to(DType::f32) * dx;   // [8]
  auto scales = d * s6.to(DType::f32) * dx;             // [BM,8]
  one_->dots->subtract(dmin * m6.to(DType::f32) * sx);  // [BM,8]
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
std::vector<SubBlock> BlockDecoder::k_step(const Value& blk, const Value& c, const Value& xb0) {
  auto d = f16_at(blk), dmin = f16_at(blk + fields::Q4_K::dmin);  // [BM,1]
  std::vector<SubBlock> out;
  for (int64_t half = 0; half < 2; ++half) {
    auto j = c * 2 + static_cast<int>(half);
    out.push_back(k_sub(
        blk, d, dmin, j, [&] { return k_codes(blk, (c * 32).to(DType::i64), half, j); }, xb0));
  }
  return out;
}

// Sub-block j with its 6-bit scale and min (k_block's layout), its scale
// bytes loaded one by one; `codes` decodes its pieces.
SubBlock BlockDecoder::k_sub(const Value& blk, const Value& d, const Value& dmin, const Value& j,
                             const std::function<std::vector<SubBlock::Piece>()>& codes,
                             const Value& xb0) {
  auto byte = [&](const Value& i) {
    return bytes(blk + fields::Q4_K::scales + i.to(DType::i64), 1);
  };
  auto a = byte(j % 4), b = byte(j + 4), hi = byte(j);
  auto low = j < 4;
  auto s6 = where(low, a & 63, (b & 15) | ((a >> 6) << 4));
  auto m6 = where(low, b & 63, (b >> 4) | ((hi >> 6) << 4));
  return {codes(), d * s6.to(DType::f32), {{dmin * m6.to(DType::f32), 0, 32}}, xb0 + j};
}

// Sub-block s of an IQ4_XS block (iq4_xs's scales, s at run time).
SubBlock BlockDecoder::iq4_xs_sub(const Value& blk, const Value& s, const Value& xb0) {
  using F = fields::IQ4_XS;
  auto high = bytes(blk + F::scales_h, 2).bitcast(DType::u16).to(DType::i32);  // [BM,1]
  auto low = bytes(blk + F::scales_l + (s / 2).to(DType::i64), 1).to(DType::i32);
  auto ls = (shr(low, (s % 2) * 4) & 15) | ((shr(high, s * 2) & 3) << 4);
  return lookup_nibbles(blk + F::qs + s.to(DType::i64) * 16, f16_at(blk) * (ls - 32).to(DType::f32),
                        xb0 + s);
}

// [BM,2] values of a sub-block's two 16-weight groups -> its [BM,8] lane
// values (lanes 0-3 and 4-7).
Value BlockDecoder::lanes(const Value& pair) {
  return reshape(broadcast_to(reshape(pair, {BM, 2, 1}), {BM, 2, 4}), {BM, 8});
}

// Sub-block j (at run time) of a Q6_K block: q6_k's sub-block j % 4 of
// half j / 4, with the scale bytes of groups 2j and 2j + 1.
SubBlock BlockDecoder::q6_k_sub(const Value& blk, const Value& j, const Value& xb0) {
  using F = fields::Q6_K;
  auto d = f16_at(blk + F::d);
  auto h64 = (j / 4).to(DType::i64), s = j % 4;
  auto sc = bytes(blk + F::scales + j.to(DType::i64) * 2, 2).bitcast(DType::i8).to(DType::f32) * d;
  static_assert(F::ql == 0);
  auto ql = bytes(blk + h64 * 64 + (s % 2).to(DType::i64) * 32, 32);
  auto qh = bytes(blk + F::qh + h64 * 32, 32);
  auto q = (shr(ql, (s / 2) * 4) & 15) | ((shr(qh, s * 2) & 3) << 4);
  SubBlock sb{{{q, 0}}, lanes(sc), {}, xb0 + j};
  sb.lane_offset = 32;
  return sb;
}

// Sub-block j of a Q3_K block: q3_k's quarter j % 4 of half j / 4; groups
// 2j and 2j + 1 are bytes i = 2j % 8 and i + 1 of q3_k's scale tiles.
SubBlock BlockDecoder::q3_k_sub(const Value& blk, const Value& j, const Value& xb0) {
  using F = fields::Q3_K;
  static_assert(F::hmask == 0);
  auto d = f16_at(blk + F::d);
  auto h = j / 4, s = j % 4;
  auto low4 = shr(bytes(blk + F::scales + (s * 2).to(DType::i64), 2), h * 4) & 15;
  auto high2 =
      shr(bytes(blk + (F::scales + 8) + ((s * 2) % 4).to(DType::i64), 2), (s / 2) * 2 + h * 4) & 3;
  auto sc = ((low4 | (high2 << 4)).to(DType::i32) - 32).to(DType::f32) * d;  // [BM,2]
  auto qs = bytes(blk + F::qs + h.to(DType::i64) * 32, 32), hm = bytes(blk, 32);
  auto q = (shr(qs, s * 2) & 3) | ((shr(hm, j) & 1) << 2);
  SubBlock sb{{{q, 0}}, lanes(sc), {}, xb0 + j};
  sb.lane_offset = 4;
  return sb;
}

// Sub-block j of a Q2_K block: q2_k's quarter j % 4 of half j / 4, its
// groups' scales and mins in bytes 2j and 2j + 1.
SubBlock BlockDecoder::q2_k_sub(const Value& blk, const Value& j, const Value& xb0) {
  using F = fields::Q2_K;
  auto d = f16_at(blk + F::d), dmin = f16_at(blk + F::dmin);
  static_assert(F::scales == 0);
  auto sc = bytes(blk + j.to(DType::i64) * 2, 2);
  auto qs = bytes(blk + F::qs + (j / 4).to(DType::i64) * 32, 32);
  SubBlock sb{{{shr(qs, (j % 4) * 2) & 3, 0}}, lanes((sc & 15).to(DType::f32) * d), {}, xb0 + j};
  sb.lane_min = lanes((sc >> 4).to(DType::f32) * dmin);
  return sb;
}

// [BM,8] per-group values -> the [BM,8] lane values of sub-block s
// (groups 2s and 2s+1 over lanes 0-3 and 4-7).
Value BlockDecoder::lane_pair(const Value& groups, int64_t s) {
  return lanes(slice(groups, {0, 2 * s}, {BM, 2}));
}

std::vector<SubBlock> BlockDecoder::half(const Value& blk, const Value& h, const Value& xb0) {
  switch (FMT) {
    case T::q2_K: return q2_k(blk, h, xb0);
    case T::q3_K: return q3_k(blk, h, xb0);
    default: return q6_k(blk, h, xb0);
  }
}

// Half h of a Q6_K super-block: sub-blocks 4h .. 4h+3, low bits from
// ql[64h .. 64h+63], high bits from qh[32h .. 32h+31], scales 8h .. 8h+7.
std::vector<SubBlock> BlockDecoder::q6_k(const Value& blk, const Value& h, const Value& xb0) {
  using F = fields::Q6_K;
  auto d = f16_at(blk + F::d);  // [BM,1]
  auto h64 = h.to(DType::i64);
  auto scd = bytes(blk + F::scales + h64 * 8, 8).bitcast(DType::i8).to(DType::f32) * d;  // [BM,8]
  static_assert(F::ql == 0);
  auto ql_lo = bytes(blk + h64 * 64, 32), ql_hi = bytes(blk + h64 * 64 + 32, 32);
  auto qh = bytes(blk + F::qh + h64 * 32, 32);
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
std::vector<SubBlock> BlockDecoder::q3_k(const Value& blk, const Value& h, const Value& xb0) {
  using F = fields::Q3_K;
  static_assert(F::hmask == 0);
  auto d = f16_at(blk + F::d);
  auto h64 = h.to(DType::i64);
  auto lo = bytes(blk + F::scales, 8);
  auto low4 = where(broadcast_to(h == 0, {BM, 8}), lo & 15, lo >> 4);
  auto hi = bytes(blk + (F::scales + 8), 4);
  auto hi8 = reshape(broadcast_to(reshape(hi, {BM, 1, 4}), {BM, 2, 4}), {BM, 8});
  auto hi_shift = (arange(8) / 4) * 2 + h * 4;  // [8]
  auto s6 = low4 | ((shr(hi8, broadcast_to(hi_shift, {BM, 8})) & 3) << 4);
  auto scd = (s6.to(DType::i32) - 32).to(DType::f32) * d;  // [BM,8]
  auto qs = bytes(blk + F::qs + h64 * 32, 32), hm = bytes(blk, 32);
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
std::vector<SubBlock> BlockDecoder::q2_k(const Value& blk, const Value& h, const Value& xb0) {
  using F = fields::Q2_K;
  auto d = f16_at(blk + F::d), dmin = f16_at(blk + F::dmin);
  auto h64 = h.to(DType::i64);
  static_assert(F::scales == 0);
  auto sc = bytes(blk + h64 * 8, 8);
  auto scd = (sc & 15).to(DType::f32) * d, mins = (sc >> 4).to(DType::f32) * dmin;  // [BM,8]
  auto qs = bytes(blk + F::qs + h64 * 32, 32);
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

}  // namespace kiln
