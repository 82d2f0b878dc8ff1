// The tile block strategy of attention: a [rows, HEAD_DIM] query tile
// against one K block (KB keys, kv_cache.h) at a time, as two tile dots:
//   scores = dot(q, K^T)   [rows, KB]
//   acc    = dot(P, V) + acc * alpha   [rows, HEAD_DIM]
// with the online softmax (log2-scaled, running max m and sum l per row) in
// between. It is the strategy for machines with matrix units: on a GPU both
// dots are mma.sync m16n8k16 (f16, bf16) with f32 accumulators, and the
// rows a multiple of 16 fill the mma's M. kv_walk.h is the CPU's strategy
// for the same cache view (vector FMAs with keys in the lanes).
//
// attention_prefill_tiles (a block of query tokens of one head) and
// attention_decode_tiles (a GQA group's heads at one token, one slice of
// the keys) are this loop body with their own rows and masks. As
// FlashAttention does, q is rounded to the cache's dtype before the scores
// and the weights P before P V: relative errors of 2^-11 (f16) or 2^-8
// (bf16) per product, against the walk's f32 products.
#pragma once

#include <cstdint>

#include "ir/builder.h"
#include "kernels/attention/kv_cache.h"

namespace kiln {

// The rows' online-softmax state: m (log2 units), l [rows] and the
// unnormalised output acc [rows, HEAD_DIM], all f32.
struct TileState {
  Var m, l, acc;
};
TileState tile_start(KernelBuilder& k, int64_t rows, int64_t head_dim);

// q [rows, HEAD_DIM] (f32, unscaled) times scale * log2(e), rounded to the
// cache's dtype: the score dot's left operand.
Value tile_query(const Value& q, const Value& scale, DType kv);

// Adds K block `block` (i32 scalar) of kv's head to the state: keys where
// `stored` ([KB] bool) holds are read (the others load as 0 and must be
// masked), and a row weights only the keys where `visible` ([rows, KB]
// bool) holds. A row that has seen no key keeps m = -inf and weights 0,
// not NaN.
void tile_block(const KvView& kv, const Value& qt, const Value& block, const Value& stored,
                const Value& visible, TileState& st);

}  // namespace kiln
