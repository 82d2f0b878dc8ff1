#include "softmax_topk.h"

#include <limits>

using namespace kiln;

namespace {

Kernel build(const Spec& s) {
  KernelBuilder k("softmax_topk", s);
  const DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  const double inf = std::numeric_limits<double>::infinity();
  auto x = k.buffer("x", T), y = k.buffer("y", T);
  auto n = k.scalar("n", DType::i32);
  auto topk = k.scalar("k", DType::i32);
  auto temperature = k.scalar("temperature", DType::f32);
  auto row = k.program_id(0).to(DType::i64) * n.to(DType::i64);
  auto logits = [&](const Value& c) {
    return load(x + row + c.to(DType::i64), c < n, -inf).to(DType::f32);
  };

  // The threshold: the k-th largest logit, counting repeats.
  auto threshold = k.var(full({}, -inf, DType::f32));
  k.if_((topk > 0) & (topk < n), [&] {
    threshold = full({}, inf, DType::f32);
    auto taken = k.var(zeros(DType::i32, {}));
    k.for_(0, topk, 1, [&](Value) {
      k.if_(Value(taken) < topk, [&] {
        auto below = k.var(full({B}, -inf, DType::f32));
        k.for_(0, n, static_cast<int>(B), [&](Value i) {
          auto v = logits(i + arange(B));
          below = maximum(below, where(v < threshold, v, full({B}, -inf, DType::f32)));
        });
        auto next = max(Value(below));
        auto copies = k.var(zeros(DType::i32, {B}));
        k.for_(0, n, static_cast<int>(B), [&](Value i) {
          auto c = i + arange(B);
          copies = copies + where((logits(c) == next) & (c < n), full({B}, 1, DType::i32),
                                  zeros(DType::i32, {B}));
        });
        threshold = next;
        taken = taken + sum(Value(copies));
      });
    });
  });

  // softmax((x - max) / temperature) over the kept logits.
  auto inv_t = 1.0 / temperature;
  auto mx = k.var(full({B}, -inf, DType::f32));
  k.for_(0, n, static_cast<int>(B), [&](Value i) { mx = maximum(mx, logits(i + arange(B))); });
  auto m = max(Value(mx));
  auto weight = [&](const Value& c) {
    auto v = logits(c);
    return where((v >= threshold) & (c < n), exp((v - m) * inv_t), zeros(DType::f32, {B}));
  };
  auto total = k.var(zeros(DType::f32, {B}));
  k.for_(0, n, static_cast<int>(B), [&](Value i) { total = total + weight(i + arange(B)); });
  auto inv = 1.0 / sum(Value(total));
  k.for_(0, n, static_cast<int>(B), [&](Value i) {
    auto c = i + arange(B);
    store(y + row + c.to(DType::i64), (weight(c) * inv).to(T), c < n);
  });
  return k.finish();
}

}  // namespace

const KernelDef& softmax_topk_def() {
  static const KernelDef def{
      .name = "softmax_topk",
      .family = "example",
      .summary = "y = softmax(x / temperature) over each row's top k, 0 elsewhere",
      .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
      .constexpr_defaults = {{"BLOCK", 256}},
      .build = build,
      .launch_shape =
          [](const Spec&, const ScalarArgs& a) {
            const int64_t rows = a.i("rows"), n = a.i("n");
            if (!(a.f("temperature") > 0))
              throw Error("softmax_topk: temperature must be positive, got " +
                          std::to_string(a.f("temperature")));
            return LaunchShape{{rows, 1, 1}, {{"x", rows * n}, {"y", rows * n}}};
          },
      .tunables = {{"BLOCK", {32, 64, 128, 256, 512, 1024, 2048}}},
      .shape_keys = {"rows", "n"},
      .rtol = 1e-5,
  };
  return def;
}

KILN_PLUGIN(registrar) { registrar.add(softmax_topk_def()); }
