// MoE route and sort: a counting sort of a layer's (token, slot) pairs by
// expert, into the padded row order grouped matmuls take
// (kernels/moe/expert_tiles.h). Expert e's pairs fill rows offsets[e] ..
// offsets[e] + counts[e] - 1 in token order (stable), and its run is padded
// to a multiple of TILE rows, so each tile of TILE rows belongs to one
// expert: tile_expert lists them, -1 past the last. sorted[r] is the token of
// row r (-1 for padding); pos[t * k + j] the row of token t's slot j, for
// moe_combine. A slot whose expert id is negative (an expert pruned from the
// model) is dropped: pos -1. One program walks the pairs in order, so the
// result is the same on every backend and thread count.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_moe_sort(const Spec& s) {
  KernelBuilder k("moe_sort", s);
  const int tile = static_cast<int>(s.constexpr_("TILE"));
  auto ids = k.buffer("ids", DType::i32);
  auto counts = k.buffer("counts", DType::i32), offsets = k.buffer("offsets", DType::i32);
  auto sorted = k.buffer("sorted", DType::i32), pos = k.buffer("pos", DType::i32);
  auto tile_expert = k.buffer("tile_expert", DType::i32);
  auto tokens = k.scalar("tokens", DType::i32), top_k = k.scalar("k", DType::i32);
  auto n_expert = k.scalar("n_expert", DType::i32), rows = k.scalar("rows", DType::i32);
  auto pairs = tokens * top_k;
  auto zero = full({}, 0, DType::i32), none = full({}, -1, DType::i32);
  auto expert_of = [&](const Value& i, const std::function<void(Value)>& routed,
                       const std::function<void()>& dropped) {
    auto e = load(ids + i);
    k.if_((e >= 0) & (e < n_expert), [&] { routed(e); }, dropped);
  };
  k.for_(0, n_expert, 1, [&](Value e) { store(counts + e, zero); });
  k.for_(0, pairs, 1, [&](Value i) {
    expert_of(i, [&](Value e) { store(counts + e, load(counts + e) + 1); }, {});
  });
  // Each expert's first row; its tiles; its count restarts as the cursor.
  auto end = k.var(zero);
  k.for_(0, n_expert, 1, [&](Value e) {
    auto first = Value(end);
    auto padded = (load(counts + e) + (tile - 1)) / tile * tile;
    store(offsets + e, first);
    k.for_(first / tile, (first + padded) / tile, 1, [&](Value t) { store(tile_expert + t, e); });
    end = first + padded;
    store(counts + e, zero);
  });
  k.for_(Value(end) / tile, rows / tile, 1, [&](Value t) { store(tile_expert + t, none); });
  k.for_(0, rows, 1, [&](Value r) { store(sorted + r, none); });
  k.for_(0, pairs, 1, [&](Value i) {
    expert_of(
        i,
        [&](Value e) {
          auto c = load(counts + e);
          auto r = load(offsets + e) + c;
          store(sorted + r, i / top_k);
          store(pos + i, r);
          store(counts + e, c + 1);
        },
        [&] { store(pos + i, none); });
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "moe_sort",
    .family = "moe",
    .summary = "(token, slot) pairs sorted by expert into padded tiles of TILE rows",
    .dtype_roles = {},
    .constexpr_defaults = {{"TILE", 1}},
    .build = build_moe_sort,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t tokens = a.i("tokens"), k = a.i("k"), n = a.i("n_expert"),
                        rows = a.i("rows"), tile = s.constexpr_("TILE");
          if (tile < 1 || tokens < 1 || k < 1 || n < 1)
            throw Error("kernel 'moe_sort': TILE " + std::to_string(tile) + ", tokens " +
                        std::to_string(tokens) + ", k " + std::to_string(k) + ", n_expert " +
                        std::to_string(n) + " (each must be >= 1)");
          const int64_t need = moe_rows_bound(tokens, k, n, tile);
          if (rows < need || rows % tile)
            throw Error("kernel 'moe_sort': rows = " + std::to_string(rows) +
                        " cannot hold the padded pairs (need a multiple of TILE " +
                        std::to_string(tile) + ", at least " + std::to_string(need) + ")");
          return LaunchShape{{1, 1, 1},
                             {{"ids", tokens * k},
                              {"counts", n},
                              {"offsets", n},
                              {"sorted", rows},
                              {"pos", tokens * k},
                              {"tile_expert", rows / tile}}};
        },
}));

}  // namespace
}  // namespace kiln
