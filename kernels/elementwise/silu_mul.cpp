// SwiGLU's gate: out = silu(gate) * up = gate * sigmoid(gate) * up, computed
// in f32 whatever the storage dtype.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_silu_mul(const Spec& s) {
  KernelBuilder k("silu_mul", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  auto gate = k.buffer("gate", T), up = k.buffer("up", T), out = k.buffer("out", T);
  auto n = k.scalar("n", DType::i32);
  auto offs = k.program_id(0) * static_cast<int>(B) + arange(B);
  auto m = offs < n;
  auto g = load(gate + offs, m, 0.0).to(DType::f32);
  auto u = load(up + offs, m, 0.0).to(DType::f32);
  store(out + offs, (g * sigmoid(g) * u).to(T), m);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "silu_mul",
    .family = "elementwise",
    .summary = "out = silu(gate) * up",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 512}},
    .build = build_silu_mul,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t n = a.i("n");
          return LaunchShape{{cdiv(n, s.constexpr_("BLOCK")), 1, 1},
                             {{"gate", n}, {"up", n}, {"out", n}}};
        },
    .tunables = {{"BLOCK", {16, 32, 64, 128, 256, 512, 1024, 2048}}},
    .shape_keys = {"n"},
    .rtol = 2e-6,
}));

}  // namespace
}  // namespace kiln
