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

  struct Entry {
    std::string digest, kernel;
    int64_t bytes = 0;
    bool valid = false;
  };
  std::vector<Entry> list() const;
  int clear();  // removes every entry; returns how many

  // Counters of this process.
  std::atomic<int> hits = 0, misses = 0, corrupt = 0;

 private:
  std::string entry_path(const std::string& digest) const;
  void disable(const std::string& why);

  std::string root_;
  std::string dir_;  // the schema folder; empty when memory-only
  std::mutex mu_;    // dir_, which a failed store clears
};

}  // namespace kiln
