// Dense GEMV y = W x with W row-major [M, K] in f32/f16/bf16 and x, y in X.
//
// Token generation is bandwidth-bound on W, so a program streams BLOCK_M
// whole rows: each row is a run of contiguous BLOCK_K-wide vector loads
// (unmasked in the main loop; a masked tail handles K % BLOCK_K), products
// are accumulated in an f32 [BLOCK_M, BLOCK_K] register tile and reduced
// once per row at the end. Only the last program, whose rows run past M,
// takes the row-masked path.
#include "ir/builder.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

Kernel build_gemv(const Spec& s) {
  KernelBuilder k("gemv", s);
  DType TW = s.dtype("W"), TX = s.dtype("X");
  const int64_t BM = s.constexpr_("BLOCK_M"), BK = s.constexpr_("BLOCK_K");
  auto W = k.buffer("w", TW), x = k.buffer("x", TX), y = k.buffer("y", TX);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto row0 = k.program_id(0) * static_cast<int>(BM);
  auto K64 = K.to(DType::i64);
  auto k_main = K - K % static_cast<int>(BK);

  auto rows_pass = [&](bool row_masked) {
    auto rows = row0 + arange(BM);
    auto rmask = expand_dims(rows < M, 1);
    auto roff = expand_dims(rows.to(DType::i64) * K64, 1);
    auto acc = k.var(zeros(DType::f32, {BM, BK}));
    k.for_(0, k_main, static_cast<int>(BK), [&](Value k0) {
      auto cols = k0 + arange(BK);
      auto off = roff + cols.to(DType::i64);
      auto w = row_masked ? load(W + off, rmask, 0.0) : load(W + off);
      acc = fma(w.to(DType::f32), load(x + cols).to(DType::f32), acc);
    });
    k.if_(k_main < K, [&] {
      auto cols = k_main + arange(BK);
      auto cmask = cols < K;
      auto off = roff + cols.to(DType::i64);
      auto wmask = row_masked ? (rmask & cmask) : cmask;
      auto w = load(W + off, wmask, 0.0);
      acc = fma(w.to(DType::f32), load(x + cols, cmask, 0.0).to(DType::f32), acc);
    });
    auto out = sum(Value(acc), 1).to(TX);
    store_rows(y + rows, out, rows, M, row_masked);
  };
  split_row_block(k, row0, BM, M, rows_pass);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemv",
    .family = "gemv",
    .summary = "y = W x, W row-major [m, k]",
    .dtype_roles = {{"W", {DType::f16, DType::bf16, DType::f32}},
                    {"X", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK_M", 4}, {"BLOCK_K", 64}},
    .build = build_gemv,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k");
          return LaunchShape{{cdiv(m, s.constexpr_("BLOCK_M")), 1, 1},
                             {{"w", m * kk}, {"x", kk}, {"y", m}}};
        },
    // Measured defaults per target are in runtime/tuning/<class>.toml
    // (on AVX-512: 8 rows per program for 16-bit weights).
    .tunables = {{"BLOCK_M", {1, 2, 4, 8, 16}}, {"BLOCK_K", {32, 64, 128, 256, 512}}},
    .shape_keys = {"m", "k"},
    // f32 accumulation of k products (reassociated by the block size), then
    // the rounding of X.
    .rtol = 1e-3,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
