// Per-token int8 activations for the w8a8 matmul (gemv_w8a8), as INT8
// checkpoints' dynamic activation quantisation defines them: one scale per
// row of x, d = amax / 127, q = round-half-even(x * 127 / amax) in
// [-127, 127] (0 for an all-zero row), and s = sum(q), which lets the
// matmul's unsigned x signed byte dots stand in for signed x signed.
//
// A program owns one row: a first pass finds its amax in BLOCK-wide
// vectors, a second rounds and stores the codes and sums them.
#include "ir/builder.h"
#include "kernels/quant/q8_0_rounding.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_quantize_rows_i8(const Spec& s) {
  KernelBuilder k("quantize_rows_i8", s);
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", DType::f32), q = k.buffer("q", DType::i8);
  auto d = k.buffer("d", DType::f32), sums = k.buffer("s", DType::i32);
  auto N = k.scalar("n", DType::i32);
  auto row = k.program_id(0);
  auto base = row.to(DType::i64) * N.to(DType::i64);
  auto amax = k.var(zeros(DType::f32, {B}));
  k.for_(0, N, static_cast<int>(B), [&](Value c0) {
    auto cols = c0 + arange(B);
    amax = maximum(Value(amax), abs(load(x + (base + cols.to(DType::i64)), cols < N, 0.0)));
  });
  auto m = max(Value(amax));
  auto inv = where(m != 0.0, 127.0 / m, full({}, 0.0, DType::f32));
  auto total = k.var(zeros(DType::i32, {B}));
  k.for_(0, N, static_cast<int>(B), [&](Value c0) {
    auto cols = c0 + arange(B);
    auto at = base + cols.to(DType::i64);
    auto codes = round_half_even(load(x + at, cols < N, 0.0) * broadcast_to(inv, {B}));
    auto qi = minimum(maximum(codes, -127.0), 127.0).to(DType::i8);
    store(q + at, qi, cols < N);
    total = Value(total) + qi.to(DType::i32);
  });
  store(d + row, m / 127.0);
  store(sums + row, sum(Value(total)));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "quantize_rows_i8",
    .family = "quant",
    .summary =
        "x f32 [rows, n] -> int8 codes with one scale per row (q, d = amax / 127, s = sum q)",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCK", 256}},
    .build = build_quantize_rows_i8,
    .launch_shape =
        [](const Spec&, const ScalarArgs& a) {
          int64_t rows = a.i("rows"), n = a.i("n");
          return LaunchShape{{rows, 1, 1},
                             {{"x", rows * n}, {"q", rows * n}, {"d", rows}, {"s", rows}}};
        },
    .tunables = {{"BLOCK", {64, 128, 256, 512}}},
    .shape_keys = {"rows", "n"},
}));

}  // namespace
}  // namespace kiln
