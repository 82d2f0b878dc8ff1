// Prompt GEMM over ggml blocks as stored, as tile dots: y[i] = W x[i] for
// t tokens, W [m, k] in ggml blocks (FMT as qgemv's), x[i] from quantize_q8.
//
// qgemv shares a decoded weight block among a few tokens with vector dots,
// which is how a CPU core is fast. A GPU's tensor cores want the product
// as tiles: a program decodes BLOCK_M rows of each 32-weight sub-block once
// (block_decoder.h, the same decode qgemv runs) and multiplies the codes
// [BLOCK_M, 32] with BLOCK_T tokens' activation bytes [32, BLOCK_T] in one
// `dot` (mma.sync m16n8k32, u8 x s8 -> s32, on sm_80 and later), then
// scales the exact integer sums in f32:
//   acc += scale * d_x * dot(q, x_q) - offset * d_x * sum(x_q).
// Formats with a scale per 16 weights (Q2_K, Q3_K, Q6_K, IQ2_XS, IQ2_S) dot
// each sub-block with an x tile of 2 BLOCK_T columns, each token twice with
// one group's elements (the other's zeroed), so a group's sum meets its own
// scale.
// Codes with a constant offset c (Q3_K, Q6_K, lattice formats) enter the
// dot as signed bytes q - c.
//
// The CPU runs the same kernel (its dots lower to vector code), but the
// cpu policy keeps qgemv there; the cuda policy picks this one for prompts.
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/block_decoder.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

// The sub-block's pieces side by side as one [BM, 32] tile of codes.
Value joined_codes(const SubBlock& sb, int64_t bm) {
  if (sb.pieces.size() == 1) return sb.pieces[0].codes;
  if (sb.pieces.size() != 2 || sb.pieces[0].first != 0 || sb.pieces[1].first != 16)
    throw Error("qgemm_tiles: a sub-block of " + std::to_string(sb.pieces.size()) +
                " code pieces is not two halves");
  auto wide = [&](const Value& v) { return broadcast_to(reshape(v, {bm, 1, 16}), {bm, 2, 16}); };
  auto first = broadcast_to(reshape(arange(2) == 0, {1, 2, 1}), {bm, 2, 16});
  return reshape(where(first, wide(sb.pieces[0].codes), wide(sb.pieces[1].codes)), {bm, 32});
}

// Group g's value [BM, 1] of [BM, 8] lane values (lanes 0-3: group 0,
// 4-7: group 1).
Value group_value(const Value& lanes, int64_t bm, int64_t g) {
  return slice(lanes, {0, 4 * g}, {bm, 1});
}

class TileDots {
 public:
  TileDots(KernelBuilder& k, QuantizedActivations x, const Value& toks, const Value& K, int64_t bm,
           int64_t bt)
      : x_(x), bm_(bm), bt_(bt), acc_(k.var(zeros(DType::f32, {bm, bt}))) {
    auto tok = expand_dims(toks.to(DType::i64), 0);  // [1, BT]
    x_at_ = tok * K.to(DType::i64);
    xblk_at_ = tok * (K / 32).to(DType::i64);
    // The 16-weight groups' x tile [32, 2 BT]: column g BT + i holds token
    // i's elements of group g, zeros elsewhere.
    x_at2_ = reshape(broadcast_to(x_at_, {2, bt}), {1, 2 * bt});
    group_mask_ = expand_dims(arange(32) / 16, 1) == expand_dims(arange(2 * bt) / bt, 0);
  }

  void add(const SubBlock& sb) {
    if (sb.scale_has_dx) throw Error("qgemm_tiles: the sub-block's scale holds d_x");
    Value codes = joined_codes(sb, bm_);
    if (sb.lane_offset)
      codes = (codes.to(DType::i32) - static_cast<int>(sb.lane_offset)).to(DType::i8);
    auto xblk = xblk_at_ + sb.xblock.to(DType::i64);  // [1, BT]
    auto elems = expand_dims(sb.xblock.to(DType::i64) * 32 + arange(32).to(DType::i64), 1);
    auto dx = load(x_.d + xblk);  // [1, BT]
    Value sum;                    // [BM, BT]: the sub-block's sum of w x_q
    if (sb.scale.shape().back() == 1 && !sb.lane_min.valid()) {
      auto xt = load(x_.q + (x_at_ + elems));  // [32, BT]
      sum = dot(codes, xt, zeros(DType::i32, {bm_, bt_})).to(DType::f32) * sb.scale;
    } else {
      auto xt = load(x_.q + (x_at2_ + elems), group_mask_, 0.0);  // [32, 2 BT]
      auto d = dot(codes, xt, zeros(DType::i32, {bm_, 2 * bt_}));
      auto xsum = sb.lane_min.valid() ? expand_dims(::kiln::sum(xt.to(DType::i32), 0), 0) : Value();
      for (int64_t g = 0; g < 2; ++g) {
        auto part =
            slice(d, {0, g * bt_}, {bm_, bt_}).to(DType::f32) * group_value(sb.scale, bm_, g);
        if (xsum.valid())
          part = part - group_value(sb.lane_min, bm_, g) *
                            slice(xsum, {0, g * bt_}, {1, bt_}).to(DType::f32);
        sum = g ? sum + part : part;
      }
    }
    acc_ = fma(sum, dx, Value(acc_));
    for (const SubBlock::Offset& o : sb.offsets) {
      if (o.first != 0 || o.n != 32)
        throw Error("qgemm_tiles: an offset over " + std::to_string(o.n) + " elements");
      auto sx = load(x_.s + xblk).to(DType::f32) * dx;  // d_x sum(x_q), [1, BT]
      if (o.f16_sum) sx = sx.to(DType::f16).to(DType::f32);
      acc_ = Value(acc_) - o.coef * sx;
    }
  }

  // Stores the tile's real tokens (positions tok0 .. < t) and rows (< m).
  void store_tile(const Buffer& y, const Value& tok0, const Value& t, const Value& M,
                  const Value& rows) const {
    auto pos = expand_dims(tok0 + arange(bt_), 0);  // [1, BT]
    auto r = expand_dims(rows, 1);                  // [BM, 1]
    auto at = pos.to(DType::i64) * M.to(DType::i64) + r.to(DType::i64);
    store(y + at, Value(acc_), broadcast_to(pos < t, {bm_, bt_}) & broadcast_to(r < M, {bm_, bt_}));
  }

 private:
  QuantizedActivations x_;
  int64_t bm_, bt_;
  Var acc_;
  Value x_at_, xblk_at_, x_at2_, group_mask_;
};

Kernel build_qgemm_tiles(const Spec& s) {
  KernelBuilder k("qgemm_tiles", s);
  const int64_t FMT = s.constexpr_("FMT"), BM = s.constexpr_("BLOCK_M"),
                BT = s.constexpr_("BLOCK_T");
  const ggml::BlockFormat& f = ggml::block_format(static_cast<int>(FMT));
  auto w = k.buffer("w", DType::u8), xq = k.buffer("xq", DType::i8);
  auto xd = k.buffer("xd", DType::f32), xs = k.buffer("xs", DType::i32);
  auto y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  auto nb = K / f.block_elems;
  ExpertTiles tiles(k, s, BT, T);
  tiles.run([&] {
    auto row0 = tiles.row_block() * static_cast<int>(BM);
    auto we = tiles.weights(w);
    split_row_block(k, s.target, row0, BM, M, [&](bool row_masked) {
      auto rows = row0 + arange(BM);
      auto rmask = expand_dims(rows < M, 1);
      auto row_base = expand_dims(rows.to(DType::i64) * (nb * f.block_bytes).to(DType::i64), 1);
      TileDots dots(k, {xq, xd, xs}, tiles.x_row_tile(BT), K, BM, BT);
      BlockDecoder dec(FMT, BM, DecodeSteps::sub_blocks, we, [&](const Pointer& p) {
        return row_masked ? load(p, rmask, 0.0) : load(p);
      });
      k.for_(0, nb, 1, [&](Value b) {
        auto blk = row_base + (b * f.block_bytes).to(DType::i64);  // [BM,1]
        auto xb0 = b * static_cast<int>(f.block_elems / 32);
        k.for_(0, static_cast<int>(dec.steps_per_block()), 1, [&](Value p) {
          for (const SubBlock& sb : dec.decode(blk, p, xb0)) dots.add(sb);
        });
      });
      dots.store_tile(y, tiles.first(), T, M, rows);
    });
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemm_tiles",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens as tile dots (mma.sync int8 on a GPU), W in ggml "
               "blocks (FMT as qgemv's), x from quantize_q8",
    .dtype_roles = {},
    // GROUPED: plain or one launch for a layer's experts (expert_tiles.h).
    .constexpr_defaults = {{"FMT", 12}, {"BLOCK_M", 64}, {"BLOCK_T", 32}, {"GROUPED", 0}},
    .build = build_qgemm_tiles,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k"), t = a.i("t");
          const ggml::BlockFormat& f = ggml::block_format(static_cast<int>(s.constexpr_("FMT")));
          if (kk % f.block_elems)
            throw Error("kernel 'qgemm_tiles': k = " + std::to_string(kk) +
                        " is not a multiple of the " + std::to_string(f.block_elems) +
                        "-weight block");
          LaunchShape shape = token_launch("qgemm_tiles", s, m, kk, t);
          shape.buffer_elems["w"] = m * (kk / f.block_elems) * f.block_bytes;
          return expert_tiles_launch("qgemm_tiles", s, a, shape, s.constexpr_("BLOCK_T"), "w",
                                     {{"xq", kk}, {"xd", kk / 32}, {"xs", kk / 32}});
        },
    // An mma tile is 16 rows by 8 tokens: the token block is the smallest
    // multiple of 8 that covers the prompt, up to 32. Grouped experts take
    // 32 rows: the gather's row indices keep more registers live (64 rows
    // of Q4_K at 16 tokens spill 4 bytes at sm_90; 32 rows take 126
    // registers).
    .shape_heuristic = [](const Spec& s, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      const int64_t t = a.i("t");
      return {{"BLOCK_T", t > 16  ? 32
                          : t > 8 ? 16
                                  : 8},
              {"BLOCK_M", grouping(s) == Grouping::plain ? 64 : 32}};
    },
    .tunables = {{"BLOCK_M", {16, 32, 64, 128}}, {"BLOCK_T", {8, 16, 32, 64}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over k/32 blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
