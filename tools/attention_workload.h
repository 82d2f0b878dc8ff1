// A decode-attention problem for `kiln bench`: one query token of n_heads
// heads against a KV cache of kv_len random keys and values (f16, bf16, f32,
// q8_0: i8 codes with f16 scales, or AURA: packed codes with f16 norms; the
// layout of kv_cache.h in blocks of key_block keys, max_ctx = kv_len), as a forward's
// attention_decode launch at that context. Its traffic is the cache rows it must read, which at
// long contexts rival a layer's weights. With n_tokens = kv_len it is a
// prompt's attention_prefill launch instead: every token of a kv_len-token
// prompt against the prompt's keys, bound by arithmetic. With page > 0 the
// cache is a pool of pages of that many keys (kv_cache.h), the sequence's
// pages in a shuffled order as a pool hands them out after some use.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/attention/kv_cache.h"
#include "runtime/host_memory.h"
#include "runtime/named_args.h"

namespace kiln {

class AttentionWorkload {
 public:
  AttentionWorkload(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t kv_len,
                    int64_t key_block, KvCacheType kv = DType::f16, int64_t n_tokens = 1,
                    int64_t page = 0, uint64_t seed = 1);

  LaunchArgs args();
  // The split-K pair's arguments (attention_decode_split, then
  // attention_decode_merge), slices of `split` keys; partials owned here.
  LaunchArgs split_args(int64_t split);
  LaunchArgs merge_args(int64_t split);
  int64_t cache_bytes() const;  // the K and V rows one launch reads, scales included
  // The smallest of the cache's buffers: what a cold benchmark copies.
  int64_t cache_buffer_bytes() const;
  int64_t head_dim() const { return d_; }
  // Multiply-adds of the causal scores and P V: 2 H D per visible key.
  double causal_macs() const;
  DType kv() const { return kv_.dtype; }
  // The attention kernels' constexprs the cache fixes (an AURA cache's
  // KBITS and VBITS, a pool's PAGE).
  std::map<std::string, int64_t> kv_constexprs() const;

 private:
  int64_t h_, kvh_, d_, len_, kb_, t_, page_;
  KvCacheType kv_;
  HostMemory q_, k_, v_, k_scale_, v_scale_, q_scale_, q_sum_, out_, part_o_, part_ml_, table_;
  int64_t k_elems() const;  // the cache's (or pool's) elements
  int64_t v_elems() const;
  int64_t partial_rows(int64_t split);
};

}  // namespace kiln
