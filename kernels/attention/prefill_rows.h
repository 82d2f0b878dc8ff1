// The body every prefill attention program shares: BLOCK_M consecutive
// query tokens of one sequence and one query head against that sequence's
// cache, flash-attention style: out = softmax(q K^T * scale + mask) V
// without ever materialising the [n_tokens, kv_len] score matrix.
//
// attention_prefill runs it for one sequence; attention_prefill_varlen for
// each sequence of a packed batch, so a change to how a block is computed
// reaches both.
//
// The program's rows are its tokens, walked over the cache by kv_walk.h
// (the decode kernels' loop): token t sees keys [window_begin(pos0 + t),
// min(pos0 + t + 1, kv_len)) (attention_window.h), so only the blocks on
// the rows' causal diagonal and window edge are masked, per row and key,
// and keys no row sees are not read. The rows share each K and V load; q is
// broadcast from memory, so the score FMAs need no shuffles. Rows past
// n_tokens (the last block's padding) repeat the last token and are not
// stored. A sink (attention_sinks.h) joins each row's normalisation.
#pragma once

#include "ir/builder.h"
#include "ir/spec.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/kv_walk.h"
#include "kernels/registry.h"

namespace kiln {

struct PrefillInputs {
  Buffer q;        // [rows, n_heads, HEAD_DIM] (kv_walk.h's query_dtype)
  QueryScales q8;  // a q8_0 cache's
  Buffer out;      // [rows, n_heads, HEAD_DIM]
  KvView kv;       // the sequence's cache, kvh the head's KV head
  // i32 scalars: the q/out row of the sequence's token 0, its query
  // tokens, the position of token 0, the rows its cache holds, the sliding
  // window, the head, the heads per row and the program's first token.
  Value row0, n_tokens, pos0, kv_len, window, head, n_heads, t0;
  Value scale;  // f32: the softmax scale
  Value sink;   // the head's sink_logit, or invalid
};

// HEAD_DIM and BLOCK_M from the spec; throws kiln::Error naming `kernel`
// for constexprs it cannot build.
void check_prefill_constexprs(const std::string& kernel, const Spec& s);

// The parameters of a one-sequence prompt attention kernel (attention_prefill,
// attention_prefill_tiles), declared in the order ops::attention binds them
// by name: q (q_dtype), k, v, out, the scalars n_tokens, n_heads,
// n_kv_heads, max_ctx, kv_len, pos0, scale and window, then the cache
// view's (declare_kv_view; its kvh set from program_id(1), the query head).
// Its row0 is 0 and t0 the program's first token; q8 and sink are left to
// the kernel, which declares them after.
PrefillInputs declare_prefill_params(KernelBuilder& k, const Spec& s, DType q_dtype);
// Their launch: a program per BLOCK_M tokens and query head.
LaunchShape prefill_launch_shape(const std::string& kernel, const Spec& s, const ScalarArgs& a);

// Attends the program's BLOCK_M tokens and stores their rows of out.
void prefill_rows(KernelBuilder& k, const Spec& s, const PrefillInputs& in);

}  // namespace kiln
