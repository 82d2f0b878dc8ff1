// INT8 weights times INT8 activations (w8a8, the int8 checkpoints of
// compressed-tensors): y[i] = ws * d_x[i] * (W x_q[i]) for t tokens, with W
// i8 [m, k] row-major and one f32 scale per row (per output channel), and
// x quantised per token by quantize_rows_i8 (q i8 [t, k], d f32 [t],
// s i32 [t] the sum of q).
//
// With one scale per row and one per token, every float operation leaves
// the loop: a program's BLOCK_M rows of codes, flipped to unsigned
// (w ^ 0x80 = w + 128), multiply each of its BLOCK_T tokens' bytes in
// groups of 4 (vpdpbusd on the CPU) into i32 lanes over the whole row, and
//   sum w x_q = sum (w + 128) x_q - 128 s.
// Exact in i32 while k * 255 * 127 < 2^31 (k < 66 000).
//
// GROUPED runs a layer's experts in one launch (kernels/moe/expert_tiles.h):
// w holds n_expert matrices w_stride bytes apart, ws their row scales m apart.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

Kernel build_gemv_w8a8(const Spec& s) {
  KernelBuilder k("gemv_w8a8", s);
  const int64_t BM = s.constexpr_("BLOCK_M"), BK = s.constexpr_("BLOCK_K"),
                BT = s.constexpr_("BLOCK_T");
  if (BK % 4) throw Error("kernel 'gemv_w8a8': BLOCK_K must be a multiple of 4");
  auto w_all = k.buffer("w", DType::u8), ws_all = k.buffer("ws", DType::f32);
  auto xq = k.buffer("xq", DType::i8), xd = k.buffer("xd", DType::f32);
  auto xs = k.buffer("xs", DType::i32), y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  auto K64 = K.to(DType::i64);
  auto k_main = K - K % static_cast<int>(BK);
  // Plain, token blocks vary fastest, so a row block's weights stay in
  // cache while every token block passes over them (ExpertTiles::row_block).
  ExpertTiles tiles(k, s, BT, T);
  tiles.run([&] {
    auto row0 = tiles.row_block() * static_cast<int>(BM);
    auto tok0 = tiles.first();
    auto toks = tiles.x_rows(BT);
    auto w = tiles.weights(w_all), ws = tiles.of_expert(ws_all, M.to(DType::i64));
    std::vector<Value> xbase;
    for (const Value& t : toks) xbase.push_back(t.to(DType::i64) * K64);

    auto rows_pass = [&](bool masked) {
      auto rows = row0 + arange(BM);
      auto rmask = expand_dims(rows < M, 1);
      auto roff = expand_dims(rows.to(DType::i64) * K64, 1);
      std::vector<Var> acc;
      for (int64_t i = 0; i < BT; ++i) acc.push_back(k.var(zeros(DType::i32, {BM, BK / 4})));
      // Columns past k load as weight 0 (code 128) against x 0.
      auto step = [&](const Value& k0, bool tail) {
        auto cols = k0 + arange(BK);
        auto cmask = cols < K;
        auto at = roff + cols.to(DType::i64);
        Value wv =
            tail || masked
                ? load(w + at, tail && masked ? (rmask & cmask) : (tail ? cmask : rmask), 0.0)
                : load(w + at);
        auto codes = (wv ^ 128).to(DType::i32);
        for (int64_t i = 0; i < BT; ++i) {
          auto xat = xbase[i] + cols.to(DType::i64);
          auto xv = tail ? load(xq + xat, cmask, 0.0) : load(xq + xat);
          auto prod = codes * broadcast_to(xv, {BM, BK}).to(DType::i32);
          acc[i] = Value(acc[i]) + sum(reshape(prod, {BM, BK / 4, 4}), 2);
        }
      };
      // The next row block a step at a time, as gemv does (4 KB rows are a
      // page each, where hardware prefetch stops).
      k.for_(0, k_main, static_cast<int>(BK), [&](Value k0) {
        step(k0, false);
        if (!masked) prefetch(w + (roff + (k0.to(DType::i64) + static_cast<int64_t>(BM) * K64)));
      });
      k.if_(k_main < K, [&] { step(k_main, true); });
      auto scale = masked ? load(ws + rows, rows < M, 0.0) : load(ws + rows);
      for (int64_t i = 0; i < BT; ++i) {
        auto dot = sum(Value(acc[i]), 1) - broadcast_to(load(xs + toks[i]) * 128, {BM});
        auto out = dot.to(DType::f32) * scale * broadcast_to(load(xd + toks[i]), {BM});
        auto tok = tok0 + static_cast<int>(i);
        k.if_(tok < T, [&] {
          store_rows(y + (tok.to(DType::i64) * M.to(DType::i64) + rows.to(DType::i64)), out, rows,
                     M, masked);
        });
      }
    };
    split_row_block(k, s.target, row0, BM, M, rows_pass);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemv_w8a8",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens, W int8 [m, k] with a scale per row, x int8 with a "
               "scale per token (quantize_rows_i8)",
    .dtype_roles = {},
    // 8 rows a program: kiln bench, 2 threads, a 79-85 GB/s probe, 14336x4096
    // 0.89-0.93 ms against 0.93-0.95 at 4 rows, 4096x14336 0.84 against
    // 0.87-0.89 (BLOCK_K 128: no better).
    .constexpr_defaults = {{"BLOCK_M", 8}, {"BLOCK_K", 64}, {"BLOCK_T", 1}, {"GROUPED", 0}},
    .build = build_gemv_w8a8,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k"), t = a.i("t");
          if (t < 1) throw Error("kernel 'gemv_w8a8': t = " + std::to_string(t) + " tokens");
          if (kk >= 66000)
            throw Error("kernel 'gemv_w8a8': k = " + std::to_string(kk) +
                        " overflows its i32 row sums (k < 66000)");
          LaunchShape shape = expert_tiles_launch(
              "gemv_w8a8", s, a,
              {{cdiv(t, s.constexpr_("BLOCK_T")), cdiv(m, s.constexpr_("BLOCK_M")), 1},
               {{"w", m * kk}, {"xq", t * kk}, {"xd", t}, {"xs", t}, {"y", t * m}}},
              s.constexpr_("BLOCK_T"), "w", {{"xq", kk}, {"xd", 1}, {"xs", 1}});
          shape.buffer_elems["ws"] = m * (grouping(s) == Grouping::plain ? 1 : a.i("n_expert"));
          return shape;
        },
    .shape_heuristic = [](const Spec&, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      return {{"BLOCK_T", a.i("t") >= 4 ? 4 : 1}};
    },
    .tunables = {{"BLOCK_M", {1, 2, 4, 8, 16}},
                 {"BLOCK_K", {32, 64, 128, 256}},
                 {"BLOCK_T", {1, 2, 4, 8}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; one f32 rounding of each product of scales.
    .rtol = 1e-5,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
