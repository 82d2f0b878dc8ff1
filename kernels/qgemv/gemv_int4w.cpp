// GEMV with int4 weight-only quantisation (int4w): y = W x with x, y in f32.
//
// Layout (Kiln's own, as GPTQ-style weight-only formats store it): q u8
// [m, k/2], two 4-bit values per byte, column 2j in the low nibble and 2j+1
// in the high one; scales f16 [m, k/GROUP] (GROUP = 32, 64, 128, or k for
// one scale per row); with ZP=1, zero points u8 [m, k/GROUP] (0..15),
// otherwise the zero point is 8. w = (q - z) * s. Dequantisation is fused:
// nibbles are unpacked in registers, widened to f32 and scaled per group,
// then accumulated with an FMA; activations stay in f32 (weight-only).
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

Kernel build_gemv_int4w(const Spec& s) {
  KernelBuilder k("gemv_int4w", s);
  const int64_t G = s.constexpr_("GROUP"), BM = s.constexpr_("BLOCK_M");
  const bool zp = s.constexpr_("ZP") != 0;
  if (G != 32 && G != 64 && G != 128 && G != 0)
    throw Error("kernel 'gemv_int4w': GROUP must be 32, 64, 128 or 0 (one group per row), got " +
                std::to_string(G));
  auto qw = k.buffer("q", DType::u8), sc = k.buffer("scales", DType::f16);
  auto zs = k.buffer("zeros", DType::u8);
  auto x = k.buffer("x", DType::f32), y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  // A group is processed 32 columns (16 bytes) at a time.
  const int64_t step = 32;
  Value group = G == 0 ? K : k.constant(static_cast<double>(G), DType::i32);
  auto ngroups = K / group;
  auto row0 = k.program_id(0) * static_cast<int>(BM);
  auto rows_pass = [&](bool masked) {
    auto rows = row0 + arange(BM);
    auto rmask = expand_dims(rows < M, 1);
    auto ld = [&](const Pointer& p) { return masked ? load(p, rmask, 0.0) : load(p); };
    auto qrow = expand_dims(rows.to(DType::i64) * (K / 2).to(DType::i64), 1);  // [BM,1]
    auto grow = expand_dims(rows.to(DType::i64) * ngroups.to(DType::i64), 1);  // [BM,1]
    auto acc = k.var(zeros(DType::f32, {BM, 16}));
    k.for_(0, K, step, [&](Value c0) {
      auto g = (c0 / group).to(DType::i64);
      auto s_ = ld(sc + (grow + g)).to(DType::f32);  // [BM,1]
      auto z = zp ? ld(zs + (grow + g)).to(DType::f32) : full({BM, 1}, 8.0, DType::f32);
      auto bytes = ld(qw + (qrow + (c0 / 2).to(DType::i64) + arange(16).to(DType::i64)));
      auto even = (bytes & 15).to(DType::f32), odd = (bytes >> 4).to(DType::f32);  // [BM,16]
      // x's even and odd columns of this 32-column step: one contiguous load,
      // split by shuffles.
      auto xv = reshape(load(x + (c0 + arange(32))), {16, 2});
      auto xe = reshape(slice(xv, {0, 0}, {16, 1}), {16});
      auto xo = reshape(slice(xv, {0, 1}, {16, 1}), {16});
      acc = fma((even - z) * s_, xe, fma((odd - z) * s_, xo, acc));
    });
    store_rows(y + rows, sum(Value(acc), 1), rows, M, masked);
  };
  split_row_block(k, row0, BM, M, rows_pass);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemv_int4w",
    .family = "qgemv",
    .summary = "y = W x, W int4 weight-only (2 per byte, f16 group scales, optional zero points)",
    .dtype_roles = {},
    .constexpr_defaults = {{"GROUP", 128}, {"ZP", 0}, {"BLOCK_M", 4}},
    .build = build_gemv_int4w,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k"), g = s.constexpr_("GROUP");
          int64_t group = g == 0 ? kk : g;
          if (kk % 32 || kk % group)
            throw Error("kernel 'gemv_int4w': k = " + std::to_string(kk) +
                        " must be a multiple of 32 and of the group size " + std::to_string(group));
          int64_t ng = kk / group;
          return LaunchShape{{cdiv(m, s.constexpr_("BLOCK_M")), 1, 1},
                             {{"q", m * kk / 2},
                              {"scales", m * ng},
                              {"zeros", s.constexpr_("ZP") ? m * ng : 0},
                              {"x", kk},
                              {"y", m}}};
        },
    .tunables = {{"BLOCK_M", {1, 2, 4, 8, 16}}},
    .shape_keys = {"m", "k"},
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
