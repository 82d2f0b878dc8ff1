// z = x + y over n elements; one program per BLOCK elements.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_add(const Spec& s) {
  KernelBuilder k("add", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", T), y = k.buffer("y", T), z = k.buffer("z", T);
  auto n = k.scalar("n", DType::i32);
  auto offs = k.program_id(0) * static_cast<int>(B) + arange(B);
  auto m = offs < n;
  store(z + offs, load(x + offs, m, 0.0) + load(y + offs, m, 0.0), m);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "add",
    .family = "elementwise",
    .summary = "z = x + y",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16, DType::i32}}},
    .constexpr_defaults = {{"BLOCK", 1024}},
    .build = build_add,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t n = a.i("n");
          return LaunchShape{{cdiv(n, s.constexpr_("BLOCK")), 1, 1},
                             {{"x", n}, {"y", n}, {"z", n}}};
        },
    .tunables = {{"BLOCK", {16, 32, 64, 128, 256, 512, 1024, 2048}}},
    .shape_keys = {"n"},
    .rtol = 1e-6,
}));

}  // namespace
}  // namespace kiln
