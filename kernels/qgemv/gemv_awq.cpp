// GEMV on AWQ weights: y[n] = sum_k x[k] W[k, n] with W in AutoAWQ's packed
// layout (see kernels/quant/awq.h), x and y in f32.
//
// W is input-major, so a program owns BLOCK_N output columns and streams
// BLOCK_K rows of packed words at a time: [BLOCK_K, BLOCK_N/8] i32 tiles
// whose rows are contiguous. Nibble slot i of every word belongs to the
// columns 8c + kAwqOrder[i]; each slot keeps its own accumulator, so
// unpacking is one shift and mask per slot and the results are stored
// back in column order at the end. Scales and zero points are applied
// once per group (BLOCK_K divides the group size).
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/quant/awq.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_gemv_awq(const Spec& s) {
  KernelBuilder k("gemv_awq", s);
  const int64_t G = s.constexpr_("GROUP"), BN = s.constexpr_("BLOCK_N"),
                BK = s.constexpr_("BLOCK_K");
  if (BN % 8 || BK <= 0 || G % BK)
    throw Error("kernel 'gemv_awq': BLOCK_N must be a multiple of 8 and BLOCK_K divide GROUP");
  const int64_t W = BN / 8;  // packed words per tile row
  auto qw = k.buffer("qweight", DType::i32), qz = k.buffer("qzeros", DType::i32);
  auto sc = k.buffer("scales", DType::f16);
  auto x = k.buffer("x", DType::f32), y = k.buffer("y", DType::f32);
  auto K = k.scalar("k", DType::i32), N = k.scalar("n", DType::i32);
  auto words_per_row = N / 8;
  auto wcols = k.program_id(0) * static_cast<int>(W) + arange(W);  // [W] word columns
  auto wmask = wcols < words_per_row;
  std::vector<Var> acc;
  for (int i = 0; i < 8; ++i) acc.push_back(k.var(zeros(DType::f32, {W})));
  // Per group: sum over its rows of q x per slot in [BK, W] lanes (one
  // widening and one FMA per weight), then sum (q - z) s x = s (sum q x -
  // z sum x) once, with the group's scales and zero points read once.
  k.for_(0, K / static_cast<int>(G), 1, [&](Value g) {
    auto zw = load(qz + (g * words_per_row + wcols), wmask, 0.0);  // [W]
    // The group's BN scales are contiguous: [W, 8] in column order.
    auto scales =
        load(sc + (g * N + expand_dims(wcols * 8, 1) + arange(8)), expand_dims(wmask, 1), 0.0)
            .to(DType::f32);
    std::vector<Var> part;
    for (int i = 0; i < 8; ++i) part.push_back(k.var(zeros(DType::f32, {BK, W})));
    auto xsum = k.var(zeros(DType::f32, {BK}));
    auto k_begin = g * static_cast<int>(G);
    k.for_(k_begin, k_begin + static_cast<int>(G), static_cast<int>(BK), [&](Value k0) {
      auto rows = k0 + arange(BK);
      auto words = load(qw + (expand_dims(rows * words_per_row, 1) + wcols), expand_dims(wmask, 0),
                        0.0);    // [BK, W]
      auto xv = load(x + rows);  // [BK]
      auto xcol = expand_dims(xv, 1);
      xsum = xsum + xv;
      // Slot i of every word: columns 8c + kAwqOrder[i].
      for (int i = 0; i < 8; ++i)
        part[i] = fma(((words >> (4 * i)) & 15).to(DType::f32), xcol, Value(part[i]));
    });
    auto xs = sum(Value(xsum));
    for (int i = 0; i < 8; ++i) {
      auto z = ((zw >> (4 * i)) & 15).to(DType::f32);
      auto scale = reshape(slice(scales, {0, kAwqOrder[i]}, {W, 1}), {W});
      acc[i] = fma(scale, sum(Value(part[i]), 0) - z * xs, Value(acc[i]));
    }
  });
  for (int i = 0; i < 8; ++i) store(y + (wcols * 8 + kAwqOrder[i]), Value(acc[i]), wmask);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemv_awq",
    .family = "qgemv",
    .summary = "y = x W, W in AutoAWQ's packed int4 layout (qweight, qzeros, f16 scales)",
    .dtype_roles = {},
    .constexpr_defaults = {{"GROUP", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 2}},
    .build = build_gemv_awq,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t kk = a.i("k"), n = a.i("n"), g = s.constexpr_("GROUP");
          if (n % 8 || kk % g || kk % s.constexpr_("BLOCK_K"))
            throw Error("kernel 'gemv_awq': n = " + std::to_string(n) +
                        " must be a multiple of 8 and k = " + std::to_string(kk) +
                        " a multiple of GROUP and BLOCK_K");
          return LaunchShape{{cdiv(n, s.constexpr_("BLOCK_N")), 1, 1},
                             {{"qweight", kk * n / 8},
                              {"qzeros", kk / g * n / 8},
                              {"scales", kk / g * n},
                              {"x", kk},
                              {"y", n}}};
        },
    .tunables = {{"BLOCK_N", {8, 16, 32, 64, 128, 256}}, {"BLOCK_K", {1, 2, 4, 8, 16, 32}}},
    .shape_keys = {"k", "n"},
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
