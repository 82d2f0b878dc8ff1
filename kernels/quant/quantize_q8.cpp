// Activation quantisation for the quantized GEMVs: x f32 [k] -> 8-bit
// blocks of 32 in a split layout the GEMV streams easily: q i8 [k],
// d f32 [k/32] (the block scale) and s i32 [k/32] (the sum of the block's
// q, which lets an unsigned x signed dot product stand in for signed x
// signed).
//
// The rounding is llama.cpp's, so that a quantized matmul sees the same
// 8-bit activations in both (QBLOCK, the elements that share one scale):
// - 32, as ggml's Q8_0 on x86 (for Q4_0/Q8_0 weights; q8_0_rounding.h);
// - 256, as ggml's Q8_K (for K-quant weights): with m the element of
//   largest magnitude (the first one), q = round-half-even(-127/m * x)
//   capped at 127, d = -m/127 (repeated in the 8 slots of the block).
//
// s8 holds the sums again, of 32 and of 16 codes, split into bytes
// (kernels/quant/split_sums.h): a GEMV whose rows weight each block sum by
// a small unsigned coefficient (Q4_K's 6-bit mins, Q6_K's biased group
// scales) then takes 4 of them in one u8 x i8 dot straight from memory,
// instead of splitting and broadcasting s per token and row group
// (qgemv_rows16), and times -128 as i32 (IQ4_XS's dot starts). With
// QBLOCK=256 it also holds each block's sum of 256.
#include <algorithm>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/quant/q8_0_rounding.h"
#include "kernels/quant/split_sums.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_quantize_q8(const Spec& s) {
  KernelBuilder k("quantize_q8", s);
  const int64_t NB = s.constexpr_("BLOCKS"), QB = s.constexpr_("QBLOCK");
  if (QB != 32 && QB != 256)
    throw Error("kernel 'quantize_q8': QBLOCK must be 32 or 256, got " + std::to_string(QB));
  const int64_t sub = QB / 32;  // 32-element blocks per scale
  auto x = k.buffer("x", DType::f32), q = k.buffer("q", DType::i8);
  auto d = k.buffer("d", DType::f32), sums = k.buffer("s", DType::i32);
  auto split = k.buffer("s8", DType::i8);
  auto nblocks = k.scalar("nblocks", DType::i32);                  // of 32 elements
  auto blk = k.program_id(0) * static_cast<int>(NB) + arange(NB);  // [NB] scale blocks
  auto bmask = blk * static_cast<int>(sub) < nblocks;
  auto off = expand_dims(blk * static_cast<int>(QB), 1) + arange(QB);  // [NB, QB]
  auto v = load(x + off, expand_dims(bmask, 1), 0.0);
  Value scale, qv;
  if (QB == 32) {
    auto r = round_q8_0(v);
    scale = r.scale;
    qv = r.codes;
  } else {
    auto amax = max(abs(v), 1);   // [NB]
    auto at = argmax(abs(v), 1);  // [NB], the first of the largest
    auto m = sum(where(expand_dims(at, 1) == arange(QB), v, zeros(DType::f32, {NB, QB})), 1);
    auto iscale = where(amax != 0.0, -127.0 / m, zeros(DType::f32, {NB}));
    scale = where(amax != 0.0, 1.0 / iscale, zeros(DType::f32, {NB}));
    qv = minimum(round_half_even(v * expand_dims(iscale, 1)), full({NB, QB}, 127.0, DType::f32));
  }
  auto qi = qv.to(DType::i8);
  store(q + off, qi, expand_dims(bmask, 1));
  // Per 32 elements: the (repeated) scale and the sum of q.
  auto b32 = expand_dims(blk * static_cast<int>(sub), 1) + arange(sub);  // [NB, sub]
  auto m32 = expand_dims(bmask, 1) & (b32 < nblocks);
  store(d + b32, broadcast_to(expand_dims(scale, 1), {NB, sub}), m32);
  auto s32 = sum(reshape(qi.to(DType::i32), {NB, sub, 32}), 2);
  store(sums + b32, s32, m32);
  // The split sums (split_sums.h), of 32 and of 16 codes, and those of 32
  // times -128. Whole groups of 8 blocks per program (Q8_K always, Q8_0
  // from BLOCKS=8) store rows of contiguous bytes; otherwise byte by byte
  // (a scatter). A group holds `per` bytes of a kind from `first`, byte
  // `index` % `per` of them from `bytes` [rows, cols] (i8).
  auto group_store = [&](const Value& bytes, const Value& mask, const Value& index, int64_t per,
                         int64_t first) {
    const int64_t n = bytes.shape()[0] * bytes.shape()[1];
    Value at = (index / static_cast<int>(per)) * static_cast<int>(kSplitSumGroupBytes) +
               static_cast<int>(first) + index % static_cast<int>(per),
          v = bytes, keep = mask;
    if (n % per == 0) {
      auto g = expand_dims(k.program_id(0) * static_cast<int>(n / per) + arange(n / per), 1);
      at = g * static_cast<int>(kSplitSumGroupBytes) + static_cast<int>(first) + arange(per);
      v = reshape(bytes, {n / per, per});
      keep = reshape(mask, {n / per, per});
    }
    store(split + at, v, keep);
  };
  // Sums as low bytes from `first`, then high bytes.
  auto split_store = [&](const Value& block_sums, const Value& mask, const Value& index,
                         int64_t per, int64_t first) {
    group_store((block_sums & 63).to(DType::i8), mask, index, per, first);
    group_store((block_sums >> 6).to(DType::i8), mask, index, per, first + per);
  };
  split_store(s32, m32, b32, 8, split_sum_low_at(0));
  const int64_t sub16 = QB / 16;
  auto g16 = expand_dims(blk * static_cast<int>(sub16), 1) + arange(sub16);  // [NB, sub16]
  auto m16 = expand_dims(bmask, 1) & (g16 < nblocks * 2);
  split_store(sum(reshape(qi.to(DType::i32), {NB, sub16, 16}), 2), m16, g16, 16,
              split_sum16_low_at(0));
  // The i32 sums times -128 as 4 bytes each: byte c of block b is byte
  // 4 b + c of 32 per group.
  auto b4 = reshape(expand_dims(b32 * 4, 2) + arange(4), {NB, sub * 4});
  auto m4 = reshape(broadcast_to(expand_dims(m32, 2), {NB, sub, 4}), {NB, sub * 4});
  group_store((s32 * -128).bitcast(DType::i8), m4, b4, 32, split_sum_neg128_at(0));
  if (QB == 256) {  // a scale block is a group: its sum of 256 codes, 4 bytes
    auto b = reshape(expand_dims(blk * 4, 1) + arange(4), {NB, 4});
    group_store(reshape(sum(s32, 1), {NB, 1}).bitcast(DType::i8),
                broadcast_to(expand_dims(bmask, 1), {NB, 4}), b, 4, split_sum256_at(0));
  }
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "quantize_q8",
    .family = "quant",
    .summary = "x f32 -> 8-bit blocks of 32 (q, scale, sum, sum as bytes), rounded as ggml's "
               "Q8_0 or Q8_K",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCKS", 8}, {"QBLOCK", 32}},
    .build = build_quantize_q8,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t nb = a.i("nblocks"), sub = s.constexpr_("QBLOCK") / 32;
          if (nb % sub)
            throw Error("kernel 'quantize_q8': " + std::to_string(nb * 32) +
                        " elements are not a whole number of " +
                        std::to_string(s.constexpr_("QBLOCK")) + "-element blocks");
          return LaunchShape{
              {cdiv(nb / sub, s.constexpr_("BLOCKS")), 1, 1},
              {{"x", nb * 32}, {"q", nb * 32}, {"d", nb}, {"s", nb}, {"s8", split_sum_bytes(nb)}}};
        },
    // 256 elements per program: 16 f32 vectors stay in registers, where a
    // [8, 256] Q8_K tile spills. kiln tune, 1 thread, 2M elements, cold:
    // QBLOCK=256 at BLOCKS 1 / 2 / 8: 1.23 / 1.61 / 2.11 ms; QBLOCK=32 at
    // BLOCKS 4 / 8 / 16: 1.71 / 1.43 / 1.35 ms.
    .shape_heuristic = [](const Spec& s, const ScalarArgs&) -> std::map<std::string, int64_t> {
      return {{"BLOCKS", std::max<int64_t>(1, 256 / s.constexpr_("QBLOCK"))}};
    },
    .tunables = {{"BLOCKS", {1, 2, 4, 8, 16, 32}}},
    .shape_keys = {"nblocks"},
}));

}  // namespace
}  // namespace kiln
