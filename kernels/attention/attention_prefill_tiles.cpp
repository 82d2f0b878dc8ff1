// Causal GQA flash attention of a block of query tokens as tile dots: the
// block strategy for machines with matrix units, where attention_prefill's
// walk (kv_walk.h) is scheduled for a CPU's vector registers. The cuda
// kernel policy runs it over f16 and bf16 caches (runtime/cuda/cuda_policy.h).
//
// A program holds BLOCK_M query tokens of one head as a [BLOCK_M, HEAD_DIM]
// tile in the cache's dtype and walks the keys one K block (KB keys,
// kv_cache.h) at a time through the same cache view as the walk: the block's
// K^T [HEAD_DIM, KB] is one contiguous tile of the transposed K layout and
// its V rows [KB, HEAD_DIM] another. Scores are dot(q, K^T) and the output
// dot(P, V), so on a GPU both are mma.sync m16n8k16 (f16, bf16) with f32
// accumulators, the online softmax (log2-scaled, running max m and sum l per
// row) in between. As FlashAttention does, q is rounded to the cache's dtype
// before the scores and the weights P before P V: relative errors of 2^-11
// (f16) or 2^-8 (bf16) per product, against the walk's f32 products.
// Windows and sinks mask and normalise as every attention kernel does; a
// paged cache is addressed through its block table.
#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/prefill_rows.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_attention_prefill_tiles(const Spec& s) {
  KernelBuilder k("attention_prefill_tiles", s);
  check_prefill_constexprs("attention_prefill_tiles", s);
  const DType KV = s.dtype("KV"), T = s.dtype("T");
  const int64_t D = s.constexpr_("HEAD_DIM"), BM = s.constexpr_("BLOCK_M");
  const int64_t KB = kv_key_block(s.target);
  const PrefillInputs in = declare_prefill_params(k, s, T);
  const Value sink = sink_logit(declare_sinks(k, s), in.head);
  const KvView& kv = in.kv;
  const Value &n_tokens = in.n_tokens, &n_heads = in.n_heads, &kv_len = in.kv_len, &pos0 = in.pos0,
              &window = in.window, &h = in.head, &t0 = in.t0;

  // The block's rows: token t0 + r (a padding row past the prompt reads the
  // last token and is not stored), its position and its visible keys.
  auto row = t0 + arange(BM);
  auto live = row < broadcast_to(n_tokens, {BM});
  auto tok = minimum(row, broadcast_to(n_tokens - 1, {BM}));
  auto pos = broadcast_to(pos0, {BM}) + tok;
  auto lo = expand_dims(window_begin(pos, window), 1);
  auto hi = expand_dims(minimum(pos + 1, broadcast_to(kv_len, {BM})), 1);
  auto qoff = expand_dims(((tok * n_heads + broadcast_to(h, {BM})).to(DType::i64) * D), 1) +
              expand_dims(arange(D).to(DType::i64), 0);
  auto qt = (load(in.q + qoff).to(DType::f32) * (in.scale * static_cast<float>(M_LOG2E))).to(KV);

  const double inf = std::numeric_limits<double>::infinity();
  auto m = k.var(full({BM}, -inf, DType::f32));
  auto l = k.var(zeros(DType::f32, {BM}));
  auto acc = k.var(zeros(DType::f32, {BM, D}));
  // The keys any row sees: from the first row's window to the last row's
  // position; rows see both ends grow with their positions.
  auto last = minimum(t0 + static_cast<int>(BM), n_tokens) - 1;
  auto first_key = window_begin(pos0 + t0, window);
  auto end_key = minimum(pos0 + last + 1, kv_len);
  auto zero_lane = zeros(DType::i32, {});
  k.for_(first_key / static_cast<int>(KB),
         (end_key + static_cast<int>(KB - 1)) / static_cast<int>(KB), 1, [&](Value block) {
           auto first = block * static_cast<int>(KB);
           auto keys = broadcast_to(first, {KB}) + arange(KB);
           // Only keys some row sees are read: past them lie a block's padding and
           // rows no query of the program may weight (0 * NaN would reach P V).
           auto stored =
               (keys >= broadcast_to(first_key, {KB})) & (keys < broadcast_to(end_key, {KB}));
           auto kt = load(kv.k + k_tile_offsets(kv, block, 0, D, zero_lane, KB),
                          broadcast_to(expand_dims(stored, 0), {D, KB}), 0.0);
           auto scores = dot(qt, kt, zeros(DType::f32, {BM, KB}));
           auto key_row = expand_dims(keys, 0);
           auto visible = (key_row >= lo) & (key_row < hi);
           scores = where(visible, scores, full({BM, KB}, -inf, DType::f32));
           auto m_new = maximum(m.get(), max(scores, 1));
           // A row that has seen no key keeps m = -inf; its weights are then 0,
           // not NaN.
           auto base = where(m_new > full({BM}, -inf, DType::f32), m_new, zeros(DType::f32, {BM}));
           auto p = exp2(scores - expand_dims(base, 1));
           auto alpha = exp2(m.get() - base);
           l = l.get() * alpha + sum(p, 1);
           auto vt = load(kv.v + v_tile_offsets(kv, first, KB),
                          broadcast_to(expand_dims(stored, 1), {KB, D}), 0.0);
           acc = dot(p.to(KV), vt, acc.get() * expand_dims(alpha, 1));
           m = m_new;
         });
  auto norm = softmax_normaliser(m.get(), l.get(), sink);
  store(in.out + qoff, (acc.get() * expand_dims(norm, 1)).to(T),
        broadcast_to(expand_dims(live, 1), {BM, D}));
  return k.finish();
}
KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_prefill_tiles",
    .family = "attention",
    .summary = "causal GQA flash attention of a block of query tokens as tile dots (mma on GPUs)",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16}}, kActivationRole},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"BLOCK_M", 16}, {"SINKS", 0}, {"PAGE", 0}},
    .build = build_attention_prefill_tiles,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          return prefill_launch_shape("attention_prefill_tiles", s, a);
        },
    .tunables = {{"BLOCK_M", {16, 32, 64}}},
    .shape_keys = {"n_tokens", "kv_len", "n_heads"},
    // q and the weights P rounded to the cache's dtype (f16: 2^-11
    // relative, bf16: 2^-8) before their dots, which accumulate in f32.
    // Against the interpreter (the same roundings) the reassociated scores
    // may round a weight the other way: the output then moves by 2^-11 of
    // that weight times its V row.
    .rtol = 1e-3,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
