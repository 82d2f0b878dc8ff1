// A device Kiln runs kernels on, behind one interface.
//
// As a ggml backend fills `ggml_backend_i` and a tinygrad device is
// `Compiled(renderer, compiler, runtime)`, a backend turns a verified kernel
// into a program (its own renderer, compiler and cache key), allocates
// buffers, copies between them and the host, and launches. The runtime,
// plans, the compile cache and the tuning database hold a Backend and its
// opaque Programs, never a backend's own types, so a kernel family or a
// model lands once and runs on every backend. Each backend is one folder
// under runtime/ (cpu/, cuda/, cuda_sim/) with one small header that makes
// it; make_backend() is the table of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "ir/kernel.h"
#include "ir/spec.h"
#include "runtime/compile_cache.h"
#include "runtime/kernel_policy.h"

namespace kiln {

class ThreadPool;

// A kernel compiled for one backend.
class Program {
 public:
  virtual ~Program() = default;
  bool from_cache = false;  // loaded, not compiled
};

// A launch whose arguments were checked and packed once: a plan replays it
// with only its dynamic scalars changed.
class BoundLaunch {
 public:
  virtual ~BoundLaunch() = default;
  // Sets argument `index` (an integer scalar parameter) to v.
  virtual void set_scalar(size_t index, int64_t v) = 0;
  virtual void run() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda", "cuda-sim"
  // What decides the machine code besides the IR: the target (triple, CPU
  // and features; or the sm arch) and the code generator and toolchain
  // versions. Both enter the compile key, so one backend's change never
  // invalidates another's cached programs.
  virtual std::string target() const = 0;
  virtual std::string codegen_version() const = 0;
  // The tuning database's file name for this target ("x86-64-v4", "sm_90").
  virtual std::string tuning_class() const = 0;
  // The machine's model, which tuning entries may be restricted to
  // ("znver5"); empty where none is.
  virtual std::string tuning_cpu() const { return ""; }
  // What kernels built for this backend may assume of the machine (Spec::target).
  virtual TargetDesc target_desc() const = 0;
  // Which kernels, weight layouts and attention variants suit this
  // backend's machine (runtime/kernel_policy.h): the ops and the weight
  // loader ask it.
  virtual const KernelPolicy& policy() const = 0;
  // Whether buffers are host memory: then host code and the reference
  // interpreter read them in place.
  virtual bool host_visible() const = 0;
  // Programs run in parallel over this many host threads (1 for devices).
  virtual int threads() const { return 1; }

  // Compiles a verified kernel (after the passes) whose compile key has
  // digest `digest`, through the compile cache where the backend keeps
  // compiled code there.
  virtual std::unique_ptr<Program> compile(const Kernel& k, const std::string& digest,
                                           CompileCache& cache) = 0;
  // The program compiled earlier under `digest` (a kernel named `kernel`),
  // straight from the compile cache without its IR, where this backend
  // keeps programs there by digest (the CPU's objects); nullptr when it is
  // not cached or the backend cannot load one so. A warm process then
  // skips building the IR (Runtime::compile, spec_index_key).
  virtual bool loads_by_digest() const { return false; }
  virtual std::unique_ptr<Program> load(const std::string& digest, const std::string& kernel,
                                        CompileCache& cache) {
    (void)digest;
    (void)kernel;
    (void)cache;
    return nullptr;
  }
  // Whether compile() may run on several threads at once: a plan's kernels
  // are then compiled in parallel (Runtime::compile_all).
  virtual bool parallel_compile() const { return false; }
  // Checks and packs a launch. `bytes`: what its buffers need, -1 for a
  // compute-bound launch (see LaunchShape). Buffers must be this backend's.
  virtual std::unique_ptr<BoundLaunch> bind(const Program& p, const Kernel& k,
                                            const std::vector<Arg>& args, const Grid& grid,
                                            int64_t bytes) = 0;

  // Device memory, zero-filled, aligned to 64 bytes at least.
  virtual void* alloc(size_t bytes) = 0;
  // Makes an allocation resident now instead of at first touch. A KV cache
  // is written a row per token: left to fault in, its pages (2 MiB zeroed at
  // a time on a huge-page host) land in token latency, and a context the
  // machine cannot hold would fail mid-generation. Throws kiln::Error when
  // memory runs out. Device allocations are resident already.
  virtual void commit(void* p, size_t bytes) {
    (void)p;
    (void)bytes;
  }
  virtual void free(void* p) = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  // Copies between two buffers of this backend, after every launch issued
  // so far. By default staged through the host: rare copies (a KV page's
  // copy-on-write) need no device path of their own.
  virtual void copy(void* dst, const void* src, size_t bytes) {
    std::vector<uint8_t> staged(bytes);
    download(staged.data(), src, bytes);
    upload(dst, staged.data(), bytes);
  }
  // Waits for every launch and copy issued so far.
  virtual void synchronize() {}
};

// A backend by name ("cpu", "cuda", "cuda-sim"); `pool` runs the CPU's
// programs. Throws kiln::Error naming the backends, or saying in one line
// why this one cannot start (no GPU, no driver).
std::unique_ptr<Backend> make_backend(const std::string& name, ThreadPool& pool);
std::vector<std::string> backend_names();

// Checks a launch's arguments against the kernel's parameters (count and
// kinds); throws kiln::Error naming the kernel and the offending argument.
void check_arg_kinds(const Kernel& k, const std::vector<Arg>& args);

// A buffer of one backend, freed with it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& b, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kiln
