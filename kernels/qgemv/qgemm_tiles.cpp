// Prompt GEMM over ggml blocks as stored, as tile dots: y[i] = W x[i] for
// t tokens, W [m, k] in ggml blocks (FMT as qgemv's), x[i] from quantize_q8.
//
// qgemv shares a decoded weight block among a few tokens with vector dots,
// which is how a CPU core is fast. A GPU's tensor cores want the product
// as tiles: a program decodes BLOCK_M rows of each 32-weight sub-block once
// (block_decoder.h, the same decode qgemv runs, one sub-block a step) and
// TileDots (tile_dots.h) multiplies the codes with BLOCK_T tokens'
// activation bytes in one `dot` (mma.sync m16n8k32 on sm_80 and later).
//
// The CPU runs the same kernel (its dots lower to vector code), but the
// cpu policy keeps qgemv there; the cuda policy picks this one for prompts.
#include "ir/builder.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/block_decoder.h"
#include "kernels/qgemv/tile_dots.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

Kernel build_qgemm_tiles(const Spec& s) {
  KernelBuilder k("qgemm_tiles", s);
  const int64_t BM = s.constexpr_("BLOCK_M"), BT = s.constexpr_("BLOCK_T");
  const GgmlGemm g = declare_ggml_gemm(k, s);
  const TensorTypeInfo& f = g.f;
  auto M = g.M, K = g.K, T = g.T, nb = g.nb;
  ExpertTiles tiles(k, s, BT, T);
  tiles.run([&] {
    auto row0 = tiles.row_block() * static_cast<int>(BM);
    auto we = tiles.weights(g.w);
    split_row_block(k, s.target, row0, BM, M, [&](bool row_masked) {
      auto rows = row0 + arange(BM);
      auto rmask = expand_dims(rows < M, 1);
      auto row_base = expand_dims(rows.to(DType::i64) * (nb * f.block_bytes).to(DType::i64), 1);
      TileDots dots(k, g.x, tiles.x_row_tile(BT), K, BM, BT);
      BlockDecoder dec(f.type, BM, DecodeSteps::sub_blocks, we, [&](const Pointer& p) {
        return row_masked ? load(p, rmask, 0.0) : load(p);
      });
      k.for_(0, nb, 1, [&](Value b) {
        auto blk = row_base + (b * f.block_bytes).to(DType::i64);  // [BM,1]
        auto xb0 = b * static_cast<int>(f.block_elems / 32);
        k.for_(0, static_cast<int>(dec.steps_per_block()), 1, [&](Value p) {
          for (const SubBlock& sb : dec.decode(blk, p, xb0)) dots.add(sb);
        });
      });
      dots.store_tile(g.y, tiles.first(), T, M, rows);
    });
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemm_tiles",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens as tile dots (mma.sync int8 on a GPU), W in ggml "
               "blocks (FMT as qgemv's), x from quantize_q8",
    .dtype_roles = {},
    // GROUPED: plain or one launch for a layer's experts (expert_tiles.h).
    .constexpr_defaults = {{"FMT", 12}, {"BLOCK_M", 64}, {"BLOCK_T", 32}, {"GROUPED", 0}},
    .build = build_qgemm_tiles,
    .launch_shape = [](const Spec& s,
                       const ScalarArgs& a) { return ggml_gemm_launch("qgemm_tiles", s, a); },
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
