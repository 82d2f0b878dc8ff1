// Causal GQA attention for token generation: each query token against the
// KV cache, out = softmax(q K^T * scale + causal mask) V per query head.
//
// Every token streams the whole cache, and all query heads of a GQA group
// read the same K/V rows, so a program owns one KV head, one token and
// BLOCK_G of the heads that share it, and walks the cache one K block
// (KB keys, kv_cache.h) at a time with the state of all its heads in
// registers: the scores S [BLOCK_G, KB] are `dot`s of the heads' q
// with the block's transposed keys, 16 dims at a time (keys in the lanes, so
// no per-key reduction, and each K row is loaded once for all heads); then
// an online softmax per head (running max m and sum l, exp2 with log2(e)
// folded into the scale) and acc = acc * alpha + P V, a
// [BLOCK_G, KB] x [KB, HEAD_DIM] `dot` over whole V rows. The
// accumulator is [BLOCK_G, HEAD_DIM]: BLOCK_G * HEAD_DIM / 16 registers on
// AVX-512, which bounds BLOCK_G (the heuristic keeps it within 16 of 32).
//
// Blocks inside the causal limit use plain vector loads; only the last,
// partial block is masked. Each full block first prefetches the block
// PREFETCH blocks ahead (kv_cache.h's prefetch_kv_block): the cache comes
// from DRAM, evicted by the weights since the last token, and a block's
// compute is too long for the hardware prefetchers to run ahead of it
// (kiln bench, 32x4x64 heads, 2048 keys, 2 threads: 0.33 -> 0.17-0.23 ms).
// Token t sees keys [0, min(pos0 + t + 1, kv_len)),
// so n_tokens > 1 works, each token on its own. Heads past the group (the
// last program's padding) read zeros and are not stored.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/lane_fold.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_attention_decode(const Spec& s) {
  KernelBuilder k("attention_decode", s);
  DType KV = s.dtype("KV");
  const int64_t D = s.constexpr_("HEAD_DIM"), BG = s.constexpr_("BLOCK_G"),
                KB = kv_key_block(s.target), PF = s.constexpr_("PREFETCH"),
                kLanes = attention_lanes(s.target);
  check_attention_constexprs("attention_decode", D, kLanes, {{"BLOCK_G", BG}});
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto q = k.buffer("q", DType::f32), kc = k.buffer("k", KV), vc = k.buffer("v", KV),
       out = k.buffer("out", DType::f32);
  k.scalar("n_tokens", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32), n_kv = k.scalar("n_kv_heads", DType::i32);
  auto max_ctx = k.scalar("max_ctx", DType::i32);
  auto kv_len = k.scalar("kv_len", DType::i32), pos0 = k.scalar("pos0", DType::i32);
  auto scale = k.scalar("scale", DType::f32);

  // The programs of one KV head are adjacent in the grid, so its cache comes
  // from DRAM once and is still in cache for the next of them.
  auto kvh = k.program_id(1), t = k.program_id(2);
  auto group = n_heads / n_kv;
  auto g0 = k.program_id(0) * static_cast<int>(BG);
  auto heads = arange(BG);
  auto hmask = expand_dims(heads < group - g0, 1);  // [BG, 1]: heads of this program
  auto qrow = expand_dims((t * n_heads + kvh * group + g0 + heads).to(DType::i64) * D, 1);
  auto cols = [&](int64_t c0, int64_t n) {  // [1, n]
    return expand_dims(arange(n).to(DType::i64) + c0, 0);
  };
  auto limit = minimum(pos0 + t + 1, kv_len);  // keys [0, limit)
  auto qscale = scale * static_cast<float>(M_LOG2E);

  auto m = k.var(full({BG}, neg_inf, DType::f32));
  auto l = k.var(zeros(DType::f32, {BG}));
  auto acc = k.var(zeros(DType::f32, {BG, D}));

  auto key_block = [&](const Value& j0, bool masked) {
    auto keys = j0 + arange(KB);
    auto kmask = keys < limit;
    auto block = j0 / static_cast<int>(KB);
    Value sc = zeros(DType::f32, {BG, KB});
    const Value key_mask = masked ? kmask : Value();
    for (int64_t c = 0; c < D; c += kLanes) {
      auto kt = load_k_tile(kc, kvh, max_ctx, block, D, KB, c, kLanes, zeros(DType::i32, {}), KB,
                            key_mask);
      sc = dot(load(q + qrow + cols(c, kLanes), broadcast_to(hmask, {BG, kLanes}), 0.0), kt, sc);
    }
    sc = sc * qscale;  // log2-scaled scores
    if (masked)
      sc = where(broadcast_to(expand_dims(kmask, 0), {BG, KB}), sc,
                 full({BG, KB}, neg_inf, DType::f32));
    Value m_old = m;
    auto m_new = maximum(m_old, fold_last_axis(sc, Fold::Max));
    // A head that has seen only masked keys keeps m = -inf; subtracting 0
    // instead keeps exp2 away from -inf - -inf (NaN).
    auto m_sub = where(m_new > neg_inf, m_new, zeros(DType::f32, {BG}));
    auto alpha = exp2(m_old - m_sub);
    auto p = exp2(sc - expand_dims(m_sub, 1));
    l = l * alpha + fold_last_axis(p, Fold::Sum);
    m = m_new;
    auto vt = load_v_rows(vc, kvh, max_ctx, keys, D, key_mask);
    acc = dot(p, vt, acc * expand_dims(alpha, 1));
  };
  auto full_end = limit - limit % static_cast<int>(KB);
  k.for_(0, full_end, KB, [&](Value j0) {
    if (PF > 0)
      prefetch_kv_block(kc, vc, kvh, max_ctx, j0 / static_cast<int>(KB) + static_cast<int>(PF), D,
                        KB);
    key_block(j0, false);
  });
  k.if_(full_end < limit, [&] { key_block(full_end, true); });

  Value lv = l;
  auto inv = expand_dims(where(lv > 0.0f, 1.0f / lv, zeros(DType::f32, {BG})), 1);
  store(out + qrow + cols(0, D), acc * inv, broadcast_to(hmask, {BG, D}));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_decode",
    .family = "attention",
    .summary = "causal GQA attention of few tokens over a KV cache, K/V blocks shared by a group",
    .dtype_roles = {{"KV", {DType::f16, DType::f32}}},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"BLOCK_G", 2}, {"PREFETCH", 1}},
    .build = build_attention_decode,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          AttentionSizes z = attention_sizes("attention_decode", s, a);
          return LaunchShape{{cdiv(z.group, s.constexpr_("BLOCK_G")), z.n_kv_heads, z.n_tokens},
                             z.buffer_elems()};
        },
    // The accumulator of BLOCK_G heads stays within half the vector
    // registers (on AVX-512, BLOCK_G * HEAD_DIM <= 16 x 16 f32), and no
    // wider than the group.
    .shape_heuristic = [](const Spec& s, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      const int64_t regs = s.target.vector_registers / 2 * s.target.lanes(DType::f32);
      int64_t bg = std::max<int64_t>(1, regs / s.constexpr_("HEAD_DIM")), group = 1;
      while (group < a.i("n_heads") / std::max<int64_t>(1, a.i("n_kv_heads"))) group *= 2;
      return {{"BLOCK_G", std::min(bg, group)}};
    },
    // PREFETCH pays only when the cache comes from DRAM, as in a forward
    // and in kiln tune's cold timing (kiln bench, 32x4x64 heads, 2048
    // keys: 0.347 ms without, 0.177 with); on a warm cache it only costs
    // (0.127 ms without, 0.149 with).
    .tunables = {{"BLOCK_G", {1, 2, 4, 8}}, {"PREFETCH", {0, 1, 2}}},
    .shape_keys = {"kv_len", "n_heads", "n_kv_heads"},
    // f32 dot products over HEAD_DIM, the vector exp2 (~2.5e-7 relative) and
    // f32 sums over kv_len; reassociated against the interpreter by the
    // lane tree and FMA contraction.
    .rtol = 1e-4,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
