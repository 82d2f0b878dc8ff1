// x[i] = value for i < n: sets a buffer on any backend, as a kernel a plan
// can replay (a device has no host memset).
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_fill(const Spec& s) {
  KernelBuilder k("fill", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", T);
  auto n = k.scalar("n", DType::i32);
  auto value = k.scalar("value", DType::f32);
  auto offs = k.program_id(0) * static_cast<int>(B) + arange(B);
  store(x + offs, broadcast_to(value, {B}).to(T), offs < n);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "fill",
    .family = "elementwise",
    .summary = "x = value",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 1024}},
    .build = build_fill,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t n = a.i("n");
          return LaunchShape{{cdiv(n, s.constexpr_("BLOCK")), 1, 1}, {{"x", n}}};
        },
}));

}  // namespace
}  // namespace kiln
