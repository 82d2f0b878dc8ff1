// What the two first passes of split-K decode attention (flash-decoding)
// share: attention_decode_split (the walk, kv_walk.h) and
// attention_decode_tiles (tile dots, tile_blocks.h) each write a slice of
// SPLIT keys of a KV head's cache into the same partial states, which
// attention_decode_merge combines (attention_decode_split.cpp):
//   part_o  [n_tokens][n_heads][S][HEAD_DIM]  sum_j 2^(x_j - m) v_j
//   part_ml [n_tokens][n_heads][S][2]         m (log2-scaled scores), l
// for token t, head h and slice s of S = ceil(max_ctx / SPLIT).
#pragma once

#include <cstdint>
#include <string>

#include "ir/builder.h"
#include "ir/spec.h"
#include "kernels/attention/kv_walk.h"
#include "kernels/registry.h"

namespace kiln {

// Throws kiln::Error naming `kernel` unless SPLIT is a positive multiple of
// the key block.
void check_split(const std::string& kernel, int64_t split, int64_t key_block);

// A pass-1 launch: programs (ceil(group / BLOCK_G), ceil(kv_len / SPLIT),
// n_kv_heads * n_tokens) and the partials' sizes in place of out's.
LaunchShape decode_split_launch_shape(const std::string& kernel, const Spec& s,
                                      const ScalarArgs& a);

// What both pass-1 kernels declare and derive: the buffers q (kv_walk.h's
// query_dtype), k, v, part_o and part_ml, then declare_decode_scalars'
// (the order ops::attention binds them by name), after checking HEAD_DIM,
// BLOCK_G, SPLIT and the cache layout (errors name `kernel`); and the
// program's slice (program_id 1), KV head and token (program_id 2) and its
// GQA group's size.
struct SplitPass {
  Buffer q, part_o, part_ml;
  DecodeScalars sc;
  Value slice, kvh, t, group;
  int64_t head_dim = 0, block_g = 0, split = 0, key_block = 0;
};
SplitPass declare_split_pass(KernelBuilder& k, const Spec& s, const std::string& kernel);
// The slices S per head (i32).
Value split_slices(const SplitPass& p);
// The keys [begin, end) of the program's slice its token sees: empty past
// the token's causal limit or before its window.
struct SliceKeys {
  Value begin, end;
};
SliceKeys split_keys(const SplitPass& p);

// Partial rows of one launch: n_tokens * n_heads * S.
int64_t decode_partial_rows(int64_t n_tokens, int64_t n_heads, int64_t max_ctx, int64_t split);

}  // namespace kiln
