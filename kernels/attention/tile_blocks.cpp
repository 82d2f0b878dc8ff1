#include "kernels/attention/tile_blocks.h"

#include <cmath>
#include <limits>

namespace kiln {

TileState tile_start(KernelBuilder& k, int64_t rows, int64_t head_dim) {
  const double inf = std::numeric_limits<double>::infinity();
  return {k.var(full({rows}, -inf, DType::f32)), k.var(zeros(DType::f32, {rows})),
          k.var(zeros(DType::f32, {rows, head_dim}))};
}

TileQuery tile_query(const Buffer& q, const QueryScales& q8, const Value& row_off, int64_t head_dim,
                     const Value& scale, DType kv) {
  TileQuery t{{}, q, q8, row_off, scale * static_cast<float>(M_LOG2E)};
  if (!is_quantized_kv(kv)) {
    auto at = expand_dims(row_off, 1) + expand_dims(arange(head_dim).to(DType::i64), 0);
    t.tile = (load(q + at).to(DType::f32) * t.log2_scale).to(kv);
  }
  return t;
}

void tile_block(KernelBuilder& k, const KvView& kv, const TileQuery& q, const Value& block,
                const Value& stored, const Value& visible, TileState& st) {
  const int64_t rows = q.row_off.shape()[0], D = kv.head_dim, KB = kv.key_block;
  const double inf = std::numeric_limits<double>::infinity();
  const bool q8 = !q.tile.valid();
  Value scores;
  if (q8) {
    // One int8 dot per 32 dims, in a loop: unrolled, the CUDA C grew with
    // HEAD_DIM / 32 (to 100 KB at 256). Masked keys read codes and scales
    // of 0: their scores are masked below.
    const int QB = static_cast<int>(kKvQuantBlock);
    auto acc = k.var(zeros(DType::f32, {rows, KB}));
    k.for_(0, static_cast<int>(D / QB), 1, [&](Value g) {
      auto at = expand_dims(q.row_off + (g * QB).to(DType::i64), 1) +
                expand_dims(arange(QB).to(DType::i64), 0);
      auto qs = load(*q.q8.scale + (q.row_off / static_cast<int64_t>(QB) + g.to(DType::i64))) *
                q.log2_scale;
      auto codes = load_k_rows(kv, block, g * QB, QB, stored);
      auto dots = dot(load(q.q + at), codes, zeros(DType::i32, {rows, KB})).to(DType::f32);
      auto ks = load_k_scales(kv, block, g, stored);
      acc = acc.get() + dots * expand_dims(qs, 1) * broadcast_to(ks, {rows, KB});
    });
    scores = acc.get();
  } else {
    auto kt = load(kv.k + k_tile_offsets(kv, block, 0, D, zeros(DType::i32, {}), KB),
                   broadcast_to(expand_dims(stored, 0), {D, KB}), 0.0);
    scores = dot(q.tile, kt, zeros(DType::f32, {rows, KB}));
  }
  scores = where(visible, scores, full({rows, KB}, -inf, DType::f32));
  auto m_new = maximum(st.m.get(), max(scores, 1));
  auto base = where(m_new > full({rows}, -inf, DType::f32), m_new, zeros(DType::f32, {rows}));
  auto p = exp2(scores - expand_dims(base, 1));
  auto alpha = exp2(st.m.get() - base);
  st.l = st.l.get() * alpha + sum(p, 1);
  auto first_key = block * static_cast<int>(KB);
  // P V in the cache's dtype, or f16 over the decoded rows of a q8_0 cache.
  auto vt = q8 ? load_v_rows(kv, first_key, KB, stored).to(DType::f16)
               : load(kv.v + v_tile_offsets(kv, first_key, KB),
                      broadcast_to(expand_dims(stored, 1), {KB, D}), 0.0);
  st.acc = dot(p.to(vt.dtype()), vt, st.acc.get() * expand_dims(alpha, 1));
  st.m = m_new;
}

}  // namespace kiln
