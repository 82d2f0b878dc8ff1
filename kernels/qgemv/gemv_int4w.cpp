// Int4 weight-only quantisation (int4w): y[i] = W x[i] for t tokens.
//
// Layout (Kiln's own, as GPTQ-style weight-only formats store it): q u8
// [m, k/2], two 4-bit values per byte, column 2j in the low nibble and 2j+1
// in the high one; scales f16 [m, k/GROUP] (GROUP = 32, 64, 128, or 0 for
// one scale per row); with ZP=1, zero points u8 [m, k/GROUP] (0..15),
// otherwise the zero point is 8. w = (q - z) * s.
//
// The activations come as quantize_q8's 8-bit blocks, so a 32-column step
// is two unsigned x signed byte dots (low nibbles with x's even columns,
// high with the odd ones) through TokenDots, as in qgemv: scale s, offset
// s z. Dequantisation is fused; a group's scale and zero point are read
// once per group and serve every token of the program.
//
// GROUPED runs a layer's experts in one launch (kernels/moe/expert_tiles.h):
// q, scales and zeros each hold n_expert matrices, q w_stride bytes apart
// and the scales and zero points m * k / GROUP apart.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

Kernel build_gemv_int4w(const Spec& s) {
  KernelBuilder k("gemv_int4w", s);
  const int64_t G = s.constexpr_("GROUP"), BM = s.constexpr_("BLOCK_M"),
                BT = s.constexpr_("BLOCK_T");
  const bool zp = s.constexpr_("ZP") != 0;
  if (G != 32 && G != 64 && G != 128 && G != 0)
    throw Error("kernel 'gemv_int4w': GROUP must be 32, 64, 128 or 0 (one group per row), got " +
                std::to_string(G));
  auto q_all = k.buffer("q", DType::u8), sc_all = k.buffer("scales", DType::f16);
  auto zs_all = k.buffer("zeros", DType::u8);
  auto xq = k.buffer("xq", DType::i8), xd = k.buffer("xd", DType::f32);
  auto xs = k.buffer("xs", DType::i32), y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  Value group = G == 0 ? K : k.constant(static_cast<double>(G), DType::i32);
  auto ngroups = K / group;
  // Plain, token blocks vary fastest, so a row block's weights stay in
  // cache while every token block passes over them (ExpertTiles::row_block).
  ExpertTiles tiles(k, s, BT, T);
  tiles.run([&] {
    auto row0 = tiles.row_block() * static_cast<int>(BM);
    auto tok0 = tiles.first();
    auto toks = tiles.x_rows(BT);
    auto per_expert = (M.to(DType::i64) * ngroups.to(DType::i64));
    auto qw = tiles.weights(q_all), sc = tiles.of_expert(sc_all, per_expert),
         zs = tiles.of_expert(zs_all, per_expert);
    auto rows_pass = [&](bool masked) {
      auto rows = row0 + arange(BM);
      auto rmask = expand_dims(rows < M, 1);
      auto ld = [&](const Pointer& p) { return masked ? load(p, rmask, 0.0) : load(p); };
      auto qrow = expand_dims(rows.to(DType::i64) * (K / 2).to(DType::i64), 1);  // [BM,1]
      auto grow = expand_dims(rows.to(DType::i64) * ngroups.to(DType::i64), 1);  // [BM,1]
      TokenDots dots(k, {xq, xd, xs}, toks, K / 32, BM, 4);
      k.for_(0, ngroups, 1, [&](Value g) {
        auto g64 = g.to(DType::i64);
        auto s_ = ld(sc + (grow + g64)).to(DType::f32);  // [BM,1]
        auto z = zp ? ld(zs + (grow + g64)).to(DType::f32) : full({BM, 1}, 8.0, DType::f32);
        auto sz = s_ * z;
        auto c_begin = g * group;
        k.for_(c_begin, c_begin + group, 32, [&](Value c0) {
          auto bytes = ld(qw + (qrow + (c0 / 2).to(DType::i64) + arange(16).to(DType::i64)));
          dots.add({{{bytes & 15, 0, 2}, {bytes >> 4, 1, 2}}, s_, {{sz, 0, 32}}, c0 / 32});
        });
      });
      dots.store_tokens(y, tok0, T, M, rows, masked);
    };
    split_row_block(k, s.target, row0, BM, M, rows_pass);
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
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k"), t = a.i("t"), g = s.constexpr_("GROUP");
          int64_t group = g == 0 ? kk : g;
          if (kk % 32 || kk % group)
            throw Error("kernel 'gemv_int4w': k = " + std::to_string(kk) +
                        " must be a multiple of 32 and of the group size " + std::to_string(group));
          int64_t ng = kk / group;
          LaunchShape shape = token_launch("gemv_int4w", s, m, kk, t);
          shape.buffer_elems["q"] = m * kk / 2;
          shape = expert_tiles_launch("gemv_int4w", s, a, shape, s.constexpr_("BLOCK_T"), "q",
                                      {{"xq", kk}, {"xd", kk / 32}, {"xs", kk / 32}});
          const int64_t mats = grouping(s) == Grouping::plain ? 1 : a.i("n_expert");
          shape.buffer_elems["scales"] = mats * m * ng;
          shape.buffer_elems["zeros"] = s.constexpr_("ZP") ? mats * m * ng : 0;
          return shape;
        },
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
