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

#include "ir/spec.h"
#include "kernels/registry.h"

namespace kiln {

// Throws kiln::Error naming `kernel` unless SPLIT is a positive multiple of
// the key block.
void check_split(const std::string& kernel, int64_t split, int64_t key_block);

// A pass-1 launch: programs (ceil(group / BLOCK_G), ceil(kv_len / SPLIT),
// n_kv_heads * n_tokens) and the partials' sizes in place of out's.
LaunchShape decode_split_launch_shape(const std::string& kernel, const Spec& s,
                                      const ScalarArgs& a);

// Partial rows of one launch: n_tokens * n_heads * S.
int64_t decode_partial_rows(int64_t n_tokens, int64_t n_heads, int64_t max_ctx, int64_t split);

}  // namespace kiln
