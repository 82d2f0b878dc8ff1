// Tuned constexprs by kernel, dtypes and shape bucket, kept as TOML.
//
// One file per target class (x86-64-v4, x86-64-v3, aarch64): the defaults
// shipped in runtime/tuning/ (built into the binary) and a user file under
// the cache dir that `kiln tune` writes and that overrides them. A bucket
// rounds each of the kernel's shape sizes up to a power of two, so one
// tuning serves nearby shapes. Entries are checked against the kernel's
// declared tunables when read: anything malformed or out of range is a
// warning naming the file, the line and the entry, and is ignored (the
// kernel's heuristic applies). An entry without a bucket is the target's
// measured default for every shape of its dtypes and variant: a tuned
// bucket overrides it. A bucket may name only some of the sizes (a GEMV's
// k, whatever its m): it serves every size of the others, and the entry
// naming the most sizes that match wins. An entry with `cpus` applies only
// on those CPU models (LLVM's names for the host, as `znver5`), where it
// beats an unrestricted entry naming as many sizes: one class's cores
// differ (Zen 5 streams one GEMV row per program best, Intel's Xeons four).
// `kiln tune` records its entries for the CPU model it measured on.
//
//   [[gemv]]
//   dtypes = { W = "f16", X = "f32" }
//   bucket = { m = 4096, k = 16384 }
//   variant = { }                 (non-default non-tunable constexprs, e.g. qgemv's FMT)
//   cpus = ["znver5"]             (optional)
//   BLOCK_M = 1
//   BLOCK_K = 256
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "kernels/registry.h"
#include "targets/cpu/cpu_target.h"

namespace kiln {

struct TuningKey {
  std::string kernel;
  std::map<std::string, DType> dtypes;
  std::map<std::string, int64_t> bucket;
  // The constexprs that are not tunables (a format, a head size) and differ
  // from the kernel's defaults: they pick a kernel variant, so each variant
  // is tuned on its own.
  std::map<std::string, int64_t> variant = {};
  // The CPU models the entry is restricted to (sorted); empty: every one.
  std::vector<std::string> cpus = {};

  bool operator<(const TuningKey& o) const;
  std::string str() const;  // "gemv W=f16,X=f32 m=4096,k=16384"
};

class TuningDb {
 public:
  // `cpu`: the machine's model name, which entries with `cpus` must list
  // to apply; empty (a GPU, a named target) matches none of them.
  explicit TuningDb(std::string cpu = "") : cpu_(std::move(cpu)) {}

  // Adds the entries of a TOML text; later entries override earlier ones.
  void load_text(const std::string& text, const std::string& source_name);
  // Missing file: nothing happens. Unreadable or malformed: warnings.
  void load_file(const std::string& path);

  // The entry of key's bucket, else of the partial bucket naming the most
  // of its sizes, else the entry without a bucket; among those naming as
  // many, one restricted to this CPU model. key.cpus is ignored.
  std::optional<std::map<std::string, int64_t>> find(const TuningKey& key) const;
  // The same entry with its key and where it came from ("FILE:LINE", or
  // "set by this process").
  struct Match {
    std::map<std::string, int64_t> constexprs;
    TuningKey key;
    std::string source;
  };
  std::optional<Match> match(const TuningKey& key) const;
  void set(const TuningKey& key, const std::map<std::string, int64_t>& constexprs);
  // Merges this db's entries into `path` (read, update, write via temp + rename).
  void save_to(const std::string& path) const;
  std::string to_toml() const;
  size_t size() const { return entries_.size(); }

  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  void warn(const std::string& w);
  std::string cpu_;
  std::map<TuningKey, std::map<std::string, int64_t>> entries_;
  std::map<TuningKey, std::string> sources_;
  std::vector<std::string> warnings_;
};

// The non-tunable constexprs of a spec (its TuningKey::variant).
std::map<std::string, int64_t> spec_variant(const KernelDef& def, const Spec& spec);
// The power-of-two bucket of a launch for `def` (sizes by name, e.g. m, k).
std::map<std::string, int64_t> shape_bucket(const KernelDef& def, const ScalarArgs& sizes);
// "x86-64-v4" (AVX-512), "x86-64-v3" (AVX2), "aarch64", else "generic".
std::string tuning_class(const CpuTarget& t);
// The TOML shipped for a class (empty if none).
std::string default_tuning_text(const std::string& cls);

}  // namespace kiln
