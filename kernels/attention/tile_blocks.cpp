#include "kernels/attention/tile_blocks.h"

#include <cmath>
#include <limits>

namespace kiln {

TileState tile_start(KernelBuilder& k, int64_t rows, int64_t head_dim) {
  const double inf = std::numeric_limits<double>::infinity();
  return {k.var(full({rows}, -inf, DType::f32)), k.var(zeros(DType::f32, {rows})),
          k.var(zeros(DType::f32, {rows, head_dim}))};
}

Value tile_query(const Value& q, const Value& scale, DType kv) {
  return (q * (scale * static_cast<float>(M_LOG2E))).to(kv);
}

void tile_block(const KvView& kv, const Value& qt, const Value& block, const Value& stored,
                const Value& visible, TileState& st) {
  const int64_t rows = qt.shape()[0], D = kv.head_dim, KB = kv.key_block;
  const double inf = std::numeric_limits<double>::infinity();
  auto kt = load(kv.k + k_tile_offsets(kv, block, 0, D, zeros(DType::i32, {}), KB),
                 broadcast_to(expand_dims(stored, 0), {D, KB}), 0.0);
  auto scores = dot(qt, kt, zeros(DType::f32, {rows, KB}));
  scores = where(visible, scores, full({rows, KB}, -inf, DType::f32));
  auto m_new = maximum(st.m.get(), max(scores, 1));
  auto base = where(m_new > full({rows}, -inf, DType::f32), m_new, zeros(DType::f32, {rows}));
  auto p = exp2(scores - expand_dims(base, 1));
  auto alpha = exp2(st.m.get() - base);
  st.l = st.l.get() * alpha + sum(p, 1);
  auto vt = load(kv.v + v_tile_offsets(kv, block * static_cast<int>(KB), KB),
                 broadcast_to(expand_dims(stored, 1), {KB, D}), 0.0);
  st.acc = dot(p.to(kt.dtype()), vt, st.acc.get() * expand_dims(alpha, 1));
  st.m = m_new;
}

}  // namespace kiln
