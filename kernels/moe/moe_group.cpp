// MoE routing, per expert: the tokens routed to each expert, in token order,
// with their weights, and how many there are. From moe_topk's ids and
// weights [tokens, k]: counts[e], and rows[e * tokens + i] / row_weights[...]
// for i < counts[e]. One program walks the routing in order (a counting
// sort), so the lists are the same whatever the backend or thread count.
// The forward reads the counts back to size each expert's launches.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_moe_group(const Spec& s) {
  KernelBuilder k("moe_group", s);
  auto ids = k.buffer("ids", DType::i32);
  auto weights = k.buffer("weights", DType::f32);
  auto counts = k.buffer("counts", DType::i32);
  auto rows = k.buffer("rows", DType::i32);
  auto row_weights = k.buffer("row_weights", DType::f32);
  auto tokens = k.scalar("tokens", DType::i32);
  auto top_k = k.scalar("k", DType::i32);
  auto n_expert = k.scalar("n_expert", DType::i32);
  k.for_(0, n_expert, 1, [&](Value e) { store(counts + e, full({}, 0, DType::i32)); });
  k.for_(0, tokens, 1, [&](Value t) {
    k.for_(0, top_k, 1, [&](Value j) {
      auto at = t.to(DType::i64) * top_k.to(DType::i64) + j.to(DType::i64);
      auto e = load(ids + at);
      auto c = load(counts + e);
      auto slot = e.to(DType::i64) * tokens.to(DType::i64) + c.to(DType::i64);
      store(rows + slot, t);
      store(row_weights + slot, load(weights + at));
      store(counts + e, c + 1);
    });
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "moe_group",
    .family = "moe",
    .summary = "each expert's routed tokens and weights, in token order",
    .dtype_roles = {},
    .constexpr_defaults = {},
    .build = build_moe_group,
    .launch_shape =
        [](const Spec&, const ScalarArgs& a) {
          int64_t tokens = a.i("tokens"), k = a.i("k"), n = a.i("n_expert");
          return LaunchShape{{1, 1, 1},
                             {{"ids", tokens * k},
                              {"weights", tokens * k},
                              {"counts", n},
                              {"rows", n * tokens},
                              {"row_weights", n * tokens}}};
        },
}));

}  // namespace
}  // namespace kiln
