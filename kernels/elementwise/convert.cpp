// y[row0 * row + i] = x[i] (f32) rounded to Y, for i < n: stores rows
// converted to a narrower float at a row offset known only at launch, e.g.
// f32 rows appended to an f16 buffer at the current position (the KV cache
// has its own layout and store, kv_cache_store). One program per BLOCK
// elements.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_convert(const Spec& s) {
  KernelBuilder k("convert", s);
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", DType::f32), y = k.buffer("y", s.dtype("Y"));
  auto n = k.scalar("n", DType::i32), row0 = k.scalar("row0", DType::i32);
  auto row = k.scalar("row", DType::i32);
  auto offs = k.program_id(0) * static_cast<int>(B) + arange(B);
  auto m = offs < n;
  auto at = row0.to(DType::i64) * row.to(DType::i64) + offs.to(DType::i64);
  store(y + at, load(x + offs, m, 0.0).to(s.dtype("Y")), m);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "convert",
    .family = "elementwise",
    .summary = "y[row0 * row + i] = x[i] rounded to Y (x f32)",
    .dtype_roles = {{"Y", {DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK", 1024}},
    .build = build_convert,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t n = a.i("n"), row0 = a.i("row0"), row = a.i("row");
          if (row0 < 0 || row < 0)
            throw Error("kernel 'convert': row0 = " + std::to_string(row0) +
                        " and row = " + std::to_string(row) + " must not be negative");
          return LaunchShape{{cdiv(n, s.constexpr_("BLOCK")), 1, 1},
                             {{"x", n}, {"y", row0 * row + n}}};
        },
    .tunables = {{"BLOCK", {64, 128, 256, 512, 1024, 2048}}},
    .shape_keys = {"n"},
    // Exact: one rounding of each element to Y.
    .rtol = 0,
    .atol = 0,
}));

}  // namespace
}  // namespace kiln
