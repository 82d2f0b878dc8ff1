// Causal GQA attention for prompt processing, flash-attention style:
// out = softmax(q K^T * scale + causal mask) V per query head, without ever
// materialising the [n_tokens, kv_len] score matrix.
//
// A program owns BLOCK_M consecutive query tokens of one query head and
// streams the cache in blocks of BLOCK_N keys (BLOCK_N divides the K cache's
// block, kv_cache.h): S = Q K^T as `dot`s with 16-dim slices of the
// transposed keys, an online softmax (running row max m and sum l;
// the accumulator is rescaled by exp2(m_old - m_new) as the max grows, with
// log2(e) folded into the scale so exp2 is the only transcendental), and
// acc += P V as `dot`s into 16-column accumulators. Slicing HEAD_DIM keeps
// each dot a tile the CPU holds in registers: a [BLOCK_M, HEAD_DIM]
// accumulator as one tile spills on every key. Row max and row sum fold the
// key axis by halving (lane_fold.h) instead of reducing row by row.
//
// Key blocks visible to every row (after the last row's window start, at
// or before the first row's position) use plain vector loads; the blocks
// before them, from the first row's window start (attention_window.h), and
// after them, up to the last row's position (never past kv_len), are
// masked per row and key, and keys outside the program's range are not
// read. A row that has seen only masked keys keeps m = -inf and subtracts
// 0 instead, so it never computes -inf - -inf (NaN); rows past n_tokens
// (the last block's padding) read zeros and are not stored. With SINKS the
// head's sink joins each row's normalisation (attention_sinks.h).
#include <cmath>
#include <limits>
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/lane_fold.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_attention_prefill(const Spec& s) {
  KernelBuilder k("attention_prefill", s);
  DType KV = s.dtype("KV");
  const int64_t D = s.constexpr_("HEAD_DIM"), BM = s.constexpr_("BLOCK_M"),
                BN = s.constexpr_("BLOCK_N");
  const int64_t kLanes = attention_lanes(s.target), KB = kv_key_block(s.target);
  check_attention_constexprs("attention_prefill", D, kLanes, {{"BLOCK_M", BM}, {"BLOCK_N", BN}});
  check_kv_page("attention_prefill", s);
  if (BN > KB)
    throw Error("kernel 'attention_prefill': BLOCK_N must divide the K cache block of " +
                std::to_string(KB) + " keys, got " + std::to_string(BN));
  const int64_t NC = D / kLanes;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto q = k.buffer("q", DType::f32), kc = k.buffer("k", KV), vc = k.buffer("v", KV),
       out = k.buffer("out", DType::f32);
  auto n_tokens = k.scalar("n_tokens", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32), n_kv = k.scalar("n_kv_heads", DType::i32);
  auto max_ctx = k.scalar("max_ctx", DType::i32);
  auto kv_len = k.scalar("kv_len", DType::i32), pos0 = k.scalar("pos0", DType::i32);
  auto scale = k.scalar("scale", DType::f32);
  auto window = k.scalar("window", DType::i32);
  KvView kv = declare_kv_view(k, s, kc, vc, n_kv, max_ctx);
  auto sinks = declare_sinks(k, s);

  auto t0 = k.program_id(0) * static_cast<int>(BM), h = k.program_id(1);
  auto kvh = h / (n_heads / n_kv);
  kv.kvh = kvh;
  auto toks = t0 + arange(BM);
  auto tmask = expand_dims(toks < n_tokens, 1);  // [BM, 1]
  auto qpos = expand_dims(pos0 + toks, 1);       // [BM, 1]
  auto qlo = window_begin(qpos, window);         // [BM, 1]
  auto qrow = expand_dims((toks * n_heads + h).to(DType::i64) * D, 1);
  auto chunk_off = [&](int64_t c) {  // [BM, kLanes]: q / out columns c*kLanes + 0..kLanes-1
    return qrow + (arange(kLanes) + static_cast<int>(c * kLanes)).to(DType::i64);
  };
  auto qscale = scale * static_cast<float>(M_LOG2E);  // scores come out log2-scaled
  std::vector<Value> qc;
  std::vector<Var> acc;
  for (int64_t c = 0; c < NC; ++c) {
    qc.push_back(load(q + chunk_off(c), tmask, 0.0) * qscale);
    acc.push_back(k.var(zeros(DType::f32, {BM, kLanes})));
  }

  // Keys [lo_last, first) are visible to every row; keys [lo_first, last) to some.
  const int bn = static_cast<int>(BN);
  auto rows_end = minimum(t0 + static_cast<int>(BM), n_tokens);
  auto lo_first = window_begin(pos0 + t0, window);
  auto lo_last = window_begin(pos0 + rows_end - 1, window);
  auto first = minimum(pos0 + t0 + 1, kv_len);
  auto last = minimum(pos0 + rows_end, kv_len);
  auto m = k.var(full({BM}, neg_inf, DType::f32));
  auto l = k.var(zeros(DType::f32, {BM}));

  auto key_block = [&](const Value& j0, bool masked) {
    auto keys = j0 + arange(BN);
    auto kmask = (keys >= lo_first) & (keys < last);
    const Value key_mask = masked ? kmask : Value();
    Value sc = zeros(DType::f32, {BM, BN});
    for (int64_t c = 0; c < NC; ++c)  // the keys lie in one K block: BN divides KB
      sc = dot(qc[c],
               load_k_tile(kv, j0 / static_cast<int>(KB), c * kLanes, kLanes,
                           j0 % static_cast<int>(KB), BN, key_mask),
               sc);
    if (masked) {
      auto k2 = expand_dims(keys, 0);
      auto visible = (k2 <= qpos) & (k2 >= qlo) & expand_dims(kmask, 0);  // [BM, BN]
      sc = where(visible, sc, full({BM, BN}, neg_inf, DType::f32));
    }
    Value m_old = m;
    auto m_new = maximum(m_old, fold_last_axis(sc, Fold::Max));
    auto m_sub = where(m_new > neg_inf, m_new, zeros(DType::f32, {BM}));
    auto alpha = expand_dims(exp2(m_old - m_sub), 1);
    auto p = exp2(sc - expand_dims(m_sub, 1));
    l = l * reshape(alpha, {BM}) + fold_last_axis(p, Fold::Sum);
    m = m_new;
    auto vt = load_v_rows(kv, keys, key_mask);
    for (int64_t c = 0; c < NC; ++c)
      acc[c] = dot(p, slice(vt, {0, c * kLanes}, {BN, kLanes}), acc[c] * alpha);
  };
  // Masked from lo_first's block up to the first block wholly after
  // lo_last, plain up to first's block, masked from there to last.
  auto start = lo_first - lo_first % bn;
  auto plain = lo_last + (bn - lo_last % bn) % bn;
  auto full_end = first - first % bn;
  k.for_(start, minimum(plain, last), BN, [&](Value j0) { key_block(j0, true); });
  k.for_(plain, full_end, BN, [&](Value j0) { key_block(j0, false); });
  k.for_(maximum(full_end, plain), last, BN, [&](Value j0) { key_block(j0, true); });

  auto inv = expand_dims(softmax_normaliser(m, l, sink_logit(sinks, h)), 1);
  for (int64_t c = 0; c < NC; ++c) store(out + chunk_off(c), acc[c] * inv, tmask);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_prefill",
    .family = "attention",
    .summary = "causal GQA flash attention of a block of query tokens over a KV cache",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::f32}}},
    .constexpr_defaults =
        {{"HEAD_DIM", 128}, {"BLOCK_M", 4}, {"BLOCK_N", 8}, {"SINKS", 0}, {"PAGE", 0}},
    .build = build_attention_prefill,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          AttentionSizes z = attention_sizes("attention_prefill", s, a);
          return LaunchShape{{cdiv(z.n_tokens, s.constexpr_("BLOCK_M")), z.n_heads, 1},
                             z.buffer_elems()};
        },
    // Measured defaults per target are in runtime/tuning/<class>.toml (on
    // AVX-512, BLOCK_N 16 at HEAD_DIM 64); BLOCK_N 8 fits every target's
    // key block.
    .tunables = {{"BLOCK_M", {4, 8, 16, 32}}, {"BLOCK_N", {4, 8, 16}}},
    .shape_keys = {"n_tokens", "kv_len", "n_heads"},
    // f32 dot products over HEAD_DIM, the vector exp2 (~2.5e-7 relative) and
    // f32 sums over kv_len, reassociated against the interpreter by FMA
    // contraction and the block sizes.
    .rtol = 1e-4,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
