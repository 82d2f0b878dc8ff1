// The on-disk half of the compile cache: object files by key digest.
//
// Entries live under $KILN_CACHE_DIR (default ~/.cache/kiln) in a
// schema-versioned folder. Each is written to a temporary file and renamed
// into place, so concurrent processes compiling the same kernel both
// succeed and a reader never sees half an entry. Every entry carries its
// key digest, size and the SHA-256 of its payload; a truncated or corrupt
// entry is reported as a miss (and replaced by the next store), never
// loaded. An unusable directory (read-only, full, not a directory) gives one
// warning and the cache keeps working in memory only. load() and store()
// may be called from several threads at once (parallel compiles).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class CompileCache {
 public:
  // dir == "" means memory only (no disk).
  explicit CompileCache(std::string dir);
  static std::string default_dir();  // $KILN_CACHE_DIR, else $HOME/.cache/kiln

  bool persistent() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }    // the schema folder holding entries
  const std::string& root() const { return root_; }  // $KILN_CACHE_DIR

  std::optional<std::string> load(const std::string& digest);
  void store(const std::string& digest, const std::string& kernel, std::string_view object);

  // The digest a spec compiled to, by its spec_index_key (compile_key.h):
  // a small entry beside the objects, written like them. Missing,
  // malformed or memory-only: nullopt, and the caller builds the IR.
  std::optional<std::string> find_digest(const std::string& spec_key);
  void remember_digest(const std::string& spec_key, const std::string& digest);

  struct Entry {
    std::string digest, kernel;
    int64_t bytes = 0;
    bool valid = false;
  };
  std::vector<Entry> list() const;
  // Removes every entry (the digests remembered by spec too); returns how
  // many compiled programs (and stray temporary files) it removed.
  int clear();

  // Counters of this process.
  std::atomic<int> hits = 0, misses = 0, corrupt = 0;

 private:
  std::string entry_path(const std::string& digest) const;
  // Writes `data` to `name` in the schema folder by a temporary file and a
  // rename; disables the cache when that fails.
  void write_entry(const std::string& name, const std::string& data);
  void disable(const std::string& why);

  std::string root_;
  std::string dir_;  // the schema folder; empty when memory-only
  std::mutex mu_;    // dir_, which a failed store clears, and bad_
  // Digests whose entry this process found corrupt: read again before a
  // store replaces them, they are misses without being counted twice.
  std::set<std::string> bad_;
};

}  // namespace kiln
