// The key loop every attention kernel shares: a few query rows and
// their online-softmax state, walking a range of one KV
// head's cache (kv_cache.h) one K block (KB keys) at a time. A row is one
// query vector: a head of a GQA group at one token (the decode kernels),
// or one token of a head (prefill, whose rows differ in the keys they see).
//
// attention_decode walks the whole causal range in one program;
// attention_decode_split (flash-decoding) gives each program one slice of it
// and merges the slices' states afterwards; the prefill kernels
// (prefill_rows.h) walk a block of tokens. All are this loop, so a change to
// how a block is computed reaches every one.
//
// Per block and row: scores against the KB keys are FMAs of the row's q
// (one element at a time, broadcast from memory, so no shuffle) with the
// block's K rows (keys in the lanes), summed in independent chains so
// HEAD_DIM dependent FMAs do not serialise on their latency (over a q8_0
// cache, grouped 8-bit dots of the codes, below). Blocks every row sees
// whole go kChunkKeys keys at a time: their scores are stored to a scratch
// array, one online-softmax step (log2-scaled scores, exp2, running max m
// and sum l) turns them into weights there, and acc = acc * alpha +
// sum_j p_j V_j reads each weight back as a scalar, each V row loaded once
// for all the rows. Only the blocks at the range's ends (and, with per-row
// ranges, those some row sees only in part) are masked, one block a step,
// so cache rows outside the range are never read.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/builder.h"
#include "ir/spec.h"
#include "kernels/attention/kv_cache.h"

namespace kiln {

// The query rows a kernel reads: q in its activation dtype T; with a q8_0
// cache (KV = i8) q's Q8_0 codes instead (i8), llama.cpp's vec_dot pairing
// (its flash attention converts q to the K type's dot type, Q8_0 for
// Q8_0), with per 32 elements the scale q_scale (f32) and the codes' sum
// q_sum (i32), as quantize_q8 (QBLOCK 32) writes them. Scores against a
// q8_0 cache are then exact i32 dots of codes, scaled once per 32 dims.
// Over an AURA cache (KV = u32) q is f32 in the cache's rotated space.
DType query_dtype(const Spec& s);
struct QueryScales {
  std::optional<Buffer> scale{}, sum{};
};
// For a q8_0 cache the buffers q_scale and q_sum, declared after the
// cache's (declare_kv_view); nothing otherwise.
QueryScales declare_query_scales(KernelBuilder& k, const Spec& s);

// What the walk reads.
struct WalkInputs {
  Buffer q;
  KvView kv;         // the cache, its kvh the walk's KV head
  QueryScales q8{};  // a q8_0 cache's
  // Each row's q offset (i64 scalars). A padding row (a head past its
  // group, a token past the prompt) reads a valid row (its caller clamps
  // it) and is simply not stored.
  std::vector<Value> qrow{};
  // Each row's visible keys [lo, hi) (i32 scalars) within walk_keys' range
  // when the rows see different keys (causal prefill); empty when every row
  // sees the whole range.
  std::vector<Value> lo{}, hi{};
  Value qscale;  // f32 scalar: the softmax scale times log2(e)
  int64_t head_dim = 0, key_block = 0, prefetch = 0;
};

// Keys per softmax step of the walk's unmasked blocks.
constexpr int64_t kChunkKeys = 128;

// The rows' running state: m (log2 units) and l f32 scalars; two scratch
// arrays, a step's scores and weights (f32 [rows * kChunkKeys]) and the
// rows' accumulators (f32 [rows * HEAD_DIM], over an AURA cache in its V
// codes' lane order: read them through walk_output).
struct WalkState {
  std::vector<Var> m, l;
  std::optional<Buffer> scratch, acc;
};
// A row's accumulator (f32 [HEAD_DIM]) in natural order.
Value walk_output(const WalkInputs& in, const WalkState& st, size_t row);

// Declares the scratch arrays: once per kernel.
WalkState walk_start(KernelBuilder& k, size_t rows, int64_t head_dim);

// Adds keys [begin, end) of the KV head to the state (each row only those
// in its [lo, hi) when given, which must lie in [begin, end)); an empty
// range adds nothing.
void walk_keys(KernelBuilder& k, const WalkInputs& in, const Value& begin, const Value& end,
               WalkState& st);

// Stores each row's normalised output (with its sink logit, from
// attention_sinks.h's sink_logit, or invalid) into out at its q row,
// rounded to out's dtype, where live[row] (a bool scalar) holds.
void walk_finish(const WalkInputs& in, const WalkState& st, const Buffer& out,
                 const std::vector<Value>& sinks, const std::vector<Value>& live);

// ---- the decode kernels' rows: heads of one GQA group at one token ----

// The scalars every decode kernel declares after its buffers, in this
// order: n_tokens, n_heads, n_kv_heads, max_ctx, kv_len, pos0, scale,
// window (attention_window.h); then a paged cache's parameters
// (kv_cache.h's declare_kv_view) and declare_query_scales'.
struct DecodeScalars {
  Value n_heads, n_kv, max_ctx, kv_len, pos0, scale, window;
  KvView kv;
  QueryScales q8{};
};
DecodeScalars declare_decode_scalars(KernelBuilder& k, const Spec& s, const Buffer& kc,
                                     const Buffer& vc);

// The walk's inputs for the BLOCK_G heads g0, g0 + 1, .. of KV head kvh's
// group at query token t (HEAD_DIM, BLOCK_G and PREFETCH from the spec);
// `heads` receives their head indices, those past the group clamped to its
// last head.
WalkInputs decode_inputs(const Spec& s, const Buffer& q, const DecodeScalars& sc, const Value& kvh,
                         const Value& t, const Value& g0, std::vector<Value>& heads);

// walk_finish for decode_inputs' rows: each head with its sink (from
// sinks, if given); heads past the group (g0 + h >= group) not stored.
void decode_finish(const WalkInputs& in, const WalkState& st, const Buffer& out,
                   const std::optional<Buffer>& sinks, const std::vector<Value>& heads,
                   const Value& g0, const Value& group);

}  // namespace kiln
