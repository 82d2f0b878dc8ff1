// Batched GEMM for prompt processing: Y[t, n] = sum_k X[t, k] W[n, k], with
// W row-major [n, k] in f32/f16/bf16 (the GEMV layout, so one weight tensor
// serves decode and prefill) and X, Y in f32.
//
// A program computes a BLOCK_T x BLOCK_N tile of Y. Each step loads a
// [BLOCK_T, BLOCK_K] slice of X and a [BLOCK_N, BLOCK_K] slice of W (both
// contiguous rows), transposes the W slice in registers and accumulates
// with the IR's `dot`, so each weight element loaded feeds BLOCK_T tokens.
// Edges in t, n and k are masked.
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
  auto toks = k.program_id(1) * static_cast<int>(BT) + arange(BT);  // [BT]
  auto outs = k.program_id(0) * static_cast<int>(BN) + arange(BN);  // [BN]
  auto tmask = expand_dims(toks < T, 1), nmask = expand_dims(outs < N, 1);
  auto xrow = expand_dims(toks.to(DType::i64) * K64, 1);  // [BT,1]
  auto wrow = expand_dims(outs.to(DType::i64) * K64, 1);  // [BN,1]
  auto acc = k.var(zeros(DType::f32, {BT, BN}));
  k.for_(0, K, static_cast<int>(BK), [&](Value k0) {
    auto cols = k0 + arange(BK);
    auto cmask = cols < K;
    auto c64 = cols.to(DType::i64);
    auto xt = load(x + (xrow + c64), tmask & cmask, 0.0);                 // [BT,BK]
    auto wt = load(w + (wrow + c64), nmask & cmask, 0.0).to(DType::f32);  // [BN,BK]
    acc = dot(xt, transpose(wt), acc);
  });
  auto yoff = expand_dims(toks.to(DType::i64) * N.to(DType::i64), 1) + outs.to(DType::i64);
  store(y + yoff, Value(acc), tmask & expand_dims(outs < N, 0));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemm",
    .family = "gemm",
    .summary = "Y[t, n] = X[t, k] W[n, k]^T, W row-major [n, k]",
    .dtype_roles = {{"W", {DType::f16, DType::bf16, DType::f32}}},
    // From `kiln tune gemm --shape t=32,n=1024,k=1024 --dtype W=f16` (1.66x over 4/16/16).
    .constexpr_defaults = {{"BLOCK_T", 8}, {"BLOCK_N", 8}, {"BLOCK_K", 16}},
    .build = build_gemm,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t t = a.i("t"), n = a.i("n"), kk = a.i("k");
          return LaunchShape{
              {cdiv(n, s.constexpr_("BLOCK_N")), cdiv(t, s.constexpr_("BLOCK_T")), 1},
              {{"w", n * kk}, {"x", t * kk}, {"y", t * n}}};
        },
    .tunables = {{"BLOCK_T", {1, 2, 4, 8}},
                 {"BLOCK_N", {8, 16, 32, 64}},
                 {"BLOCK_K", {8, 16, 32, 64}}},
    .shape_keys = {"t", "n", "k"},
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
