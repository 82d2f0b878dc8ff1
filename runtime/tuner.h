// Block-size search for one kernel, dtypes and shape: the engine of `kiln tune`.
//
// The search space is the kernel's declared tunables. A coarse pass tries
// every other value of each tunable (plus the heuristic's choice), a fine
// pass the neighbours of the coarse winner. Every candidate starts from the
// same inputs (buffers are restored, so in-place kernels are measured
// honestly), must reproduce the interpreter's result on them within the
// kernel's tolerance before its time counts, and is timed as the median of
// repeated launches after a warm-up. Candidates that fail to build, compile
// or verify, or compute a wrong result, score as infinitely slow.
//
// By default the timed launches cycle through copies of the large buffers
// (runtime/cold_copies.h), so a kernel whose weights or cache fit the L3
// cache is tuned for a forward, where they come from DRAM, not for a
// re-run on a warm cache (`warm`).
#pragma once

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace kiln {

struct TuneOptions {
  std::map<std::string, DType> dtypes;
  std::map<std::string, int64_t> fixed;  // non-tunable constexprs (e.g. FMT)
  Sizes shape;                           // integer scalars and launch sizes by name
  std::map<std::string, double> floats;  // float scalars (default 0.5, eps 1e-5)
  double budget_s = 60;
  int reps = 15;
  bool warm = false;  // time re-runs on the same buffers instead of cold copies
};

struct TuneTrial {
  std::map<std::string, int64_t> constexprs;
  double median_ms = std::numeric_limits<double>::infinity();
  std::string status;  // "ok", or why the candidate was rejected
};

struct TuneResult {
  TuningKey key;
  std::vector<TuneTrial> trials;  // in the order tried
  TuneTrial heuristic;
  TuneTrial best;
  int64_t bytes = 0;  // all buffers, as a rough measure of traffic per launch
  size_t copies = 1;  // argument sets the timed launches cycle through
  bool budget_exhausted = false;
};

TuneResult tune(Runtime& rt, const std::string& kernel, const TuneOptions& options);

// The spec a launch at this shape runs (the tuning database's entry, else
// the kernel's heuristic; options.fixed over both), measured as tune()
// measures a candidate: checked against the interpreter, then timed.
struct Measurement {
  Spec spec;
  TuneTrial trial;
  int64_t bytes = 0;  // all buffers
  size_t copies = 1;
};
Measurement measure(Runtime& rt, const std::string& kernel, const TuneOptions& options);

}  // namespace kiln
