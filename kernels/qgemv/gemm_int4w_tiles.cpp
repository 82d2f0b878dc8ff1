// Prompt GEMM over int4 weight-only matrices as tile dots: y[i] = W x[i]
// for t tokens, W in int4w's layout (int4w_groups.h), x[i] from
// quantize_q8.
//
// gemv_int4w's tile-dot twin for a GPU's tensor cores: a program decodes
// BLOCK_M rows of each 32-weight sub-block (int4w_groups.h, the decode
// gemv_int4w runs) and TileDots (tile_dots.h) multiplies the codes with
// BLOCK_T tokens' activation bytes in one `dot` (mma.sync m16n8k32 on sm_80
// and later). The cuda policy picks it for prompts.
#include "ir/builder.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/int4w_groups.h"
#include "kernels/qgemv/tile_dots.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

Kernel build_gemm_int4w_tiles(const Spec& s) {
  KernelBuilder k("gemm_int4w_tiles", s);
  const int64_t BM = s.constexpr_("BLOCK_M"), BT = s.constexpr_("BLOCK_T");
  const Int4wOperands o = declare_int4w(k, s, "gemm_int4w_tiles");
  ExpertTiles tiles(k, s, BT, o.T);
  tiles.run([&] {
    auto row0 = tiles.row_block() * static_cast<int>(BM);
    const Int4wMatrix w = int4w_matrix(o, tiles);
    split_row_block(k, s.target, row0, BM, o.M, [&](bool masked) {
      auto rows = row0 + arange(BM);
      auto rmask = expand_dims(rows < o.M, 1);
      auto ld = [&](const Pointer& p) { return masked ? load(p, rmask, 0.0) : load(p); };
      TileDots dots(k, o.x, tiles.x_row_tile(BT), o.K, BM, BT);
      int4w_sub_blocks(k, o, w, int4w_rows(o, rows), BM, ld,
                       [&](const SubBlock& sb) { dots.add(sb); });
      dots.store_tile(o.y, tiles.first(), o.T, o.M, rows);
    });
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemm_int4w_tiles",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens as tile dots (mma.sync int8 on a GPU), W int4 "
               "weight-only (as gemv_int4w's), x from quantize_q8",
    .dtype_roles = {},
    .constexpr_defaults =
        {{"GROUP", 128}, {"ZP", 0}, {"BLOCK_M", 64}, {"BLOCK_T", 32}, {"GROUPED", 0}},
    .build = build_gemm_int4w_tiles,
    .launch_shape = [](const Spec& s,
                       const ScalarArgs& a) { return int4w_launch("gemm_int4w_tiles", s, a); },
    .heuristic = tile_dots_defaults,  // tile_dots.h
    .shape_heuristic = tile_dots_shape,
    .tunables = {{"BLOCK_M", {16, 32, 64, 128}}, {"BLOCK_T", {8, 16, 32, 64}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over k/32 blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
