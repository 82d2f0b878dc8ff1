// x[r, :] += b: a bias added to every row (qwen2's q/k/v biases), in place.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_add_rows(const Spec& s) {
  KernelBuilder k("add_rows", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", T), b = k.buffer("b", T);
  auto n = k.scalar("n", DType::i32);
  auto c = k.program_id(1) * static_cast<int>(B) + arange(B);
  auto m = c < n;
  auto at = k.program_id(0).to(DType::i64) * n.to(DType::i64) + c.to(DType::i64);
  store(x + at, load(x + at, m, 0.0) + load(b + c, m, 0.0), m);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "add_rows",
    .family = "elementwise",
    .summary = "x[r] += b for every row r",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 256}},
    .build = build_add_rows,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t rows = a.i("rows"), n = a.i("n");
          return LaunchShape{{rows, cdiv(n, s.constexpr_("BLOCK")), 1},
                             {{"x", rows * n}, {"b", n}}};
        },
}));

}  // namespace
}  // namespace kiln
