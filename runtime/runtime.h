// Compiles library kernels on first use, caches them, picks their tuned
// constexprs and launches them on one backend (runtime/backend.h: cpu,
// cuda or cuda-sim).
//
// compile(spec): memory cache by spec, then the backend's compile, which
// consults the on-disk cache by compile key (a warm process links cached
// CPU objects without running LLVM's code generator, or loads cached PTX).
// select(): the spec for a launch of a kernel with given dtypes: constexprs
// from the tuning database for the launch's shape bucket, else the kernel's
// heuristic. launch(): binds arguments by parameter name
// (runtime/named_args.h), checks them and the buffer sizes before any code
// runs, then runs the grid on the backend.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "kernels/registry.h"
#include "runtime/backend.h"
#include "runtime/compile_cache.h"
#include "runtime/named_args.h"
#include "runtime/tuning_db.h"
#include "targets/cpu/thread_pool.h"

namespace kiln {

struct CompiledKernel {
  Spec spec;
  // After the pass pipeline; only its parameters (Runtime::signature) when
  // the program was found by spec in the disk cache: launches need no more,
  // and Runtime::full_kernel builds the rest for the interpreter.
  Kernel kernel;
  bool has_body = true;
  std::string digest;  // of the compile key
  std::unique_ptr<Program> program;
  bool from_disk = false;
  double compile_ms = 0;  // build, passes and the backend's compile (or load), wall time
};

struct RuntimeOptions {
  int threads = 0;                                      // 0: all cores
  std::string cache_dir = CompileCache::default_dir();  // "": memory only
  bool use_tuning_db = true;
  std::string backend = "cpu";  // see backend_names()
  // Every plan launch also runs through the interpreter on copies of its
  // buffers, and a disagreement is an error (runtime/launch_check.h);
  // host-memory backends only.
  bool check = false;
};

class Runtime {
 public:
  explicit Runtime(int threads = 0);
  explicit Runtime(const RuntimeOptions& options);
  ~Runtime();

  Backend& backend() { return *backend_; }
  // Host threads: they run the CPU backend's programs and host work such as
  // laying out weights at load.
  int threads() const { return pool_.size(); }
  ThreadPool& pool() { return pool_; }
  // Host work (laying out weights at load) over the host threads, whatever
  // the backend: fn(first, last) for contiguous ranges covering [0, n).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    pool_.parallel_for(n, fn);
  }
  CompileCache& cache() { return cache_; }
  TuningDb& tuning() { return tuning_; }
  bool checking() const { return check_; }
  std::string user_tuning_path() const;  // "" without a cache dir

  const CompiledKernel& compile(const Spec& spec);
  // Compiles every spec not compiled yet, on as many threads as the host
  // has cores where the backend allows (Backend::parallel_compile): a
  // model's kernels are independent LLVM or NVRTC compiles. Throws the
  // first failure in `specs` order after all have finished.
  void compile_all(const std::vector<Spec>& specs);
  // Kernels compiled (or loaded) by this runtime and the time it took.
  struct CompileStats {
    int64_t kernels = 0;
    double ms = 0;       // summed over the kernels
    double wall_ms = 0;  // of compile_all's calls, which compile in parallel
  };
  CompileStats compile_stats();

  // The kernel's spec (defaults, heuristic, then `constexprs`) built for
  // this runtime's backend: its target descriptor filled in.
  Spec make_spec(const std::string& kernel, const std::map<std::string, DType>& dtypes,
                 const std::map<std::string, int64_t>& constexprs = {});
  // The spec a launch with these dtypes and arguments (sizes among them by
  // name) should use. `fixed` sets non-tunable constexprs (a format, a head
  // size).
  Spec select(const std::string& kernel, const std::map<std::string, DType>& dtypes,
              const LaunchArgs& args, const std::map<std::string, int64_t>& fixed = {});
  Spec select(const std::string& kernel, const std::map<std::string, DType>& dtypes,
              const BoundArgs& args, const std::map<std::string, int64_t>& fixed = {});
  // select() with where each constexpr came from, for sizes given by name
  // (`kiln inspect --why`): "given", "tuning database FILE:LINE (KEY)",
  // "shape heuristic", "kernel heuristic" or "default".
  struct Selection {
    Spec spec;
    std::map<std::string, std::string> origin;
  };
  Selection explain(const std::string& kernel, const std::map<std::string, DType>& dtypes,
                    const ScalarArgs& sizes, const std::map<std::string, int64_t>& fixed = {});
  // select() + launch().
  void call(const std::string& kernel, const std::map<std::string, DType>& dtypes,
            const LaunchArgs& args, const std::map<std::string, int64_t>& fixed = {});

  // Arguments by name bound to spec's kernel: checked once, launched as
  // often as needed.
  BoundArgs bind(const Spec& spec, const LaunchArgs& args);
  // Host arrays reach a backend whose memory is not the host's through
  // buffers of its own, and come back after the launch (all of them: the
  // kernel may write any).
  void launch(const Spec& spec, const LaunchArgs& args);
  void launch(const Spec& spec, const BoundArgs& args);
  // The same launch through the reference interpreter (on host arrays).
  void interpret(const Spec& spec, const LaunchArgs& args);
  void interpret(const Spec& spec, const BoundArgs& args);

  // Grid of a launch after checking arguments and buffer sizes, and the
  // bytes its buffers need (-1 for a compute-bound launch shape: CpuLaunch
  // then never runs it on one thread for being small; buffer_bytes holds
  // them either way).
  struct CheckedLaunch {
    Grid grid;
    int64_t bytes = 0;
    int64_t buffer_bytes = 0;
  };
  CheckedLaunch check_launch(const Spec& spec, const Kernel& k, const BoundArgs& args);

  // The parameters of a spec's kernel (its body left out), built once by
  // the DSL alone (the passes never change parameters).
  const Kernel& signature(const Spec& spec);
  // c's kernel with its body (after the passes), built once where c was
  // loaded without it.
  const Kernel& full_kernel(const CompiledKernel& c);

 private:
  // A spec's program found by spec in the disk cache, or else its IR built
  // and keyed; outside every lock but the cache's and the backend's.
  std::unique_ptr<CompiledKernel> prepare(const Spec& spec);
  // The backend's compile of a prepared kernel without a program.
  void generate(CompiledKernel& c);
  // Whether a spec's program is found by spec (spec_index_key): a library
  // kernel on a backend that loads programs by digest, with a disk cache.
  bool indexed(const Spec& spec) const;

  ThreadPool pool_;
  std::unique_ptr<Backend> backend_;
  CompileCache cache_;
  TuningDb tuning_;
  std::mutex mu_;
  std::mutex compile_mu_;  // held while compiling on a backend without parallel compiles
  std::map<std::string, std::unique_ptr<CompiledKernel>> compiled_;
  std::map<std::string, Kernel> signatures_;  // by spec, parameters only
  std::map<std::string, Kernel> bodies_;      // by spec: full_kernel's builds
  double compile_wall_ms_ = 0;
  bool check_ = false;
};

// Builds the kernel of a spec and runs the pass pipeline (shared by the
// runtime, `kiln inspect` and tests).
Kernel build_kernel(const Spec& spec);
// The launch's scalar arguments and sizes by name.
ScalarArgs scalar_args(const Kernel& k, const BoundArgs& args);

}  // namespace kiln
