#include "add_rmsnorm.h"

using namespace kiln;

namespace {

Kernel build(const Spec& s) {
  KernelBuilder k("add_rmsnorm", s);
  const DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", T), res = k.buffer("res", T), w = k.buffer("w", T), y = k.buffer("y", T);
  auto n = k.scalar("n", DType::i32);
  auto eps = k.scalar("eps", DType::f32);
  auto row = k.program_id(0).to(DType::i64) * n.to(DType::i64);
  // Pass 1: h = x + res, stored to res (rounded to T, as the next pass reads
  // it back), and the sum of squares of the stored values.
  auto acc = k.var(zeros(DType::f32, {B}));
  k.for_(0, n, static_cast<int>(B), [&](Value i) {
    auto c = i + arange(B);
    auto m = c < n;
    auto at = row + c.to(DType::i64);
    auto h = (load(x + at, m, 0.0).to(DType::f32) + load(res + at, m, 0.0).to(DType::f32)).to(T);
    store(res + at, h, m);
    auto hf = h.to(DType::f32);
    acc = acc + hf * hf;
  });
  auto r = rsqrt(sum(acc) / n.to(DType::f32) + eps);
  // Pass 2: y = h * r * w.
  k.for_(0, n, static_cast<int>(B), [&](Value i) {
    auto c = i + arange(B);
    auto m = c < n;
    auto at = row + c.to(DType::i64);
    auto h = load(res + at, m, 0.0).to(DType::f32);
    store(y + at, (h * r * load(w + c, m, 0.0).to(DType::f32)).to(T), m);
  });
  return k.finish();
}

}  // namespace

const KernelDef& add_rmsnorm_def() {
  static const KernelDef def{
      .name = "add_rmsnorm",
      .family = "example",
      .summary = "res += x; y = rmsnorm(res) * w, per row",
      .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
      .constexpr_defaults = {{"BLOCK", 256}},
      .build = build,
      .launch_shape =
          [](const Spec&, const ScalarArgs& a) {
            const int64_t rows = a.i("rows"), n = a.i("n");
            if (n < 1) throw Error("add_rmsnorm: n must be at least 1, got " + std::to_string(n));
            return LaunchShape{{rows, 1, 1},
                               {{"x", rows * n}, {"res", rows * n}, {"w", n}, {"y", rows * n}}};
          },
      .tunables = {{"BLOCK", {32, 64, 128, 256, 512, 1024, 2048}}},
      .shape_keys = {"rows", "n"},
      .rtol = 1e-5,
  };
  return def;
}

KILN_PLUGIN(registrar) { registrar.add(add_rmsnorm_def()); }
