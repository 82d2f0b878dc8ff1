// Full KV pages kept for later sequences with the same prefix (a shared
// system prompt, a chat's earlier turns): vLLM's automatic prefix caching.
//
// Why: a server sees many prompts that begin alike; their keys and values
// are computed once and later sequences start from the cached pages
// (KvPagePool::create(shared)). Only full pages are cached: a full page is
// never written again, so sharing it needs no copy. A page is named by a
// hash chained over every token up to its end, and its tokens are kept and
// compared on a hit, so a hash collision is a miss, never wrong keys. The
// cache holds its pages as one more holder (KvPagePool::retain); a page only
// the cache holds is evicted least recently used first when the pool runs
// short.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/kv_page_pool.h"

namespace kiln {

class PrefixCache {
 public:
  explicit PrefixCache(KvPagePool& pool) : pool_(pool) {}
  ~PrefixCache() { clear(); }
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The cached pages holding the first full pages of `tokens`, the longest
  // run, at most max_pages.
  std::vector<int32_t> match(const std::vector<int32_t>& tokens, int64_t max_pages);
  // Keeps the full pages of a sequence (`pages` its table, holding at least
  // `tokens`' full pages) that the cache does not hold yet.
  void insert(const std::vector<int32_t>& tokens, const std::vector<int32_t>& pages);
  // Releases pages only the cache holds, least recently used first, until
  // the pool has `free_pages` free; returns whether it got there.
  bool evict(int64_t free_pages);
  void clear();  // releases every page
  int64_t pages() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    uint64_t parent;
    std::vector<int32_t> tokens;
    int32_t page;
    uint64_t used;
  };
  KvPagePool& pool_;
  std::unordered_map<uint64_t, Entry> entries_;  // by the chained hash
  uint64_t clock_ = 0;
};

}  // namespace kiln
