// The body every prefill attention program shares: BLOCK_M consecutive
// query tokens of one sequence and one query head against that sequence's
// cache, flash-attention style: out = softmax(q K^T * scale + mask) V
// without ever materialising the [n_tokens, kv_len] score matrix.
//
// attention_prefill runs it for one sequence; attention_prefill_varlen for
// each sequence of a packed batch, so a change to how a block is computed
// reaches both.
//
// The program streams the cache in blocks of BLOCK_N keys (BLOCK_N divides
// the K cache's block, kv_cache.h): S = Q K^T as `dot`s with 16-dim slices
// of the transposed keys, an online softmax (running row max m and sum l;
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
// (the last block's padding) read zeros and are not stored. A sink
// (attention_sinks.h) joins each row's normalisation.
#pragma once

#include "ir/builder.h"
#include "ir/spec.h"
#include "kernels/attention/kv_cache.h"

namespace kiln {

struct PrefillInputs {
  Buffer q, out;  // f32 [rows, n_heads, HEAD_DIM]
  KvView kv;      // the sequence's cache, kvh the head's KV head
  // i32 scalars: the q/out row of the sequence's token 0, its query
  // tokens, the position of token 0, the rows its cache holds, the sliding
  // window, the head, the heads per row and the program's first token.
  Value row0, n_tokens, pos0, kv_len, window, head, n_heads, t0;
  Value scale;  // f32: the softmax scale
  Value sink;   // the head's sink_logit, or invalid
};

// HEAD_DIM, BLOCK_M and BLOCK_N from the spec; throws kiln::Error naming
// `kernel` for constexprs it cannot build.
void check_prefill_constexprs(const std::string& kernel, const Spec& s);

// Attends the program's BLOCK_M tokens and stores their rows of out.
void prefill_rows(KernelBuilder& k, const Spec& s, const PrefillInputs& in);

}  // namespace kiln
