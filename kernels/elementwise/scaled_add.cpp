// y = alpha * x + y (axpy), in place over n elements. alpha is a runtime
// scalar so one compiled kernel serves every scale.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_scaled_add(const Spec& s) {
  KernelBuilder k("scaled_add", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", T), y = k.buffer("y", T);
  auto n = k.scalar("n", DType::i32);
  auto alpha = k.scalar("alpha", DType::f32);
  auto offs = k.program_id(0) * static_cast<int>(B) + arange(B);
  auto m = offs < n;
  auto xv = load(x + offs, m, 0.0).to(DType::f32);
  auto yv = load(y + offs, m, 0.0).to(DType::f32);
  store(y + offs, fma(xv, alpha, yv).to(T), m);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "scaled_add",
    .family = "elementwise",
    .summary = "y = alpha * x + y (in place)",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 1024}},
    .build = build_scaled_add,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t n = a.i("n");
          return LaunchShape{{cdiv(n, s.constexpr_("BLOCK")), 1, 1}, {{"x", n}, {"y", n}}};
        },
    .tunables = {{"BLOCK", {16, 32, 64, 128, 256, 512, 1024, 2048}}},
    .shape_keys = {"n"},
    .rtol = 1e-6,
}));

}  // namespace
}  // namespace kiln
