// Batched GEMM for prompt processing: Y[t, n] = sum_k X[t, k] W[n, k], with
// W row-major [n, k] in f32/f16/bf16 (the GEMV layout, so one weight tensor
// serves decode and prefill) and X, Y in f32.
//
// A program computes a BLOCK_T x BLOCK_N tile of Y as BLOCK_T * BLOCK_N
// independent dot products along k: each step loads BLOCK_K contiguous
// elements of every token row and every weight row (widened to f32 once)
// and accumulates their lane-wise products in a [BLOCK_K] f32 register per
// (token, row); lanes are summed once at the end. Both operands stay in
// their memory layout, so there is no transpose or broadcast in the loop:
// BLOCK_T + BLOCK_N loads feed BLOCK_T * BLOCK_N FMAs.
//
// Token blocks are grid axis 0, the fastest: consecutive programs (one
// thread's chunk) share a row block, whose BLOCK_N rows stay in L2 while
// the activations stream by. Tokens and rows past the edges repeat the last
// one, so every load in the main loop is unmasked; only the k tail and the
// stores are masked.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_gemm(const Spec& s) {
  KernelBuilder k("gemm", s);
  DType TW = s.dtype("W");
  const int64_t BT = s.constexpr_("BLOCK_T"), BN = s.constexpr_("BLOCK_N"),
                BK = s.constexpr_("BLOCK_K");
  auto w = k.buffer("w", TW), x = k.buffer("x", DType::f32), y = k.buffer("y", DType::f32);
  auto T = k.scalar("t", DType::i32), N = k.scalar("n", DType::i32), K = k.scalar("k", DType::i32);
  auto K64 = K.to(DType::i64);
  auto tok0 = k.program_id(0) * static_cast<int>(BT);
  auto row0 = k.program_id(1) * static_cast<int>(BN);
  // Row starts, in i64 once, so each load's offset is one add.
  std::vector<Value> xbase, wbase;
  for (int64_t i = 0; i < BT; ++i)
    xbase.push_back(minimum(tok0 + static_cast<int>(i), T - 1).to(DType::i64) * K64);
  for (int64_t j = 0; j < BN; ++j)
    wbase.push_back(minimum(row0 + static_cast<int>(j), N - 1).to(DType::i64) * K64);

  std::vector<std::vector<Var>> acc(BT);
  for (auto& a : acc)
    for (int64_t j = 0; j < BN; ++j) a.push_back(k.var(zeros(DType::f32, {BK})));
  auto step = [&](const Value& k0, bool tail) {
    auto cols = (k0 + arange(BK)).to(DType::i64);
    auto cmask = k0 + arange(BK) < K;
    std::vector<Value> wv;
    for (const Value& b : wbase)
      wv.push_back((tail ? load(w + (b + cols), cmask, 0.0) : load(w + (b + cols))).to(DType::f32));
    for (int64_t i = 0; i < BT; ++i) {
      auto xv = tail ? load(x + (xbase[i] + cols), cmask, 0.0) : load(x + (xbase[i] + cols));
      for (int64_t j = 0; j < BN; ++j) acc[i][j] = fma(xv, wv[j], Value(acc[i][j]));
    }
  };
  auto k_main = K - K % static_cast<int>(BK);
  k.for_(0, k_main, static_cast<int>(BK), [&](Value k0) { step(k0, false); });
  k.if_(k_main < K, [&] { step(k_main, true); });

  auto N64 = N.to(DType::i64);
  for (int64_t i = 0; i < BT; ++i) {
    auto tok = tok0 + static_cast<int>(i);
    for (int64_t j = 0; j < BN; ++j) {
      auto row = row0 + static_cast<int>(j);
      store(y + (tok.to(DType::i64) * N64 + row.to(DType::i64)), sum(Value(acc[i][j])),
            (tok < T) & (row < N));
    }
  }
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemm",
    .family = "gemm",
    .summary = "Y[t, n] = X[t, k] W[n, k]^T, W row-major [n, k]",
    .dtype_roles = {{"W", {DType::f16, DType::bf16, DType::f32}}},
    // 24 accumulators, 4 x and 6 w loads per 24 FMAs. kiln bench, Zen 4,
    // 2 threads, f16 2048x5632 and 5632x2048, 512 tokens: 208-222 GFLOP/s,
    // against 206-216 for 6/4/16, 3/8/16, 8/3/16, 2/6/32 and 4/4/16.
    .constexpr_defaults = {{"BLOCK_T", 4}, {"BLOCK_N", 6}, {"BLOCK_K", 16}},
    .build = build_gemm,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t t = a.i("t"), n = a.i("n"), kk = a.i("k");
          return LaunchShape{
              {cdiv(t, s.constexpr_("BLOCK_T")), cdiv(n, s.constexpr_("BLOCK_N")), 1},
              {{"w", n * kk}, {"x", t * kk}, {"y", t * n}}};
        },
    // BLOCK_T * BLOCK_N * BLOCK_K / 16 zmm accumulators: the useful tiles
    // keep them under AVX-512's 32 registers.
    .tunables = {{"BLOCK_T", {1, 2, 4, 6, 8}}, {"BLOCK_N", {2, 4, 6, 8}}, {"BLOCK_K", {16, 32}}},
    .shape_keys = {"t", "n", "k"},
    // f32 accumulation of k products in BLOCK_K lanes, summed at the end.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
