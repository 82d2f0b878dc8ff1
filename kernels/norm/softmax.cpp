// Numerically safe row softmax: y = exp(x - max(x)) / sum(exp(x - max(x))),
// one program per row, in three passes over the row (max, sum, normalise) so
// rows longer than BLOCK and rows holding -inf (causal masks) are exact.
#include <limits>

#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_softmax(const Spec& s) {
  KernelBuilder k("softmax", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto x = k.buffer("x", T), y = k.buffer("y", T);
  auto n = k.scalar("n", DType::i32);
  auto base = k.program_id(0).to(DType::i64) * n.to(DType::i64);
  auto row = [&](const Value& c) { return base + c.to(DType::i64); };

  auto mx = k.var(full({B}, neg_inf, DType::f32));
  k.for_(0, n, static_cast<int>(B), [&](Value i) {
    auto c = i + arange(B);
    mx = maximum(mx, load(x + row(c), c < n, neg_inf).to(DType::f32));
  });
  auto m = max(Value(mx));
  auto total = k.var(zeros(DType::f32, {B}));
  k.for_(0, n, static_cast<int>(B), [&](Value i) {
    auto c = i + arange(B);
    auto v = load(x + row(c), c < n, neg_inf).to(DType::f32);
    total = total + exp(v - m);
  });
  auto inv = 1.0 / sum(Value(total));
  k.for_(0, n, static_cast<int>(B), [&](Value i) {
    auto c = i + arange(B);
    auto mask = c < n;
    auto v = load(x + row(c), mask, neg_inf).to(DType::f32);
    store(y + row(c), (exp(v - m) * inv).to(T), mask);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "softmax",
    .family = "norm",
    .summary = "row softmax, max-subtracted",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 256}},
    .build = build_softmax,
    .launch_shape =
        [](const Spec&, const ScalarArgs& a) {
          int64_t rows = a.i("rows"), n = a.i("n");
          return LaunchShape{{rows, 1, 1}, {{"x", rows * n}, {"y", rows * n}}};
        },
    .tunables = {{"BLOCK", {16, 32, 64, 128, 256, 512, 1024, 2048}}},
    .shape_keys = {"rows", "n"},
    .rtol = 1e-5,
}));

}  // namespace
}  // namespace kiln
