// Batched GEMM for prompt processing: Y[t, n] = sum_k X[t, k] W[n, k], with
// W row-major [n, k] in f32/f16/bf16/f8e4m3 (the GEMV layout, so one weight
// tensor serves decode and prefill) and X, Y in f32. With SCALE_BLOCK = B >
// 0, W carries FP8 checkpoints' block scales as gemv reads them: ws f32
// [cdiv(n, B), cdiv(k, B)] (per expert when grouped); each weight load is
// widened and scaled once, the scale a broadcast of one f32 per row and step.
//
// The register tile: BLOCK_T x BLOCK_N independent dot products along k.
// Each step loads BLOCK_K contiguous elements of every token row and every
// weight row (widened to f32 once) and accumulates their lane-wise products
// in a [BLOCK_K] f32 register per (token, row); lanes are summed at the end.
// Both operands stay in their memory layout, so there is no transpose or
// broadcast in the loop: BLOCK_T + BLOCK_N loads feed BLOCK_T * BLOCK_N FMAs.
//
// The cache tile: a program owns PANEL_T tokens x PANEL_N rows and walks k
// in chunks of PANEL_K. Within a chunk every token block meets every row
// block, so the chunk's weights (PANEL_N x PANEL_K) stay in L2 and a token
// block's activations (BLOCK_T x PANEL_K) in L1 across the row blocks; Y
// takes each chunk's sums (stored by the first, added by the rest). Without
// chunks, every row block re-read all of X, from DRAM once X outgrew the L3
// (512 tokens x k 14336 is 29 MB).
//
// Tokens and rows past a program's panel repeat its last one, so every load
// in the main loop is unmasked; only the k tail and the stores are masked.
#include <optional>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/quant/fp8.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

// One program's panel: PANEL_T token rows (one expert's tile when
// grouped) by PANEL_N weight rows, PANEL_K columns at a time.
void gemm_panel(KernelBuilder& k, const Spec& s, const ExpertTiles& tiles, const Buffer& w,
                const std::optional<Buffer>& ws, const Buffer& x, const Buffer& y, const Value& T,
                const Value& N, const Value& K) {
  const int64_t BT = s.constexpr_("BLOCK_T"), BN = s.constexpr_("BLOCK_N"),
                BK = s.constexpr_("BLOCK_K"), PT = s.constexpr_("PANEL_T"),
                PN = s.constexpr_("PANEL_N"), PK = s.constexpr_("PANEL_K"),
                SB = s.constexpr_("SCALE_BLOCK");
  const bool fp8 = SB && s.dtype("W") == DType::f8e4m3;
  auto K64 = K.to(DType::i64), N64 = N.to(DType::i64);
  auto tok_begin = tiles.first();
  auto row_begin = tiles.row_block() * static_cast<int>(PN);
  auto tok_end = minimum(tok_begin + static_cast<int>(PT), T);
  auto row_end = minimum(row_begin + static_cast<int>(PN), N);
  auto k_main = K - K % static_cast<int>(BK);

  std::vector<std::vector<Var>> acc(BT);
  for (auto& a : acc)
    for (int64_t j = 0; j < BN; ++j) a.push_back(k.var(zeros(DType::f32, {BK})));

  // The i64 start offsets of n rows from r0, rows past `last` repeating it
  // (token rows: of x, which a grouped panel gathers); made once per
  // block, so that each load's offset is one add.
  auto row_starts = [&](const Value& r0, int64_t n, const Value& last, bool tokens) {
    std::vector<Value> starts;
    for (int64_t i = 0; i < n; ++i) {
      auto r = minimum(r0 + static_cast<int>(i), last);
      starts.push_back((tokens ? tiles.x_row(r) : r).to(DType::i64) * K64);
    }
    return starts;
  };
  // The i64 offsets of the weight rows' first block scales in ws.
  auto scale_starts = [&](const Value& r0) {
    std::vector<Value> starts;
    if (!SB) return starts;
    auto blocks = ((K + static_cast<int>(SB - 1)) / static_cast<int>(SB)).to(DType::i64);
    for (int64_t j = 0; j < BN; ++j) {
      auto r = minimum(r0 + static_cast<int>(j), row_end - 1);
      starts.push_back((r / static_cast<int>(SB)).to(DType::i64) * blocks);
    }
    return starts;
  };
  // acc += the products of columns k0 .. k0 + BLOCK_K of the block's token
  // rows (xbase) and weight rows (wbase, scales at sbase); `tail` masks
  // columns past k.
  auto step = [&](const std::vector<Value>& xbase, const std::vector<Value>& wbase,
                  const std::vector<Value>& sbase, const Value& k0, bool tail) {
    auto cols = (k0 + arange(BK)).to(DType::i64);
    auto cmask = k0 + arange(BK) < K;
    std::vector<Value> wv;
    for (size_t j = 0; j < wbase.size(); ++j) {
      const Value& b = wbase[j];
      auto raw = tail ? load(w + (b + cols), cmask, 0.0) : load(w + (b + cols));
      auto v = fp8 ? widen_fp8_scaled_down(raw) : raw.to(DType::f32);
      if (SB) {
        auto block = (k0 / static_cast<int>(SB)).to(DType::i64);
        auto scale = load(*ws + (sbase[j] + block));
        v = v * broadcast_to(fp8 ? scale * kFp8Unscale : scale, {BK});
      }
      wv.push_back(v);
    }
    for (int64_t i = 0; i < BT; ++i) {
      auto xv = tail ? load(x + (xbase[i] + cols), cmask, 0.0) : load(x + (xbase[i] + cols));
      for (int64_t j = 0; j < BN; ++j) acc[i][j] = fma(xv, wv[j], Value(acc[i][j]));
    }
  };
  // Y[tb.., rb..] gets the block's lane sums: stored by the first chunk,
  // added by the others; tokens and rows past the panel are skipped.
  auto flush = [&](const Value& tb, const Value& rb, const Value& first_chunk) {
    for (int64_t i = 0; i < BT; ++i) {
      auto tok = tb + static_cast<int>(i);
      for (int64_t j = 0; j < BN; ++j) {
        auto row = rb + static_cast<int>(j);
        auto valid = (tok < tok_end) & (row < row_end);
        auto off = y + (tok.to(DType::i64) * N64 + row.to(DType::i64));
        auto before = load(off, valid & !first_chunk, 0.0);
        auto sums = sum(Value(acc[i][j]));
        store(off, before + sums, valid);
      }
    }
  };

  k.for_(0, K, static_cast<int>(PK), [&](Value kc) {
    auto chunk_main_end = minimum(kc + static_cast<int>(PK), k_main);
    auto has_tail = (kc + static_cast<int>(PK) >= K) & (k_main < K);
    auto first_chunk = kc == 0;
    k.for_(tok_begin, tok_end, static_cast<int>(BT), [&](Value tb) {
      auto xbase = row_starts(tb, BT, tok_end - 1, true);
      k.for_(row_begin, row_end, static_cast<int>(BN), [&](Value rb) {
        auto wbase = row_starts(rb, BN, row_end - 1, false);
        auto sbase = scale_starts(rb);
        for (auto& a : acc)
          for (Var& v : a) v = zeros(DType::f32, {BK});
        k.for_(kc, chunk_main_end, static_cast<int>(BK),
               [&](Value k0) { step(xbase, wbase, sbase, k0, false); });
        k.if_(has_tail, [&] { step(xbase, wbase, sbase, k_main, true); });
        flush(tb, rb, first_chunk);
      });
    });
  });
}

Kernel build_gemm(const Spec& s) {
  KernelBuilder k("gemm", s);
  DType TW = s.dtype("W");
  const int64_t BK = s.constexpr_("BLOCK_K"), PK = s.constexpr_("PANEL_K");
  if (BK < 1) throw Error("kernel 'gemm': BLOCK_K must be at least 1, got " + std::to_string(BK));
  // A chunk's steps must end on its boundary (panels need not be multiples
  // of their blocks: a last partial block repeats the panel's last row).
  if (PK % BK)
    throw Error("kernel 'gemm': PANEL_K (" + std::to_string(PK) +
                ") must be a multiple of BLOCK_K (" + std::to_string(BK) + ")");
  // A step's columns share one block scale.
  const int64_t SB = s.constexpr_("SCALE_BLOCK");
  if (SB < 0 || (SB && SB % BK))
    throw Error("kernel 'gemm': SCALE_BLOCK (" + std::to_string(SB) +
                ") must be 0 or a multiple of BLOCK_K (" + std::to_string(BK) + ")");
  // Block-scaled FP8 is read as bytes and widened scaled down by 2^-8
  // (kernels/quant/fp8.h), the factor folded into the block scale.
  const bool fp8 = SB && TW == DType::f8e4m3;
  auto w = k.buffer("w", fp8 ? DType::u8 : TW), x = k.buffer("x", DType::f32),
       y = k.buffer("y", DType::f32);
  std::optional<Buffer> ws;
  if (SB) ws = k.buffer("ws", DType::f32);
  auto T = k.scalar("t", DType::i32), N = k.scalar("n", DType::i32), K = k.scalar("k", DType::i32);
  ExpertTiles tiles(k, s, s.constexpr_("PANEL_T"), T);
  tiles.run([&] {
    std::optional<Buffer> expert_ws;  // an expert's scales lie one scale matrix apart
    if (ws) {
      auto blocks = [&](const Value& n) {
        return ((n + static_cast<int>(SB - 1)) / static_cast<int>(SB)).to(DType::i64);
      };
      expert_ws = tiles.of_expert(*ws, blocks(N) * blocks(K));
    }
    gemm_panel(k, s, tiles, tiles.weights(w), expert_ws, x, y, T, N, K);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemm",
    .family = "gemm",
    .summary = "Y[t, n] = X[t, k] W[n, k]^T, W row-major [n, k]",
    .dtype_roles = {{"W", {DType::f16, DType::bf16, DType::f32, DType::f8e4m3}}},
    // Register tile: 24 accumulators, 4 x and 6 w loads per 24 FMAs. kiln
    // bench, Zen 4, 2 threads, f16 2048x5632 and 5632x2048, 512 tokens:
    // 208-222 GFLOP/s, against 206-216 for 6/4/16, 3/8/16, 8/3/16, 2/6/32
    // and 4/4/16. Panels: 48 x 4096 f16 weights (384 KiB) fit L2 beside
    // the activations; at 4096x14336 (X 29 MB) 181-195 GFLOP/s against
    // 133 unchunked, and within noise of it (199-218 against 204-222) where
    // X fits L3. PANEL_K 2048 pays its extra lane sums on every shape.
    .constexpr_defaults = {{"BLOCK_T", 4},
                           {"BLOCK_N", 6},
                           {"BLOCK_K", 16},
                           {"PANEL_T", 256},
                           {"PANEL_N", 48},
                           {"PANEL_K", 4096},
                           {"GROUPED", 0},  // plain, or a layer's experts (expert_tiles.h)
                           {"SCALE_BLOCK", 0}},
    .build = build_gemm,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t t = a.i("t"), n = a.i("n"), kk = a.i("k");
          LaunchShape plain{{cdiv(t, s.constexpr_("PANEL_T")), cdiv(n, s.constexpr_("PANEL_N")), 1},
                            {{"w", n * kk}, {"x", t * kk}, {"y", t * n}}};
          LaunchShape l =
              expert_tiles_launch("gemm", s, a, plain, s.constexpr_("PANEL_T"), "w", {{"x", kk}});
          if (int64_t sb = s.constexpr_("SCALE_BLOCK"))
            l.buffer_elems["ws"] =
                cdiv(n, sb) * cdiv(kk, sb) * (grouping(s) == Grouping::plain ? 1 : a.i("n_expert"));
          return l;
        },
    // BLOCK_T * BLOCK_N * BLOCK_K / 16 zmm accumulators: the useful tiles
    // keep them under AVX-512's 32 registers.
    .tunables = {{"BLOCK_T", {2, 4, 6}},
                 {"BLOCK_N", {4, 6}},
                 {"PANEL_T", {64, 256}},
                 {"PANEL_N", {24, 48, 96}},
                 {"PANEL_K", {2048, 4096, 8192}}},
    .shape_keys = {"t", "n", "k"},
    // f32 accumulation of k products in BLOCK_K lanes, summed at the end.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
