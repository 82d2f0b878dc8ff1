// Int4 weight-only quantisation (int4w): y[i] = W x[i] for t tokens, W in
// int4w's layout (int4w_groups.h).
//
// The activations come as quantize_q8's 8-bit blocks, so a 32-column step
// is two unsigned x signed byte dots (low nibbles with x's even columns,
// high with the odd ones) through TokenDots, as in qgemv: scale s, offset
// s z. Dequantisation is fused; a group's scale and zero point are read
// once per group and serve every token of the program.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/int4w_groups.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

Kernel build_gemv_int4w(const Spec& s) {
  KernelBuilder k("gemv_int4w", s);
  const int64_t BM = s.constexpr_("BLOCK_M"), BT = s.constexpr_("BLOCK_T");
  const Int4wOperands o = declare_int4w(k, s, "gemv_int4w");
  // Plain, token blocks vary fastest, so a row block's weights stay in
  // cache while every token block passes over them (ExpertTiles::row_block).
  ExpertTiles tiles(k, s, BT, o.T);
  tiles.run([&] {
    auto row0 = tiles.row_block() * static_cast<int>(BM);
    auto tok0 = tiles.first();
    auto toks = tiles.x_rows(BT);
    const Int4wMatrix w = int4w_matrix(o, tiles);
    auto rows_pass = [&](bool masked) {
      auto rows = row0 + arange(BM);
      auto rmask = expand_dims(rows < o.M, 1);
      auto ld = [&](const Pointer& p) { return masked ? load(p, rmask, 0.0) : load(p); };
      const Int4wRows at = int4w_rows(o, rows);
      TokenDots dots(k, o.x, toks, o.K / 32, BM, 4);
      int4w_sub_blocks(k, o, w, at, BM, ld, [&](const SubBlock& sb) { dots.add(sb); });
      dots.store_tokens(o.y, tok0, o.T, o.M, rows, masked);
    };
    split_row_block(k, s.target, row0, BM, o.M, rows_pass);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemv_int4w",
    .family = "qgemv",
    .summary =
        "y[i] = W x[i] for t tokens, W int4 weight-only (2 per byte, f16 group scales, optional "
        "zero points), x from quantize_q8",
    .dtype_roles = {},
    .constexpr_defaults =
        {{"GROUP", 128}, {"ZP", 0}, {"BLOCK_M", 8}, {"BLOCK_T", 1}, {"GROUPED", 0}},
    .build = build_gemv_int4w,
    .launch_shape = [](const Spec& s,
                       const ScalarArgs& a) { return int4w_launch("gemv_int4w", s, a); },
    .shape_heuristic = [](const Spec&, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      return {{"BLOCK_T", a.i("t") >= 4 ? 4 : 1}};
    },
    .tunables = {{"BLOCK_M", {1, 2, 4, 8, 16}}, {"BLOCK_T", {1, 2, 4, 8}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over k/32 blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
