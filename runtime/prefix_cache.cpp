#include "runtime/prefix_cache.h"

#include <algorithm>

namespace kiln {

namespace {

// splitmix64's finaliser: every input bit moves every output bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t chain(uint64_t parent, const int32_t* tokens, int64_t n) {
  uint64_t h = mix(parent + 0x9e3779b97f4a7c15ULL);
  for (int64_t i = 0; i < n; ++i) h = mix(h ^ static_cast<uint32_t>(tokens[i]));
  return h;
}

}  // namespace

std::vector<int32_t> PrefixCache::match(const std::vector<int32_t>& tokens, int64_t max_pages) {
  const int64_t page = pool_.page();
  std::vector<int32_t> pages;
  uint64_t h = 0;
  const int64_t full = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / page, max_pages);
  ++clock_;
  for (int64_t i = 0; i < full; ++i) {
    const int32_t* run = tokens.data() + i * page;
    const uint64_t next = chain(h, run, page);
    auto it = entries_.find(next);
    if (it == entries_.end() || it->second.parent != h ||
        !std::equal(run, run + page, it->second.tokens.begin()))
      break;
    it->second.used = clock_;
    pages.push_back(it->second.page);
    h = next;
  }
  return pages;
}

void PrefixCache::insert(const std::vector<int32_t>& tokens, const std::vector<int32_t>& pages) {
  const int64_t page = pool_.page();
  const int64_t full = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / page,
                                         static_cast<int64_t>(pages.size()));
  uint64_t h = 0;
  ++clock_;
  for (int64_t i = 0; i < full; ++i) {
    const int32_t* run = tokens.data() + i * page;
    const uint64_t next = chain(h, run, page);
    auto it = entries_.find(next);
    if (it == entries_.end()) {
      pool_.retain(pages[static_cast<size_t>(i)]);
      entries_.emplace(next, Entry{h, std::vector<int32_t>(run, run + page),
                                   pages[static_cast<size_t>(i)], clock_});
    } else if (it->second.parent == h && std::equal(run, run + page, it->second.tokens.begin())) {
      it->second.used = clock_;
    } else {
      return;  // a collision: this chain is not cached past here
    }
    h = next;
  }
}

bool PrefixCache::evict(int64_t free_pages) {
  if (pool_.free_pages() >= free_pages) return true;
  std::vector<std::pair<uint64_t, uint64_t>> idle;  // (last use, hash) of pages only we hold
  for (const auto& [h, e] : entries_)
    if (pool_.refs(e.page) == 1) idle.push_back({e.used, h});
  std::sort(idle.begin(), idle.end());
  for (const auto& [used, h] : idle) {
    if (pool_.free_pages() >= free_pages) break;
    pool_.release(entries_.at(h).page);
    entries_.erase(h);
  }
  return pool_.free_pages() >= free_pages;
}

void PrefixCache::clear() {
  for (const auto& [h, e] : entries_) pool_.release(e.page);
  entries_.clear();
}

}  // namespace kiln
