// Rows times one of AURA's rotation matrices (aura_format.h): out[r, :DOUT]
// = in[r, :DIN] (zero-padded to D) times M[:DIN, :DOUT], M f32 [D, D]. What
// moves a query into the cache's rotated space before attention (DIN =
// head_dim, DOUT = D, the K forward matrix) and the attention output back
// (DIN = D, DOUT = head_dim, the V inverse matrix); rows are [n_rows] head
// vectors of any heads. BLOCK_R rows per program share every matrix row.
#include <algorithm>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/aura/aura_format.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

void check_dims(const Spec& s) {
  const int64_t din = s.constexpr_("DIN"), dout = s.constexpr_("DOUT");
  const int64_t D = aura_padded_dim(std::max<int64_t>(1, std::max(din, dout)));
  if (din < 1 || dout < 1 || (din != D && dout != D))
    throw Error("kernel 'aura_rotate': DIN = " + std::to_string(din) + " and DOUT = " +
                std::to_string(dout) + " (one of them the rotation's power-of-two D)");
  if (s.constexpr_("BLOCK_R") < 1)
    throw Error("kernel 'aura_rotate': BLOCK_R = " + std::to_string(s.constexpr_("BLOCK_R")));
}

Kernel build_aura_rotate(const Spec& s) {
  check_dims(s);
  KernelBuilder k("aura_rotate", s);
  const int64_t din = s.constexpr_("DIN"), dout = s.constexpr_("DOUT"),
                BR = s.constexpr_("BLOCK_R");
  const int64_t D = std::max(din, dout);
  auto x = k.buffer("x", s.dtype("X")), rot = k.buffer("rot", DType::f32);
  auto out = k.buffer("out", s.dtype("Y"));
  auto n_rows = k.scalar("n_rows", DType::i32);
  auto r0 = k.program_id(0) * static_cast<int>(BR);
  std::vector<Value> row;
  std::vector<Var> acc;
  for (int64_t r = 0; r < BR; ++r) {
    row.push_back(minimum(r0 + static_cast<int>(r), n_rows - 1).to(DType::i64));
    acc.push_back(k.var(zeros(DType::f32, {dout})));
  }
  auto cols = arange(dout).to(DType::i64);
  k.for_(0, static_cast<int>(din), 1, [&](Value j) {
    auto jj = j.to(DType::i64);
    auto m = load(rot + (jj * D + cols));
    for (int64_t r = 0; r < BR; ++r) {
      auto xj = load(x + (row[r] * din + jj)).to(DType::f32);
      acc[r] = fma(broadcast_to(xj, {dout}), m, Value(acc[r]));
    }
  });
  for (int64_t r = 0; r < BR; ++r)
    store(out + (row[r] * dout + cols), Value(acc[r]).to(out.dtype()),
          broadcast_to(r0 + static_cast<int>(r) < n_rows, {dout}));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "aura_rotate",
    .family = "aura",
    .summary = "rows times an AURA rotation matrix: queries into the compressed cache's rotated "
               "space, attention outputs back",
    .dtype_roles = {{"X", {DType::f32, DType::f16, DType::bf16}},
                    {"Y", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"DIN", 128}, {"DOUT", 128}, {"BLOCK_R", 4}},
    .build = build_aura_rotate,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          check_dims(s);
          const int64_t n = a.i("n_rows"), din = s.constexpr_("DIN"), dout = s.constexpr_("DOUT");
          if (n < 1)
            throw Error("kernel 'aura_rotate': n_rows = " + std::to_string(n) + " (need >= 1)");
          const int64_t D = std::max(din, dout);
          return LaunchShape{{cdiv(n, s.constexpr_("BLOCK_R")), 1, 1},
                             {{"x", n * din}, {"rot", D * D}, {"out", n * dout}}};
        },
    .tunables = {{"BLOCK_R", {1, 2, 4, 8}}},
    .shape_keys = {"n_rows"},
    // f32 sums of DIN products.
    .rtol = 1e-5,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
