// RMSNorm over the last axis: y = x / sqrt(mean(x^2) + eps) * w, one program
// per row, accumulated in f32 whatever the storage dtype.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_rmsnorm(const Spec& s) {
  KernelBuilder k("rmsnorm", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", T), w = k.buffer("w", T), y = k.buffer("y", T);
  auto n = k.scalar("n", DType::i32);
  auto eps = k.scalar("eps", DType::f32);
  auto base = k.program_id(0).to(DType::i64) * n.to(DType::i64);
  auto acc = k.var(zeros(DType::f32, {B}));
  k.for_(0, n, static_cast<int>(B), [&](Value i) {
    auto c = i + arange(B);
    auto v = load(x + base + c.to(DType::i64), c < n, 0.0).to(DType::f32);
    acc = acc + v * v;
  });
  auto r = rsqrt(sum(acc) / n.to(DType::f32) + eps);
  k.for_(0, n, static_cast<int>(B), [&](Value i) {
    auto c = i + arange(B);
    auto m = c < n;
    auto v = load(x + base + c.to(DType::i64), m, 0.0).to(DType::f32);
    auto g = load(w + c, m, 0.0).to(DType::f32);
    store(y + base + c.to(DType::i64), (v * r * g).to(T), m);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "rmsnorm",
    .family = "norm",
    .summary = "y = x * rsqrt(mean(x^2) + eps) * w, per row",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 256}},
    .build = build_rmsnorm,
    .launch_shape =
        [](const Spec&, const ScalarArgs& a) {
          int64_t rows = a.i("rows"), n = a.i("n");
          return LaunchShape{{rows, 1, 1}, {{"x", rows * n}, {"w", n}, {"y", rows * n}}};
        },
    .tunables = {{"BLOCK", {16, 32, 64, 128, 256, 512, 1024, 2048}}},
    .shape_keys = {"rows", "n"},
    .rtol = 1e-5,
}));

}  // namespace
}  // namespace kiln
