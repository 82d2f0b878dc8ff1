// The key loop every decode attention kernel shares: BLOCK_G query heads of
// one GQA group, their online-softmax state in registers, walking a range
// of one KV head's cache (kv_cache.h) one K block (KB keys) at a time.
//
// attention_decode walks the whole causal range in one program;
// attention_decode_split (flash-decoding) gives each program one slice of it
// and merges the slices' states afterwards. Both are this loop, so a change
// to how a block is computed reaches both.
//
// Per block and head: scores against the KB keys are FMAs of the head's q
// (one element at a time, broadcast from memory, so no shuffle) with the
// block's K rows (keys in the lanes), summed in kScoreParts independent
// chains so HEAD_DIM dependent FMAs do not serialise on their latency; then
// the online softmax (log2-scaled scores, exp2, running max m and sum l)
// and acc = acc * alpha + sum_j p_j V_j, each V row loaded once for all the
// heads. Blocks wholly inside the range use plain loads; only the partial
// blocks at its ends are masked, so cache rows outside it are never read.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/builder.h"
#include "ir/spec.h"
#include "kernels/attention/kv_cache.h"

namespace kiln {

// What the walk reads.
struct DecodeInputs {
  Buffer q;
  KvView kv;  // the cache, its kvh the walk's KV head
  // Each head's q row offset (i64 scalars). A head past its group reads a
  // valid row (its caller clamps it) and is simply not stored.
  std::vector<Value> qrow;
  Value qscale;  // f32 scalar: the softmax scale times log2(e)
  int64_t head_dim = 0, key_block = 0, prefetch = 0;
};

// The scalars every decode kernel declares after its buffers, in this
// order: n_tokens, n_heads, n_kv_heads, max_ctx, kv_len, pos0, scale,
// window (attention_window.h); then a paged cache's parameters
// (kv_cache.h's declare_kv_view).
struct DecodeScalars {
  Value n_heads, n_kv, max_ctx, kv_len, pos0, scale, window;
  KvView kv;
};
DecodeScalars declare_decode_scalars(KernelBuilder& k, const Spec& s, const Buffer& kc,
                                     const Buffer& vc);

// The walk's inputs for the BLOCK_G heads g0, g0 + 1, .. of KV head kvh's
// group at query token t (HEAD_DIM, BLOCK_G and PREFETCH from the spec);
// `heads` receives their head indices, those past the group clamped to its
// last head.
DecodeInputs decode_inputs(const Spec& s, const Buffer& q, const DecodeScalars& sc,
                           const Value& kvh, const Value& t, const Value& g0,
                           std::vector<Value>& heads);

// The heads' running state: m (log2 units) and l f32 scalars, acc f32 [HEAD_DIM].
struct DecodeState {
  std::vector<Var> m, l, acc;
};

DecodeState decode_start(KernelBuilder& k, size_t heads, int64_t head_dim);

// Stores each head's normalised output (with its sink, attention_sinks.h)
// into out at its q row, rounded to out's dtype; heads past the group
// (g0 + h >= group) are not stored.
void decode_finish(const DecodeInputs& in, const DecodeState& st, const Buffer& out,
                   const std::optional<Buffer>& sinks, const std::vector<Value>& heads,
                   const Value& g0, const Value& group);

// Adds keys [begin, end) of the KV head to the state; an empty range (end
// <= begin) adds nothing. Only the blocks holding begin and end are masked.
void decode_keys(KernelBuilder& k, const DecodeInputs& in, const Value& begin, const Value& end,
                 DecodeState& st);

}  // namespace kiln
