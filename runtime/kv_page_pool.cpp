#include "runtime/kv_page_pool.h"

#include <string>

#include "ir/error.h"

namespace kiln {

KvPagePool::KvPagePool(int64_t n_pages, int64_t page) : page_(page) {
  if (n_pages < 1 || page < 1)
    throw Error("KV page pool: " + std::to_string(n_pages) + " pages of " + std::to_string(page) +
                " rows (need >= 1 of each)");
  refs_.assign(static_cast<size_t>(n_pages), 0);
  for (int64_t p = 0; p < n_pages; ++p) free_.insert(free_.end(), static_cast<int32_t>(p));
}

KvPagePool::Seq& KvPagePool::at(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw Error("KV page pool: no sequence " + std::to_string(seq));
  return it->second;
}

const KvPagePool::Seq& KvPagePool::at(SeqId seq) const {
  return const_cast<KvPagePool*>(this)->at(seq);
}

KvPagePool::SeqId KvPagePool::create() {
  seqs_[next_] = Seq{};
  return next_++;
}

KvPagePool::SeqId KvPagePool::create(const std::vector<int32_t>& shared) {
  for (int32_t p : shared)
    if (p < 0 || p >= n_pages() || refs_[static_cast<size_t>(p)] == 0)
      throw Error("KV page pool: page " + std::to_string(p) +
                  " is not held (shared pages must be)");
  for (int32_t p : shared) ++refs_[static_cast<size_t>(p)];
  seqs_[next_] = Seq{shared, static_cast<int64_t>(shared.size()) * page_};
  return next_++;
}

void KvPagePool::retain(int32_t page) {
  if (page < 0 || page >= n_pages() || refs_[static_cast<size_t>(page)] == 0)
    throw Error("KV page pool: retaining page " + std::to_string(page) + ", which is not held");
  ++refs_[static_cast<size_t>(page)];
}

void KvPagePool::release(int32_t page) {
  if (page < 0 || page >= n_pages() || refs_[static_cast<size_t>(page)] == 0)
    throw Error("KV page pool: releasing page " + std::to_string(page) + ", which is not held");
  if (--refs_[static_cast<size_t>(page)] == 0) free_.insert(page);
}

KvPagePool::SeqId KvPagePool::fork(SeqId src) {
  Seq copy = at(src);
  for (int32_t p : copy.pages) ++refs_[static_cast<size_t>(p)];
  seqs_[next_] = std::move(copy);
  return next_++;
}

namespace {
// Whether appending n rows to s must first copy its shared, partly filled
// last page.
bool copies_last(const std::vector<int64_t>& refs, const std::vector<int32_t>& pages,
                 int64_t length, int64_t page, int64_t n) {
  return n > 0 && length % page != 0 && refs[static_cast<size_t>(pages.back())] > 1;
}
}  // namespace

int64_t KvPagePool::pages_needed(SeqId seq, int64_t n) const {
  const Seq& s = at(seq);
  return (s.length + n + page_ - 1) / page_ - static_cast<int64_t>(s.pages.size()) +
         (copies_last(refs_, s.pages, s.length, page_, n) ? 1 : 0);
}

std::vector<KvPagePool::PageCopy> KvPagePool::append(SeqId seq, int64_t n) {
  Seq& s = at(seq);
  if (n < 0) throw Error("KV page pool: appending " + std::to_string(n) + " rows");
  const int64_t have = static_cast<int64_t>(s.pages.size());
  const int64_t need = (s.length + n + page_ - 1) / page_ - have;
  const bool cow = copies_last(refs_, s.pages, s.length, page_, n);
  if (need + (cow ? 1 : 0) > free_pages())
    throw Error("KV page pool: sequence " + std::to_string(seq) + " needs " +
                std::to_string(need + (cow ? 1 : 0)) + " more pages of " + std::to_string(page_) +
                " rows, " + std::to_string(free_pages()) + " are free");
  auto take = [&] {
    int32_t p = *free_.begin();
    free_.erase(free_.begin());
    refs_[static_cast<size_t>(p)] = 1;
    return p;
  };
  std::vector<PageCopy> copies;
  if (cow) {
    int32_t shared = s.pages.back();
    --refs_[static_cast<size_t>(shared)];
    s.pages.back() = take();
    copies.push_back({shared, s.pages.back()});
  }
  for (int64_t i = 0; i < need; ++i) s.pages.push_back(take());
  s.length += n;
  return copies;
}

void KvPagePool::truncate(SeqId seq, int64_t length) {
  Seq& s = at(seq);
  if (length < 0 || length > s.length)
    throw Error("KV page pool: sequence " + std::to_string(seq) + " of " +
                std::to_string(s.length) + " rows cannot keep " + std::to_string(length));
  const auto keep = static_cast<size_t>((length + page_ - 1) / page_);
  for (size_t i = keep; i < s.pages.size(); ++i)
    if (--refs_[static_cast<size_t>(s.pages[i])] == 0) free_.insert(s.pages[i]);
  s.pages.resize(keep);
  s.length = length;
}

void KvPagePool::free(SeqId seq) {
  Seq& s = at(seq);
  for (int32_t p : s.pages)
    if (--refs_[static_cast<size_t>(p)] == 0) free_.insert(p);
  seqs_.erase(seq);
}

const std::vector<int32_t>& KvPagePool::table(SeqId seq) const { return at(seq).pages; }

std::vector<int32_t> KvPagePool::padded_table(SeqId seq, int64_t entries) const {
  std::vector<int32_t> t = table(seq);
  if (static_cast<int64_t>(t.size()) > entries)
    throw Error("KV page pool: sequence " + std::to_string(seq) + " holds " +
                std::to_string(t.size()) + " pages, more than a table of " +
                std::to_string(entries));
  t.resize(static_cast<size_t>(entries), -1);
  return t;
}

int64_t KvPagePool::length(SeqId seq) const { return at(seq).length; }

void check_block_table(const std::vector<int32_t>& table, int64_t live, int64_t n_pages) {
  if (live > static_cast<int64_t>(table.size()))
    throw Error("block table: " + std::to_string(table.size()) + " entries, " +
                std::to_string(live) + " in use");
  for (int64_t i = 0; i < live; ++i)
    if (table[static_cast<size_t>(i)] < 0 || table[static_cast<size_t>(i)] >= n_pages)
      throw Error("block table: entry " + std::to_string(i) + " is page " +
                  std::to_string(table[static_cast<size_t>(i)]) + ", outside the pool of " +
                  std::to_string(n_pages) + " pages");
}

}  // namespace kiln
