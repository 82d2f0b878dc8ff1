// A backend to run your own kernels on, for programs that use Kiln as a
// library (and the Python package): compile a registered kernel, launch it
// on your arrays by argument name, check it against the interpreter, tune it.
//
// It is a Runtime (runtime/runtime.h), whose launches bind arguments by
// name (runtime/named_args.h) and copy host arrays to the GPU and back,
// with the conveniences a caller outside Kiln needs: a backend by name,
// launches that return with the results in place, and tuning results
// applied to the launches that follow.
#pragma once

#include <map>
#include <string>

#include "runtime/named_args.h"
#include "runtime/runtime.h"
#include "runtime/tuner.h"

namespace kiln {

class Device {
 public:
  // "cpu", "cuda" or "cuda-sim"; threads 0: every core. Compiled code is
  // cached under $KILN_CACHE_DIR (default ~/.cache/kiln).
  explicit Device(const std::string& backend = "cpu", int threads = 0);
  explicit Device(const RuntimeOptions& options) : rt_(options) {}

  std::string name() { return rt_.backend().name(); }
  Runtime& runtime() { return rt_; }

  // The spec a launch of `kernel` with these arguments uses: the dtypes
  // and constexprs given, the rest from the tuning database for the
  // launch's sizes, the kernel's heuristics and its defaults.
  Spec select(const std::string& kernel, const LaunchArgs& args,
              const std::map<std::string, DType>& dtypes = {},
              const std::map<std::string, int64_t>& constexprs = {});
  // Compiles (once) and runs the kernel on the arguments; returns when the
  // results are in the caller's arrays.
  void launch(const std::string& kernel, const LaunchArgs& args,
              const std::map<std::string, DType>& dtypes = {},
              const std::map<std::string, int64_t>& constexprs = {});
  void launch(const Spec& spec, const LaunchArgs& args);
  // The same launch through the reference interpreter (host arrays, or a
  // host-memory backend's buffers).
  void interpret(const Spec& spec, const LaunchArgs& args);
  // Searches the kernel's tunables on the shape in `options` (every
  // candidate checked against the interpreter) and makes the winner this
  // device's choice for launches in its shape bucket; TuningDb::save_to
  // keeps it.
  TuneResult tune(const std::string& kernel, const TuneOptions& options);

 private:
  Runtime rt_;
};

}  // namespace kiln
