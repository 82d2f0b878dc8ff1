// The bookkeeping of a paged KV cache (kernels/attention/kv_cache.h's pool
// layout): which pool pages each sequence's rows live in, which pages are
// free, and which are shared.
//
// Why: a server holds many sequences of unknown final length; fixed pages
// let them grow without reserving max_ctx rows each, and let sequences
// that share a prefix (a system prompt, a fork for sampling n ways) share
// its pages. A shared page is read-only: a sequence about to write into a
// shared, partly filled last page first gets a private copy of it
// (copy-on-write). The pool moves no bytes itself: append() returns the
// page copies its caller must make before writing, on whatever device
// holds the pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace kiln {

class KvPagePool {
 public:
  // n_pages pages of `page` token rows each.
  KvPagePool(int64_t n_pages, int64_t page);

  using SeqId = int64_t;
  // Copy page `from` into page `to` (every head's K and V rows).
  struct PageCopy {
    int32_t from, to;
  };

  SeqId create();  // an empty sequence
  // A sequence that starts with `shared`, full pages another holder keeps
  // (a prefix cache's): it shares them, read-only, and appends after them.
  SeqId create(const std::vector<int32_t>& shared);
  // A new sequence with src's rows: it shares every page of src.
  SeqId fork(SeqId src);
  // Room for n more rows at the end of seq: new pages from the free list,
  // and a private copy of its last page when that page is shared and partly
  // filled (returned: copy it before writing). When the free pages do not
  // suffice this throws kiln::Error and changes nothing.
  std::vector<PageCopy> append(SeqId seq, int64_t n);
  // The free pages append(seq, n) takes: new ones, and the copy of a
  // shared, partly filled last page.
  int64_t pages_needed(SeqId seq, int64_t n) const;
  // Keeps the first `length` rows of seq (at most its length): the pages
  // past them are let go, as free() lets them go (speculative decoding's
  // refused guesses). A later append copies a kept last page that is
  // shared, as always.
  void truncate(SeqId seq, int64_t length);
  // Drops seq: its pages no other sequence holds return to the free list.
  void free(SeqId seq);
  // A holder besides sequences (a prefix cache keeping a full page for
  // later requests): retain adds one to the page's holders, release drops
  // one, freeing the page when none is left.
  void retain(int32_t page);
  void release(int32_t page);

  // seq's pages in order (row j lives in table(seq)[j / page]).
  const std::vector<int32_t>& table(SeqId seq) const;
  // The table padded with -1 to `entries` (a kernel's block_table for
  // max_ctx = entries * page); throws when seq holds more pages.
  std::vector<int32_t> padded_table(SeqId seq, int64_t entries) const;
  int64_t length(SeqId seq) const;  // rows
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t refs(int32_t page) const { return refs_.at(static_cast<size_t>(page)); }
  int64_t page() const { return page_; }
  int64_t n_pages() const { return static_cast<int64_t>(refs_.size()); }

 private:
  struct Seq {
    std::vector<int32_t> pages;
    int64_t length = 0;
  };
  Seq& at(SeqId seq);
  const Seq& at(SeqId seq) const;

  int64_t page_;
  std::vector<int64_t> refs_;  // per page: the sequences holding it
  // The lowest free page is taken first, so a sequence that grows by
  // several pages at once (a prompt) gets consecutive ones, which the
  // head-major pool lays out as one run per head (kv_cache.h).
  std::set<int32_t> free_;
  std::map<SeqId, Seq> seqs_;
  SeqId next_ = 0;
};

// Throws kiln::Error naming the entry when one of the first `live` entries
// of a block table is not a page of a pool of n_pages (the kernels clamp
// such an entry into the pool, which keeps reads in bounds but reads
// another sequence's rows).
void check_block_table(const std::vector<int32_t>& table, int64_t live, int64_t n_pages);

}  // namespace kiln
