#include "kernels/attention/prefill_rows.h"

#include <cmath>
#include <limits>
#include <vector>

#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/lane_fold.h"

namespace kiln {

void check_prefill_constexprs(const std::string& kernel, const Spec& s) {
  const int64_t BN = s.constexpr_("BLOCK_N"), KB = kv_key_block(s.target);
  check_attention_constexprs(kernel, s.constexpr_("HEAD_DIM"), attention_lanes(s.target),
                             {{"BLOCK_M", s.constexpr_("BLOCK_M")}, {"BLOCK_N", BN}});
  check_kv_layout(kernel, s);
  if (BN > KB)
    throw Error("kernel '" + kernel + "': BLOCK_N must divide the K cache block of " +
                std::to_string(KB) + " keys, got " + std::to_string(BN));
}

void prefill_rows(KernelBuilder& k, const Spec& s, const PrefillInputs& in) {
  const int64_t D = s.constexpr_("HEAD_DIM"), BM = s.constexpr_("BLOCK_M"),
                BN = s.constexpr_("BLOCK_N");
  const int64_t kLanes = attention_lanes(s.target), KB = kv_key_block(s.target);
  const int64_t NC = D / kLanes;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const Value &t0 = in.t0, &h = in.head, &n_tokens = in.n_tokens, &pos0 = in.pos0,
              &kv_len = in.kv_len, &window = in.window;
  const KvView& kv = in.kv;
  auto toks = t0 + arange(BM);
  auto tmask = expand_dims(toks < n_tokens, 1);  // [BM, 1]
  auto qpos = expand_dims(pos0 + toks, 1);       // [BM, 1]
  auto qlo = window_begin(qpos, window);         // [BM, 1]
  auto qrow = expand_dims(((in.row0 + toks) * in.n_heads + h).to(DType::i64) * D, 1);
  auto chunk_off = [&](int64_t c) {  // [BM, kLanes]: q / out columns c*kLanes + 0..kLanes-1
    return qrow + (arange(kLanes) + static_cast<int>(c * kLanes)).to(DType::i64);
  };
  auto qscale = in.scale * static_cast<float>(M_LOG2E);  // scores come out log2-scaled
  std::vector<Value> qc;
  std::vector<Var> acc;
  for (int64_t c = 0; c < NC; ++c) {
    qc.push_back(load(in.q + chunk_off(c), tmask, 0.0).to(DType::f32) * qscale);
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
    auto vt = load_v_rows(kv, j0, BN, key_mask);
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

  auto inv = expand_dims(softmax_normaliser(m, l, in.sink), 1);
  for (int64_t c = 0; c < NC; ++c)
    store(in.out + chunk_off(c), (acc[c] * inv).to(in.out.dtype()), tmask);
}

}  // namespace kiln
