#include "kernels/qgemv/int4w_groups.h"

#include "ir/error.h"

namespace kiln {

Int4wOperands declare_int4w(KernelBuilder& k, const Spec& s, const std::string& kernel) {
  const int64_t G = s.constexpr_("GROUP");
  if (G != 32 && G != 64 && G != 128 && G != 0)
    throw Error("kernel '" + kernel +
                "': GROUP must be 32, 64, 128 or 0 (one group per row), got " + std::to_string(G));
  auto q = k.buffer("q", DType::u8), scales = k.buffer("scales", DType::f16);
  auto zeros = k.buffer("zeros", DType::u8);
  auto xq = k.buffer("xq", DType::i8), xd = k.buffer("xd", DType::f32);
  auto xs = k.buffer("xs", DType::i32), y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  Value group = G == 0 ? K : k.constant(static_cast<double>(G), DType::i32);
  return {q, scales, zeros, {xq, xd, xs}, y, M, K, T, s.constexpr_("ZP") != 0, group, K / group};
}

Int4wMatrix int4w_matrix(const Int4wOperands& o, const ExpertTiles& tiles) {
  auto per_expert = (o.M.to(DType::i64) * o.ngroups.to(DType::i64));
  return {tiles.weights(o.q), tiles.of_expert(o.scales, per_expert),
          tiles.of_expert(o.zeros, per_expert)};
}

Int4wRows int4w_rows(const Int4wOperands& o, const Value& rows) {
  return {expand_dims(rows.to(DType::i64) * (o.K / 2).to(DType::i64), 1),
          expand_dims(rows.to(DType::i64) * o.ngroups.to(DType::i64), 1)};
}

void int4w_sub_blocks(KernelBuilder& k, const Int4wOperands& o, const Int4wMatrix& w,
                      const Int4wRows& r, int64_t bm,
                      const std::function<Value(const Pointer&)>& ld,
                      const std::function<void(const SubBlock&)>& add) {
  k.for_(0, o.ngroups, 1, [&](Value g) {
    auto g64 = g.to(DType::i64);
    auto s_ = ld(w.scales + (r.group_at + g64)).to(DType::f32);  // [BM,1]
    auto z =
        o.zp ? ld(w.zeros + (r.group_at + g64)).to(DType::f32) : full({bm, 1}, 8.0, DType::f32);
    auto sz = s_ * z;
    auto c_begin = g * o.group;
    k.for_(c_begin, c_begin + o.group, 32, [&](Value c0) {
      auto bytes = ld(w.q + (r.q_at + (c0 / 2).to(DType::i64) + arange(16).to(DType::i64)));
      add({{{bytes & 15, 0, 2}, {bytes >> 4, 1, 2}}, s_, {{sz, 0, 32}}, c0 / 32});
    });
  });
}

LaunchShape int4w_launch(const std::string& kernel, const Spec& s, const ScalarArgs& a) {
  int64_t m = a.i("m"), kk = a.i("k"), t = a.i("t"), g = s.constexpr_("GROUP");
  int64_t group = g == 0 ? kk : g;
  if (kk % 32 || kk % group)
    throw Error("kernel '" + kernel + "': k = " + std::to_string(kk) +
                " must be a multiple of 32 and of the group size " + std::to_string(group));
  int64_t ng = kk / group;
  LaunchShape shape = token_launch(kernel, s, m, kk, t);
  shape.buffer_elems["q"] = m * kk / 2;
  shape = expert_tiles_launch(kernel, s, a, shape, s.constexpr_("BLOCK_T"), "q",
                              {{"xq", kk}, {"xd", kk / 32}, {"xs", kk / 32}});
  const int64_t mats = grouping(s) == Grouping::plain ? 1 : a.i("n_expert");
  shape.buffer_elems["scales"] = mats * m * ng;
  shape.buffer_elems["zeros"] = s.constexpr_("ZP") ? mats * m * ng : 0;
  return shape;
}

}  // namespace kiln
