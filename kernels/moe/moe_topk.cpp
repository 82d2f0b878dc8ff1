// MoE routing, per token: the softmax of the router's logits over the
// experts, the top k experts (the lower index first on ties, as a stable
// sort), and their weights: each chosen probability divided by the sum of
// the chosen ones (`norm` = 1, Qwen3-MoE and Mixtral) or of all (`norm` =
// 0). One program per token; BLOCK >= n_expert.
#include <limits>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_moe_topk(const Spec& s) {
  KernelBuilder k("moe_topk", s);
  const int64_t B = s.constexpr_("BLOCK");
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto logits = k.buffer("logits", DType::f32);
  auto ids = k.buffer("ids", DType::i32);
  auto weights = k.buffer("weights", DType::f32);
  auto n_expert = k.scalar("n_expert", DType::i32);
  auto top_k = k.scalar("k", DType::i32);
  auto norm = k.scalar("norm", DType::i32);
  auto t = k.program_id(0).to(DType::i64);
  auto e = arange(B);
  auto valid = e < n_expert;
  auto x = load(logits + (t * n_expert.to(DType::i64) + e.to(DType::i64)), valid, neg_inf);
  auto p = where(valid, exp(x - max(x)), zeros(DType::f32, {B}));
  auto total = sum(p);
  auto left = k.var(x);
  auto chosen = k.var(full({}, 0.0, DType::f32));
  auto out = t * top_k.to(DType::i64);
  k.for_(0, top_k, 1, [&](Value j) {
    auto best = argmax(Value(left), 0);
    auto hit = e == best;
    auto pb = sum(where(hit, p, zeros(DType::f32, {B})));
    store(ids + (out + j.to(DType::i64)), best);
    store(weights + (out + j.to(DType::i64)), pb);
    chosen = chosen + pb;
    left = where(hit, full({B}, neg_inf, DType::f32), Value(left));
  });
  auto denom = where(norm != 0, Value(chosen), total);
  k.for_(0, top_k, 1, [&](Value j) {
    auto at = out + j.to(DType::i64);
    store(weights + at, load(weights + at) / denom);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "moe_topk",
    .family = "moe",
    .summary = "router softmax, top-k experts and their weights per token",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCK", 128}},
    .build = build_moe_topk,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t tokens = a.i("tokens"), n = a.i("n_expert"), k = a.i("k");
          if (n > s.constexpr_("BLOCK"))
            throw Error("moe_topk: " + std::to_string(n) + " experts exceed BLOCK " +
                        std::to_string(s.constexpr_("BLOCK")));
          if (k < 1 || k > n)
            throw Error("moe_topk: k = " + std::to_string(k) + " is not in 1.." +
                        std::to_string(n));
          return LaunchShape{
              {tokens, 1, 1},
              {{"logits", tokens * n}, {"ids", tokens * k}, {"weights", tokens * k}}};
        },
}));

}  // namespace
}  // namespace kiln
