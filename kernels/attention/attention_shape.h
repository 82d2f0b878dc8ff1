// What the attention kernels share on the host side: the checks of their
// launch sizes and constexprs, with messages that name the kernel, and the
// buffer sizes a launch needs.
//
// Layouts: q and out are f32 [n_tokens, n_heads, HEAD_DIM]; the cache
// tensors k and v hold max_ctx rows per KV head (kv_cache.h), of which rows
// 0 .. kv_len-1 are valid. Query token i sits at position pos0 + i and attends
// to cache rows 0 .. pos0 + i; query head h reads KV head
// h / (n_heads / n_kv_heads).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/spec.h"
#include "kernels/registry.h"

namespace kiln {

// Lanes of one f32 vector register on AVX-512: HEAD_DIM is a multiple of it.
inline constexpr int64_t kAttentionLanes = 16;

struct AttentionSizes {
  int64_t n_tokens, n_heads, n_kv_heads, group, max_ctx, kv_len, pos0, head_dim;
  std::map<std::string, int64_t> buffer_elems() const;
};

// Reads and checks the launch's sizes; throws kiln::Error naming `kernel`.
AttentionSizes attention_sizes(const std::string& kernel, const Spec& s, const ScalarArgs& a);

// HEAD_DIM a positive multiple of kAttentionLanes, every block size a power of two
// (the lane folds halve the tile).
void check_attention_constexprs(const std::string& kernel, int64_t head_dim,
                                const std::vector<std::pair<std::string, int64_t>>& blocks);

}  // namespace kiln
