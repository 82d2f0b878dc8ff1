// x[r, :] += b: a bias added to every row (qwen2's q/k/v biases), in place.
// With TILE > 0, x holds a grouped matmul's rows (kernels/moe/expert_tiles.h)
// and b one bias per expert [n_expert, n]: row r takes the bias of its
// tile's expert, tile_expert[r / TILE] (none past the last tile).
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_add_rows(const Spec& s) {
  KernelBuilder k("add_rows", s);
  DType T = s.dtype("T");
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", T), b = k.buffer("b", T);
  auto n = k.scalar("n", DType::i32);
  auto c = k.program_id(1) * static_cast<int>(B) + arange(B);
  auto m = c < n;
  auto row = k.program_id(0);
  auto at = row.to(DType::i64) * n.to(DType::i64) + c.to(DType::i64);
  const int64_t tile = s.constexpr_("TILE");
  if (tile == 0) {
    store(x + at, load(x + at, m, 0.0) + load(b + c, m, 0.0), m);
    return k.finish();
  }
  auto tile_expert = k.buffer("tile_expert", DType::i32);
  auto e = load(tile_expert + row / static_cast<int>(tile));
  k.if_(e >= 0, [&] {
    auto bias = b + (e.to(DType::i64) * n.to(DType::i64) + c.to(DType::i64));
    store(x + at, load(x + at, m, 0.0) + load(bias, m, 0.0), m);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "add_rows",
    .family = "elementwise",
    .summary = "x[r] += b for every row r",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 256}, {"TILE", 0}},
    .build = build_add_rows,
    // sizes: "rows", and "n_expert" with TILE.
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t rows = a.i("rows"), n = a.i("n"), tile = s.constexpr_("TILE");
          LaunchShape l{{rows, cdiv(n, s.constexpr_("BLOCK")), 1}, {{"x", rows * n}, {"b", n}}};
          if (tile > 0) {
            if (rows % tile)
              throw Error("kernel 'add_rows': " + std::to_string(rows) +
                          " rows are not whole tiles of " + std::to_string(tile));
            l.buffer_elems["b"] = a.i("n_expert") * n;
            l.buffer_elems["tile_expert"] = rows / tile;
          }
          return l;
        },
}));

}  // namespace
}  // namespace kiln
