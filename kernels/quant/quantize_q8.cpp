// Activation quantisation for the quantized GEMVs: x f32 [k] -> 8-bit
// blocks of 32 in a split layout the GEMV streams easily: q i8 [k],
// d f32 [k/32] (the block scale amax/127) and s i32 [k/32] (the sum of the
// block's q, which lets an unsigned x signed dot product stand in for
// signed x signed). Values round half away from zero, as ggml's roundf.
#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_quantize_q8(const Spec& s) {
  KernelBuilder k("quantize_q8", s);
  const int64_t NB = s.constexpr_("BLOCKS");  // 32-element blocks per program
  auto x = k.buffer("x", DType::f32), q = k.buffer("q", DType::i8);
  auto d = k.buffer("d", DType::f32), sums = k.buffer("s", DType::i32);
  auto nblocks = k.scalar("nblocks", DType::i32);
  auto blk = k.program_id(0) * static_cast<int>(NB) + arange(NB);  // [NB]
  auto bmask = blk < nblocks;
  auto off = expand_dims(blk * 32, 1) + arange(32);  // [NB, 32]
  auto v = load(x + off, expand_dims(bmask, 1), 0.0);
  auto amax = max(abs(v), 1);
  auto scale = amax / 127.0;
  auto inv = where(scale != 0.0, 1.0 / scale, zeros(DType::f32, {NB}));
  auto t = v * expand_dims(inv, 1);
  auto r = where(t < 0.0, -floor(-t + 0.5), floor(t + 0.5));
  auto qi = r.to(DType::i8);
  store(q + off, qi, expand_dims(bmask, 1));
  store(d + blk, scale, bmask);
  store(sums + blk, sum(qi.to(DType::i32), 1), bmask);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "quantize_q8",
    .family = "quant",
    .summary = "x f32 -> 8-bit blocks of 32 (q, scale, sum)",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCKS", 8}},
    .build = build_quantize_q8,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t nb = a.i("nblocks");
          return LaunchShape{{cdiv(nb, s.constexpr_("BLOCKS")), 1, 1},
                             {{"x", nb * 32}, {"q", nb * 32}, {"d", nb}, {"s", nb}}};
        },
    .tunables = {{"BLOCKS", {1, 2, 4, 8, 16, 32}}},
    .shape_keys = {"nblocks"},
}));

}  // namespace
}  // namespace kiln
