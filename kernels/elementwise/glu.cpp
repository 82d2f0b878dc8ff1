// Gated linear units: out = act(gate) * up, computed in f32 whatever the
// storage dtype. ACT picks the activation: 0 SiLU (SwiGLU: llama, qwen),
// 1 GELU with the tanh approximation (GeGLU: gemma), as llama.cpp's
// ggml_gelu computes it, 2 GPT-OSS's clamped SwiGLU: g = min(gate, 7),
// g * sigmoid(1.702 g) * (clamp(up, -7, 7) + 1), the constants of its
// reference (llama.cpp hard-codes them too).
#include <cmath>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_glu(const Spec& s) {
  KernelBuilder k("glu", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK"), act = s.constexpr_("ACT");
  if (act < 0 || act > 2)
    throw Error("glu: ACT must be 0 (silu), 1 (gelu_tanh) or 2 (swiglu_oai), got " +
                std::to_string(act));
  auto gate = k.buffer("gate", T), up = k.buffer("up", T), out = k.buffer("out", T);
  auto n = k.scalar("n", DType::i32);
  auto offs = k.program_id(0) * static_cast<int>(B) + arange(B);
  auto m = offs < n;
  auto g = load(gate + offs, m, 0.0).to(DType::f32);
  auto u = load(up + offs, m, 0.0).to(DType::f32);
  Value a;
  if (act == 0) {
    a = g * sigmoid(g);
  } else if (act == 2) {
    const double limit = 7.0, alpha = 1.702;
    auto gc = minimum(g, full({B}, limit, DType::f32));
    a = gc * sigmoid(alpha * gc);
    u = minimum(maximum(u, full({B}, -limit, DType::f32)), full({B}, limit, DType::f32)) + 1.0;
  } else {
    const double sqrt_2_over_pi = std::sqrt(2.0 / M_PI);
    a = 0.5 * g * (1.0 + tanh(sqrt_2_over_pi * g * (1.0 + 0.044715 * g * g)));
  }
  store(out + offs, (a * u).to(T), m);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "glu",
    .family = "elementwise",
    .summary = "out = act(gate) * up (ACT 0 silu, 1 gelu_tanh, 2 swiglu_oai)",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 512}, {"ACT", 0}},
    .build = build_glu,
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
