#include "runtime/cpu/cpu_backend.h"

#include <llvm/Config/llvm-config.h>

#include <map>
#include <mutex>

#include "ir/error.h"
#include "runtime/cpu/cpu_launch.h"
#include "runtime/cpu/cpu_policy.h"
#include "runtime/host_backend.h"
#include "runtime/tuning_db.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build"
#endif
#ifndef KILN_CPU_CODEGEN_FINGERPRINT
#error "KILN_CPU_CODEGEN_FINGERPRINT must be defined by the build"
#endif

namespace kiln {

namespace {

struct CpuProgram : Program {
  KernelRangeFn fn = nullptr;
};

class CpuBackend : public HostMemoryBackend {
 public:
  explicit CpuBackend(ThreadPool& pool) : pool_(pool) {}

  std::string name() const override { return "cpu"; }
  std::string target() const override { return jit_.target().describe(); }
  std::string codegen_version() const override {
    return "llvm " LLVM_VERSION_STRING ", kiln " KILN_VERSION "+" KILN_CPU_CODEGEN_FINGERPRINT;
  }
  std::string tuning_class() const override { return kiln::tuning_class(jit_.target()); }
  std::string tuning_cpu() const override { return jit_.target().cpu; }
  TargetDesc target_desc() const override { return kiln::target_desc(jit_.target()); }
  const KernelPolicy& policy() const override { return cpu_kernel_policy(); }
  int threads() const override { return pool_.size(); }

  // LLVM's code generation (compile_to_object, its own context and target
  // machine) runs outside the lock; the JIT's symbol table inside it.
  std::unique_ptr<Program> compile(const Kernel& k, const std::string& digest,
                                   CompileCache& cache) override {
    if (auto p = load(digest, k.name, cache)) return p;
    auto p = std::make_unique<CpuProgram>();
    const std::string symbol = symbol_of(k.name, digest);
    std::string obj = jit_.compile_to_object(k, symbol);
    std::lock_guard<std::mutex> lock(mu_);
    // Another thread may have compiled the same digest meanwhile.
    if (auto it = loaded_.find(digest); it != loaded_.end()) {
      p->fn = it->second;
      return p;
    }
    cache.store(digest, k.name, obj);
    p->fn = loaded_[digest] = jit_.load_object(obj, symbol).fn;
    return p;
  }
  bool parallel_compile() const override { return true; }

  bool loads_by_digest() const override { return true; }
  std::unique_ptr<Program> load(const std::string& digest, const std::string& kernel,
                                CompileCache& cache) override {
    auto p = std::make_unique<CpuProgram>();
    std::lock_guard<std::mutex> lock(mu_);
    // Specs that differ only in what a kernel ignores (an unused dtype
    // role) build the same IR, hence the same digest and symbol, which
    // the JIT may define once: they share the loaded function.
    if (auto it = loaded_.find(digest); it != loaded_.end()) {
      p->fn = it->second;
      return p;
    }
    auto obj = cache.load(digest);
    if (!obj) return nullptr;
    try {
      p->fn = loaded_[digest] = jit_.load_object(*obj, symbol_of(kernel, digest)).fn;
      p->from_cache = true;
      return p;
    } catch (const Error&) {
      // A checksummed entry the linker still rejects: recompile and replace it.
      ++cache.corrupt;
      return nullptr;
    }
  }

  std::unique_ptr<BoundLaunch> bind(const Program& p, const Kernel& k, const std::vector<Arg>& args,
                                    const Grid& grid, int64_t bytes) override {
    return std::make_unique<CpuLaunch>(k, static_cast<const CpuProgram&>(p).fn, args, grid, pool_,
                                       bytes);
  }

  CpuJit& jit() { return jit_; }

 private:
  static std::string symbol_of(const std::string& kernel, const std::string& digest) {
    return "kiln_" + kernel + "_" + digest.substr(0, 24);
  }

  ThreadPool& pool_;
  CpuJit jit_;
  std::mutex mu_;                                // loaded_ and the JIT's symbols
  std::map<std::string, KernelRangeFn> loaded_;  // by digest
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(ThreadPool& pool) {
  return std::make_unique<CpuBackend>(pool);
}

CpuJit& cpu_jit(Backend& b) {
  auto* cpu = dynamic_cast<CpuBackend*>(&b);
  if (!cpu) throw Error("backend '" + b.name() + "' has no CPU JIT");
  return cpu->jit();
}

}  // namespace kiln
