// MoE combine: out[rows[i], :] += row_weights[i] * y[i, :] for the `count`
// rows an expert computed (a scalar, so a plan patches it per replay). An expert holds each token
// at most once, so the programs of one launch write disjoint rows; experts run one launch after
// another, so every sum is taken in expert order, deterministically.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_moe_scatter(const Spec& s) {
  KernelBuilder k("moe_scatter", s);
  const int64_t B = s.constexpr_("BLOCK");
  auto y = k.buffer("y", DType::f32);
  auto rows = k.buffer("rows", DType::i32);
  auto row_weights = k.buffer("row_weights", DType::f32);
  auto out = k.buffer("out", DType::f32);
  auto n = k.scalar("n", DType::i32);
  auto count = k.scalar("count", DType::i32);
  auto i = k.program_id(0);
  auto c = (k.program_id(1) * static_cast<int>(B) + arange(B)).to(DType::i64);
  auto n64 = n.to(DType::i64);
  auto m = (c < n64) & (i < count);
  auto dst = load(rows + i).to(DType::i64) * n64 + c;
  auto v = load(y + (i.to(DType::i64) * n64 + c), m, 0.0);
  store(out + dst, load(out + dst, m, 0.0) + load(row_weights + i) * v, m);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "moe_scatter",
    .family = "moe",
    .summary = "out[rows[i]] += row_weights[i] * y[i]",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCK", 256}},
    .build = build_moe_scatter,
    // sizes: "out_rows", the height of out.
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t count = a.i("count"), n = a.i("n");
          return LaunchShape{{count, cdiv(n, s.constexpr_("BLOCK")), 1},
                             {{"y", count * n},
                              {"rows", count},
                              {"row_weights", count},
                              {"out", a.i("out_rows") * n}}};
        },
}));

}  // namespace
}  // namespace kiln
