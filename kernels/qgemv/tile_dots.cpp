#include "kernels/qgemv/tile_dots.h"

#include <string>

#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"

namespace kiln {
namespace {

// The sub-block's pieces side by side as one [BM, 32] tile of codes: two
// halves, or the even and odd columns interleaved.
Value joined_codes(const SubBlock& sb, int64_t bm) {
  if (sb.pieces.size() == 1 && sb.pieces[0].stride == 1) return sb.pieces[0].codes;
  const bool halves = sb.pieces.size() == 2 && sb.pieces[0].first == 0 &&
                      sb.pieces[0].stride == 1 && sb.pieces[1].first == 16 &&
                      sb.pieces[1].stride == 1;
  const bool interleaved = sb.pieces.size() == 2 && sb.pieces[0].first == 0 &&
                           sb.pieces[0].stride == 2 && sb.pieces[1].first == 1 &&
                           sb.pieces[1].stride == 2;
  if (!halves && !interleaved)
    throw Error("TileDots: a sub-block of " + std::to_string(sb.pieces.size()) +
                " code pieces is neither two halves nor even and odd columns");
  // halves: [BM, 2, 16] with piece p at [.., p, ..]; interleaved: [BM, 16, 2].
  const Shape part = halves ? Shape{bm, 1, 16} : Shape{bm, 16, 1};
  const Shape both = halves ? Shape{bm, 2, 16} : Shape{bm, 16, 2};
  auto wide = [&](const Value& v) { return broadcast_to(reshape(v, part), both); };
  auto first =
      broadcast_to(reshape(arange(2) == 0, halves ? Shape{1, 2, 1} : Shape{1, 1, 2}), both);
  return reshape(where(first, wide(sb.pieces[0].codes), wide(sb.pieces[1].codes)), {bm, 32});
}

// Group g's value [BM, 1] of [BM, 8] lane values (lanes 0-3: group 0,
// 4-7: group 1).
Value group_value(const Value& lanes, int64_t bm, int64_t g) {
  return slice(lanes, {0, 4 * g}, {bm, 1});
}

}  // namespace

std::map<std::string, int64_t> tile_dots_defaults(const Spec& s) {
  if (s.target.warp_size == 1) return {{"BLOCK_M", 8}, {"BLOCK_T", 8}};
  return {{"BLOCK_M", 64}, {"BLOCK_T", 32}};
}

std::map<std::string, int64_t> tile_dots_shape(const Spec& s, const ScalarArgs& a) {
  if (s.target.warp_size == 1) return {};  // tile_dots_defaults' tile, whatever t
  const int64_t t = a.i("t");
  return {{"BLOCK_T", t > 16  ? 32
                      : t > 8 ? 16
                              : 8},
          {"BLOCK_M", grouping(s) == Grouping::plain ? 64 : 32}};
}

TileDots::TileDots(KernelBuilder& k, QuantizedActivations x, const Value& toks, const Value& K,
                   int64_t bm, int64_t bt)
    : x_(x), bm_(bm), bt_(bt), acc_(k.var(zeros(DType::f32, {bm, bt}))) {
  auto tok = expand_dims(toks.to(DType::i64), 0);  // [1, BT]
  x_at_ = tok * K.to(DType::i64);
  xblk_at_ = tok * (K / 32).to(DType::i64);
  // The 16-weight groups' x tile [32, 2 BT]: column g BT + i holds token
  // i's elements of group g, zeros elsewhere.
  x_at2_ = reshape(broadcast_to(x_at_, {2, bt}), {1, 2 * bt});
  group_mask_ = expand_dims(arange(32) / 16, 1) == expand_dims(arange(2 * bt) / bt, 0);
}

void TileDots::add(const SubBlock& sb) {
  if (sb.scale_has_dx) throw Error("TileDots: the sub-block's scale holds d_x");
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
      auto part = slice(d, {0, g * bt_}, {bm_, bt_}).to(DType::f32) * group_value(sb.scale, bm_, g);
      if (xsum.valid())
        part = part - group_value(sb.lane_min, bm_, g) *
                          slice(xsum, {0, g * bt_}, {1, bt_}).to(DType::f32);
      sum = g ? sum + part : part;
    }
  }
  acc_ = fma(sum, dx, Value(acc_));
  for (const SubBlock::Offset& o : sb.offsets) {
    if (o.first != 0 || o.n != 32)
      throw Error("TileDots: an offset over " + std::to_string(o.n) + " elements");
    auto sx = load(x_.s + xblk).to(DType::f32) * dx;  // d_x sum(x_q), [1, BT]
    if (o.f16_sum) sx = sx.to(DType::f16).to(DType::f32);
    acc_ = Value(acc_) - o.coef * sx;
  }
}

void TileDots::store_tile(const Buffer& y, const Value& tok0, const Value& t, const Value& M,
                          const Value& rows) const {
  auto pos = expand_dims(tok0 + arange(bt_), 0);  // [1, BT]
  auto r = expand_dims(rows, 1);                  // [BM, 1]
  auto at = pos.to(DType::i64) * M.to(DType::i64) + r.to(DType::i64);
  store(y + at, Value(acc_), broadcast_to(pos < t, {bm_, bt_}) & broadcast_to(r < M, {bm_, bt_}));
}

}  // namespace kiln
