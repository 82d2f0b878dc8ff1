// MoE combine: each token's output is the weighted sum of its experts' rows
// of y, out[t] (+)= sum_j weights[t * k + j] * y[pos[t * k + j]], the slots
// taken in order (moe_sort's pos; a dropped slot, pos -1, adds nothing).
// Gathered per token rather than scattered per expert, so no two programs
// write one element and each sum has one fixed order: bitwise the same on
// every backend and thread count. ADD = 1 adds onto out (a shared expert's
// output, the residual); ADD = 0 overwrites it.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_moe_combine(const Spec& s) {
  KernelBuilder k("moe_combine", s);
  const int64_t B = s.constexpr_("BLOCK");
  auto y = k.buffer("y", DType::f32), pos = k.buffer("pos", DType::i32);
  auto weights = k.buffer("weights", DType::f32), out = k.buffer("out", DType::f32);
  auto n = k.scalar("n", DType::i32), top_k = k.scalar("k", DType::i32);
  auto n64 = n.to(DType::i64);
  auto t = k.program_id(0).to(DType::i64);
  auto c = (k.program_id(1) * static_cast<int>(B) + arange(B)).to(DType::i64);
  auto m = c < n64;
  auto dst = out + (t * n64 + c);
  auto acc = k.var(s.constexpr_("ADD") ? load(dst, m, 0.0) : zeros(DType::f32, {B}));
  k.for_(0, top_k, 1, [&](Value j) {
    auto slot = t * top_k.to(DType::i64) + j.to(DType::i64);
    auto r = load(pos + slot);
    k.if_(r >= 0, [&] {
      auto v = load(y + (r.to(DType::i64) * n64 + c), m, 0.0);
      acc = fma(broadcast_to(load(weights + slot), {B}), v, Value(acc));
    });
  });
  store(dst, Value(acc), m);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "moe_combine",
    .family = "moe",
    .summary = "out[t] (+)= sum_j weights[t, j] * y[pos[t, j]]",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCK", 256}, {"ADD", 0}},
    .build = build_moe_combine,
    // sizes: "tokens" (out's rows) and "rows" (y's: moe_sort's bound).
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t tokens = a.i("tokens"), rows = a.i("rows"), n = a.i("n"), k = a.i("k");
          if (tokens < 1 || rows < 1 || n < 1 || k < 1)
            throw Error("kernel 'moe_combine': tokens " + std::to_string(tokens) + ", rows " +
                        std::to_string(rows) + ", n " + std::to_string(n) + ", k " +
                        std::to_string(k) + " (each must be >= 1)");
          return LaunchShape{
              {tokens, cdiv(n, s.constexpr_("BLOCK")), 1},
              {{"y", rows * n}, {"pos", tokens * k}, {"weights", tokens * k}, {"out", tokens * n}}};
        },
    // One fused multiply-add per slot, in slot order, as the reference.
    .rtol = 0,
    .atol = 0,
}));

}  // namespace
}  // namespace kiln
