// What the attention kernels share on the host side: the checks of their
// launch sizes and constexprs, with messages that name the kernel, and the
// buffer sizes a launch needs.
//
// Layouts: q and out are f32 [n_tokens, n_heads, HEAD_DIM]; the cache
// tensors k and v hold max_ctx rows per KV head (kv_cache.h), or with PAGE
// > 0 are a pool of n_pages pages and block_table lists the sequence's,
// of which rows 0 .. kv_len-1 are valid; sinks (with SINKS) is f32 [n_heads]. Query token
// i sits at position pos0 + i and attends to cache rows 0 .. pos0 + i (the
// last `window` of them with a sliding window); query head h reads KV head
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

// The dtype role of q and out ("T"): the activations a forward runs in.
// The kernels compute in f32 whatever T is.
inline const std::pair<std::string, std::vector<DType>> kActivationRole = {
    "T", {DType::f32, DType::f16, DType::bf16}};

// The f32 lanes the attention kernels work in: a head's dims in chunks of
// this many, the keys of a K cache block. One vector register's, between 8
// and 16: 16 on AVX-512 (measured, Zen 4) and CUDA (where 16 is the
// measured CPU choice kept, tiles being spread over threads anyway), 8 on
// AVX2 and NEON (two registers; not measured yet). HEAD_DIM is a multiple
// of it.
int64_t attention_lanes(const TargetDesc& t);

struct AttentionSizes {
  int64_t n_tokens, n_heads, n_kv_heads, group, max_ctx, kv_len, pos0, head_dim, key_block;
  int64_t page = 0, n_pages = 0;  // a paged cache (kv_cache.h): PAGE and the pool's pages
  int kbits = 0, vbits = 0;       // an AURA cache's (KV = u32)
  std::map<std::string, int64_t> buffer_elems() const;
};

// Reads and checks the launch's sizes; throws kiln::Error naming `kernel`.
AttentionSizes attention_sizes(const std::string& kernel, const Spec& s, const ScalarArgs& a);

// A packed batch of sequences (attention_prefill_varlen): n_tokens rows of
// q and out in all, n_seqs sequences of at most max_seq_tokens each, over a
// paged pool of n_pages pages of PAGE rows, each sequence up to max_ctx.
struct VarlenSizes {
  int64_t n_tokens, n_heads, n_kv_heads, max_ctx, n_seqs, max_seq_tokens, head_dim, page, n_pages;
  std::map<std::string, int64_t> buffer_elems() const;
};
VarlenSizes varlen_sizes(const std::string& kernel, const Spec& s, const ScalarArgs& a);

// Checks a batch's cu_seqlens ([n_seqs + 1], from 0, non-decreasing, ending
// at n_tokens) and seq_pos0 ([n_seqs], each sequence's rows within max_ctx)
// and returns max_seq_tokens; throws kiln::Error naming the sequence.
int64_t check_varlen_batch(const std::vector<int32_t>& cu_seqlens,
                           const std::vector<int32_t>& seq_pos0, int64_t n_tokens, int64_t max_ctx);

// A decode step of a batch of sequences (attention_decode_batch): one query
// token per sequence, over a paged pool of n_pages pages of PAGE rows,
// each sequence up to max_ctx.
struct DecodeBatchSizes {
  int64_t n_seqs, n_heads, n_kv_heads, group, max_ctx, head_dim, page, n_pages;
  std::map<std::string, int64_t> buffer_elems() const;
};
DecodeBatchSizes decode_batch_sizes(const std::string& kernel, const Spec& s, const ScalarArgs& a);

// BLOCK_G of the decode kernels for a launch: 4 heads, 8 over AURA's 8-bit
// keys (measured in attention_shape.cpp), no more than the group rounded up
// to a power of two.
std::map<std::string, int64_t> decode_block_g(const Spec& s, const ScalarArgs& a);
// BLOCK_M of the prefill kernels: 8 tokens, no more than n_tokens rounded
// up to a power of two.
std::map<std::string, int64_t> prefill_block_m(const Spec& s, const ScalarArgs& a);

// The new rows a cache store writes (kv_cache_store, aura_encode):
// n_tokens, n_kv_heads >= 1, pos0 >= 0 and pos0 + n_tokens <= max_ctx;
// throws kiln::Error naming `kernel`.
void check_store_rows(const std::string& kernel, int64_t n_tokens, int64_t n_kv, int64_t max_ctx,
                      int64_t pos0);

// HEAD_DIM a positive multiple of `lanes`, every block size a power of two
// (the lane folds halve the tile).
void check_attention_constexprs(const std::string& kernel, int64_t head_dim, int64_t lanes,
                                const std::vector<std::pair<std::string, int64_t>>& blocks);

}  // namespace kiln
