// Dense GEMV y = W x with W row-major [M, K] in f32/f16/bf16/f8e4m3 and x,
// y in X. With SCALE_BLOCK = B > 0, W carries block scales as FP8
// checkpoints store them (DeepSeek-V3, Qwen3 FP8): ws f32 [cdiv(M, B),
// cdiv(K, B)], w[i, j] = W[i, j] * ws[i / B, j / B].
//
// Token generation is bandwidth-bound on W, so a program streams BLOCK_M
// whole rows: each row is a run of contiguous BLOCK_K-wide vector loads
// (unmasked in the main loop; a masked tail handles K % BLOCK_K), products
// are accumulated in an f32 [BLOCK_M, BLOCK_K] register tile and reduced
// once per row at the end. Only the last program, whose rows run past M,
// takes the row-masked path. Block scales multiply x, not W: a program's
// rows lie in one row of scale blocks, so each step scales its BLOCK_K
// elements of x once for all BLOCK_M rows.
#include <optional>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/quant/fp8.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

Kernel build_gemv(const Spec& s) {
  KernelBuilder k("gemv", s);
  DType TW = s.dtype("W"), TX = s.dtype("X");
  const int64_t BM = s.constexpr_("BLOCK_M"), BK = s.constexpr_("BLOCK_K"),
                SB = s.constexpr_("SCALE_BLOCK");
  if (SB < 0 || (SB && (SB % BK || SB % BM)))
    throw Error("kernel 'gemv': SCALE_BLOCK (" + std::to_string(SB) +
                ") must be 0 or a multiple of BLOCK_K (" + std::to_string(BK) + ") and BLOCK_M (" +
                std::to_string(BM) + ")");
  // Block-scaled FP8 is read as bytes and widened scaled down by 2^-8
  // (kernels/quant/fp8.h), the factor folded into the block scale.
  const bool fp8 = SB && TW == DType::f8e4m3;
  auto W = k.buffer("w", fp8 ? DType::u8 : TW), x = k.buffer("x", TX), y = k.buffer("y", TX);
  std::optional<Buffer> ws;
  if (SB) ws = k.buffer("ws", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto row0 = k.program_id(0) * static_cast<int>(BM);
  auto K64 = K.to(DType::i64);
  auto k_main = K - K % static_cast<int>(BK);

  // With block scales, a program's rows share one row of blocks (BLOCK_M
  // divides SCALE_BLOCK), so a step's x is scaled once for all its rows.
  auto scale_row =
      (row0 / static_cast<int>(SB ? SB : 1)).to(DType::i64) *
      ((K + static_cast<int>(SB ? SB - 1 : 0)) / static_cast<int>(SB ? SB : 1)).to(DType::i64);
  auto widen = [&](const Value& w) { return fp8 ? widen_fp8_scaled_down(w) : w.to(DType::f32); };
  auto x_at = [&](const Value& k0, const Value& cols, const std::optional<Value>& cmask) {
    auto xv = (cmask ? load(x + cols, *cmask, 0.0) : load(x + cols)).to(DType::f32);
    if (!SB) return xv;
    auto scale = load(*ws + (scale_row + (k0 / static_cast<int>(SB)).to(DType::i64)));
    if (fp8) scale = scale * kFp8Unscale;
    return xv * broadcast_to(scale, {BK});
  };

  auto rows_pass = [&](bool row_masked) {
    auto rows = row0 + arange(BM);
    auto rmask = expand_dims(rows < M, 1);
    auto roff = expand_dims(rows.to(DType::i64) * K64, 1);
    auto acc = k.var(zeros(DType::f32, {BM, BK}));
    k.for_(0, k_main, static_cast<int>(BK), [&](Value k0) {
      auto cols = k0 + arange(BK);
      auto off = roff + cols.to(DType::i64);
      auto w = row_masked ? load(W + off, rmask, 0.0) : load(W + off);
      acc = fma(widen(w), x_at(k0, cols, std::nullopt), acc);
      // The next row block (this thread's next program), a step at a time:
      // a row of 4 KB is one page, where the hardware's stream prefetch
      // stops, so short rows would start every program cold (14336x4096
      // FP8: 2.5 -> 2.0 ms).
      if (!row_masked) prefetch(W + (roff + (k0.to(DType::i64) + static_cast<int64_t>(BM) * K64)));
    });
    k.if_(k_main < K, [&] {
      auto cols = k_main + arange(BK);
      auto cmask = cols < K;
      auto off = roff + cols.to(DType::i64);
      auto wmask = row_masked ? (rmask & cmask) : cmask;
      auto w = load(W + off, wmask, 0.0);
      acc = fma(widen(w), x_at(k_main, cols, cmask), acc);
    });
    store_rows(y + rows, sum(Value(acc), 1).to(TX), rows, M, row_masked);
  };
  split_row_block(k, s.target, row0, BM, M, rows_pass);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemv",
    .family = "gemv",
    .summary = "y = W x, W row-major [m, k]",
    .dtype_roles = {{"W", {DType::f16, DType::bf16, DType::f32, DType::f8e4m3}},
                    {"X", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK_M", 4}, {"BLOCK_K", 64}, {"SCALE_BLOCK", 0}},
    .build = build_gemv,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k"), sb = s.constexpr_("SCALE_BLOCK");
          LaunchShape shape{{cdiv(m, s.constexpr_("BLOCK_M")), 1, 1},
                            {{"w", m * kk}, {"x", kk}, {"y", m}}};
          if (sb) shape.buffer_elems["ws"] = cdiv(m, sb) * cdiv(kk, sb);
          return shape;
        },
    // Measured defaults per target are in runtime/tuning/<class>.toml
    // (on AVX-512: 8 rows per program for 16-bit weights).
    .tunables = {{"BLOCK_M", {1, 2, 4, 8, 16}}, {"BLOCK_K", {32, 64, 128, 256, 512}}},
    .shape_keys = {"m", "k"},
    // f32 accumulation of k products (reassociated by the block size, and
    // with block scales by the scale's product with each block's sum), then
    // the rounding of X.
    .rtol = 1e-3,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
