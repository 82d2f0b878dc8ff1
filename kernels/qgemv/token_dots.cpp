#include "kernels/qgemv/token_dots.h"

#include "ir/error.h"
#include "kernels/row_block.h"

namespace kiln {

LaunchShape token_launch(const std::string& kernel, const Spec& s, int64_t m, int64_t k,
                         int64_t t) {
  if (t < 1)
    throw Error("kernel '" + kernel + "': t = " + std::to_string(t) + " tokens (need >= 1)");
  return LaunchShape{{cdiv(t, s.constexpr_("BLOCK_T")), cdiv(m, s.constexpr_("BLOCK_M")), 1},
                     {{"xq", t * k}, {"xd", t * k / 32}, {"xs", t * k / 32}, {"y", t * m}}};
}

std::vector<Value> token_indices(const Value& tok0, int64_t block_t, const Value& t) {
  std::vector<Value> toks;
  for (int64_t i = 0; i < block_t; ++i) toks.push_back(minimum(tok0 + static_cast<int>(i), t - 1));
  return toks;
}

TokenDots::TokenDots(KernelBuilder& k, QuantizedActivations x, std::vector<Value> toks,
                     Value blocks_per_token, int64_t bm, int64_t lanes, int64_t offset_lanes)
    : k_(k), x_(x), toks_(std::move(toks)), kb_(blocks_per_token), bm_(bm), lanes_(lanes) {
  // Each token's first x block, once, in i64: x offsets are then 64-bit
  // adds with no sign extension before every load.
  for (const Value& t : toks_) tok_base_.push_back(t.to(DType::i64) * kb_.to(DType::i64));
  for (size_t i = 0; i < toks_.size(); ++i) {
    acc_.push_back(k.var(zeros(DType::f32, {bm, lanes})));
    accm_.push_back(k.var(zeros(DType::f32, {bm, 1})));
  }
  if (offset_lanes > 0) extra_.push_back(k.var(zeros(DType::f32, {bm, offset_lanes})));
}

// The n x bytes a piece multiplies, broadcast over the rows before
// widening so each product is zext(u8) * sext(i8). Strided pieces load the
// contiguous span holding them and pick their column by a shuffle.
Value TokenDots::x_bytes(const Value& xblk, const SubBlock::Piece& p, int64_t n) const {
  int64_t col = p.first % p.stride;
  auto base = xblk * 32 + static_cast<int>(p.first - col);
  Value v = load(x_.q + (base + arange(n * p.stride).to(DType::i64)));
  if (p.stride > 1) v = reshape(slice(reshape(v, {n, p.stride}), {0, col}, {n, 1}), {n});
  return broadcast_to(v, {bm_, n}).to(DType::i32);
}

void TokenDots::add(const SubBlock& sb) {
  auto lane_scale = broadcast_to(sb.scale, {bm_, lanes_});
  for (size_t i = 0; i < toks_.size(); ++i) {
    auto xblk = tok_base_[i] + sb.xblock.to(DType::i64);
    Value dot;
    for (const auto& p : sb.pieces) {
      int64_t n = p.codes.shape()[1];
      auto prod = p.codes.to(DType::i32) * x_bytes(xblk, p, n);
      auto part = sum(reshape(prod, {bm_, n / 4, 4}), 2);  // [BM, n/4]
      dot = dot.valid() ? dot + part : part;
    }
    Value lane_x;  // [n/4] sums of the lane's 4 x values
    if (sb.lane_offset || sb.lane_min.valid()) {
      const auto& p = sb.pieces.at(0);
      int64_t n = p.codes.shape()[1];
      auto xv = load(x_.q + (xblk * 32 + static_cast<int>(p.first) + arange(n).to(DType::i64)));
      // Lane sums of x as a dot with ones (one vpdpbusd); the ones are
      // derived from x so that they stay a u8 operand, not a folded constant.
      auto ones = (xv.bitcast(DType::u8) | 1) & 1;
      lane_x = sum(reshape(ones.to(DType::i32) * xv.to(DType::i32), {n / 4, 4}), 1);
    }
    if (sb.lane_offset)
      dot = dot - broadcast_to(lane_x * static_cast<int>(sb.lane_offset), {bm_, lanes_});
    if (sb.scale_has_dx) {
      if (toks_.size() != 1 || sb.lane_min.valid())
        throw Error("TokenDots: a d_x-scaled sub-block needs one token and no lane mins");
      acc_[i] = fma(dot.to(DType::f32), lane_scale, Value(acc_[i]));
      continue;
    }
    Value lanes = dot.to(DType::f32) * lane_scale;
    if (sb.lane_min.valid())
      lanes = lanes - broadcast_to(lane_x.to(DType::f32), {bm_, lanes_}) * sb.lane_min;
    auto dx = load(x_.d + xblk);
    acc_[i] = fma(lanes, dx, Value(acc_[i]));
    Value off, off_scaled;  // terms of sum(x_q), and of d_x * sum(x_q)
    for (const auto& o : sb.offsets) {
      Value sx = o.n == 32 ? load(x_.s + xblk).to(DType::f32)
                           : sum(load(x_.q + (xblk * 32 + static_cast<int>(o.first) +
                                              arange(o.n).to(DType::i64)))
                                     .to(DType::f32));
      if (o.f16_sum) {
        auto term = o.coef * (sx * dx).to(DType::f16).to(DType::f32);
        off_scaled = off_scaled.valid() ? off_scaled + term : term;
        continue;
      }
      auto term = o.coef * sx;
      off = off.valid() ? off + term : term;
    }
    if (off.valid()) accm_[i] = fma(off, dx, Value(accm_[i]));
    if (off_scaled.valid()) accm_[i] = Value(accm_[i]) + off_scaled;
  }
}

void TokenDots::subtract(const Value& terms) {
  if (extra_.empty()) throw Error("TokenDots::subtract without offset lanes");
  extra_[0] = Value(extra_[0]) + terms;
}

Value TokenDots::result(size_t i) const {
  Value r = sum(Value(acc_[i]), 1) - reshape(Value(accm_[i]), {bm_});
  return extra_.empty() ? r : r - sum(Value(extra_[0]), 1);
}

void TokenDots::store_tokens(const Buffer& y, const Value& tok0, const Value& t, const Value& m,
                             const Value& rows, bool masked) const {
  for (size_t i = 0; i < toks_.size(); ++i) {
    auto out = result(i);
    auto tok = tok0 + static_cast<int>(i);
    k_.if_(tok < t, [&] {
      store_rows(y + (tok.to(DType::i64) * m.to(DType::i64) + rows.to(DType::i64)), out, rows, m,
                 masked);
    });
  }
}

}  // namespace kiln
