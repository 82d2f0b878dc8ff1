// MoE routing, per token: the router's top k experts and their weights.
// The lower expert id wins a tie, as a stable sort would. GATING:
//   0  softmax over all experts (precise exp): each chosen probability over
//      the sum of the chosen ones (`norm` = 1: Qwen3-MoE, Mixtral, and
//      GPT-OSS's softmax over the chosen logits, which is the same
//      quotient) or of all (`norm` = 0).
//   1  sigmoid (DeepSeek-V3, Nemotron): experts are chosen by sigmoid +
//      `bias` (a per-expert selection bias, not part of the weight) among
//      the `topk_group` of `n_group` equal groups with the largest sums of
//      their two best biased scores; the weights are the chosen sigmoids,
//      over their sum with `norm`, times `scale`.
// With REMAP, the router's experts are a pruned model's originals
// (models/expert_pruning.h): each chosen id becomes expert_map[id], and one
// the model no longer holds (-1) keeps id -1 and weight 0, which moe_sort
// then drops; with `renorm` the surviving weights are divided by their sum
// instead of the usual denominator.
// One program per token; BLOCK >= n_expert.
#include <limits>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_moe_topk(const Spec& s) {
  KernelBuilder k("moe_topk", s);
  const int64_t B = s.constexpr_("BLOCK"), gating = s.constexpr_("GATING");
  if (gating != 0 && gating != 1)
    throw Error("kernel 'moe_topk': GATING = " + std::to_string(gating) +
                " (0 softmax, 1 sigmoid with bias and groups)");
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
  auto none = full({B}, neg_inf, DType::f32);
  auto x = load(logits + (t * n_expert.to(DType::i64) + e.to(DType::i64)), valid, neg_inf);
  Value p, by, denom_all;  // the weights' values, what chooses, the sum of all p
  Value scale = full({}, 1.0, DType::f32);
  if (gating == 0) {
    p = where(valid, exp(x - max(x)), zeros(DType::f32, {B}));
    by = x;
    denom_all = sum(p);
  } else {
    auto bias = k.buffer("bias", DType::f32);
    auto n_group = k.scalar("n_group", DType::i32), topk_group = k.scalar("topk_group", DType::i32);
    scale = k.scalar("scale", DType::f32);
    p = where(valid, sigmoid(x), zeros(DType::f32, {B}));
    auto biased = where(valid, p + load(bias + e, valid, 0.0), none);
    // Each group's score (its two best biased scores), in lane g of `score`.
    auto group = e / (n_expert / n_group);
    auto score = k.var(none);
    k.for_(0, n_group, 1, [&](Value g) {
      auto in = where(group == g, biased, none);
      auto first = argmax(in, 0);
      auto second = max(where(e == first, none, in));
      score = where(e == g, broadcast_to(max(in) + second, {B}), Value(score));
    });
    auto kept = k.var(zeros(DType::f32, {B}));
    k.for_(0, topk_group, 1, [&](Value) {
      auto g = argmax(Value(score), 0);
      kept = where(group == g, full({B}, 1.0, DType::f32), Value(kept));
      score = where(e == g, none, Value(score));
    });
    by = where(Value(kept) > 0.0, biased, none);
    denom_all = full({}, 1.0, DType::f32);  // without norm the weights are the sigmoids
  }
  auto left = k.var(by);
  auto chosen = k.var(full({}, 0.0, DType::f32));
  auto out = t * top_k.to(DType::i64);
  k.for_(0, top_k, 1, [&](Value j) {
    auto best = argmax(Value(left), 0);
    auto hit = e == best;
    auto pb = sum(where(hit, p, zeros(DType::f32, {B})));
    store(ids + (out + j.to(DType::i64)), best);
    store(weights + (out + j.to(DType::i64)), pb);
    chosen = chosen + pb;
    left = where(hit, none, Value(left));
  });
  auto denom = where(norm != 0, Value(chosen), denom_all);
  if (!s.constexpr_("REMAP")) {
    k.for_(0, top_k, 1, [&](Value j) {
      auto at = out + j.to(DType::i64);
      store(weights + at, load(weights + at) / denom * scale);
    });
    return k.finish();
  }
  auto map = k.buffer("expert_map", DType::i32);
  auto renorm = k.scalar("renorm", DType::i32);
  auto kept = k.var(full({}, 0.0, DType::f32));
  k.for_(0, top_k, 1, [&](Value j) {
    auto at = out + j.to(DType::i64);
    auto to = load(map + load(ids + at));
    store(ids + at, to);
    kept = Value(kept) + where(to >= 0, load(weights + at), full({}, 0.0, DType::f32));
  });
  auto d = where(renorm != 0, Value(kept), denom);
  k.for_(0, top_k, 1, [&](Value j) {
    auto at = out + j.to(DType::i64);
    auto w = load(weights + at) / d * scale;
    store(weights + at, where(load(ids + at) >= 0, w, full({}, 0.0, DType::f32)));
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "moe_topk",
    .family = "moe",
    .summary = "router top-k experts and their weights per token (softmax, or sigmoid + bias "
               "with groups)",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCK", 128}, {"GATING", 0}, {"REMAP", 0}},
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
          LaunchShape l{{tokens, 1, 1},
                        {{"logits", tokens * n}, {"ids", tokens * k}, {"weights", tokens * k}}};
          if (s.constexpr_("GATING") == 1) {
            const int64_t groups = a.i("n_group"), kept = a.i("topk_group");
            if (groups < 1 || n % groups || (groups > 1 && n / groups < 2) || kept < 1 ||
                kept > groups || kept * (n / groups) < k)
              throw Error("moe_topk: " + std::to_string(n) + " experts in " +
                          std::to_string(groups) + " groups, " + std::to_string(kept) +
                          " kept, top-" + std::to_string(k) +
                          " (need equal groups of at least 2, 1 <= kept <= groups, and k "
                          "experts in the kept groups)");
            l.buffer_elems["bias"] = n;
          }
          if (s.constexpr_("REMAP")) l.buffer_elems["expert_map"] = n;
          return l;
        },
}));

}  // namespace
}  // namespace kiln
