// The tile block strategy of attention: a [rows, HEAD_DIM] query tile
// against one K block (KB keys, kv_cache.h) at a time, as two tile dots:
//   scores = dot(q, K^T)   [rows, KB]
//   acc    = dot(P, V) + acc * alpha   [rows, HEAD_DIM]
// with the online softmax (log2-scaled, running max m and sum l per row) in
// between. It is the strategy for machines with matrix units: on a GPU both
// dots are mma.sync m16n8k16 (f16, bf16) with f32 accumulators, and the
// rows a multiple of 16 fill the mma's M. Over a q8_0 cache the scores are
// one int8 dot per 32 dims (mma.sync m16n8k32) of q's Q8_0 codes with the
// keys' codes, exact in i32 as the walk's, each scaled by the two blocks'
// scales; P V takes the V rows decoded and rounded to f16. kv_walk.h is the
// CPU's strategy for the same cache view (vector FMAs with keys in the
// lanes).
//
// attention_prefill_tiles (a block of query tokens of one head) and
// attention_decode_tiles (a GQA group's heads at one token, one slice of
// the keys) are this loop body with their own rows and masks. As
// FlashAttention does, q is rounded to the cache's dtype before the scores
// and the weights P before P V: relative errors of 2^-11 (f16) or 2^-8
// (bf16) per product, against the walk's f32 products (over a q8_0 cache q
// is not rounded, and P and the V rows are rounded to f16).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/builder.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/kv_walk.h"

namespace kiln {

// The rows' online-softmax state: m (log2 units), l [rows] and the
// unnormalised output acc [rows, HEAD_DIM], all f32.
struct TileState {
  Var m, l, acc;
};
TileState tile_start(KernelBuilder& k, int64_t rows, int64_t head_dim);

// The query rows as the score dot's left operand: q [rows, HEAD_DIM] at
// q + row_off[r] (i64 [rows]) times scale * log2(e), rounded to the
// cache's dtype. For a q8_0 cache (q8: q's scales, kv_walk.h) q's codes
// stay in memory: tile_block reads them 32 dims at a time, in a loop, with
// their scales times `log2_scale`.
struct TileQuery {
  Value tile;  // the rounded [rows, HEAD_DIM] tile; invalid for a q8_0 cache
  Buffer q;
  QueryScales q8;
  Value row_off, log2_scale;
};
TileQuery tile_query(const Buffer& q, const QueryScales& q8, const Value& row_off, int64_t head_dim,
                     const Value& scale, DType kv);

// Adds K block `block` (i32 scalar) of kv's head to the state: keys where
// `stored` ([KB] bool) holds are read (the others load as 0 and must be
// masked), and a row weights only the keys where `visible` ([rows, KB]
// bool) holds. A row that has seen no key keeps m = -inf and weights 0,
// not NaN.
void tile_block(KernelBuilder& k, const KvView& kv, const TileQuery& q, const Value& block,
                const Value& stored, const Value& visible, TileState& st);

}  // namespace kiln
