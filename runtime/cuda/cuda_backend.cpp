#include "runtime/cuda/cuda_backend.h"

#include <cstdio>
#include <map>
#include <mutex>

#include "ir/error.h"
#include "runtime/cuda/cuda_compile.h"
#include "runtime/cuda/cuda_policy.h"
#include "targets/cuda/cuda_device.h"
#include "targets/cuda/kernel_params.h"

namespace kiln {

namespace {

struct CudaProgram : Program {
  CudaSource src;
  CudaModule module;  // the cubin for the GPU at hand
};

class CudaLaunch : public BoundLaunch {
 public:
  CudaLaunch(CudaDevice& dev, const CudaProgram& p, const Kernel& k, std::vector<Arg> args,
             const Grid& grid)
      : dev_(dev),
        p_(p),
        fn_(dev.load(p.src, p.module)),
        k_(k),
        args_(std::move(args)),
        grid_(grid) {
    repack();
  }
  void set_scalar(size_t index, int64_t v) override {
    args_.at(index) = Arg::scalar_int(v);
    repack();
  }
  void run() override { dev_.launch(p_.src, fn_, grid_, params_.ptrs.data()); }

 private:
  void repack() {
    params_ = pack_kernel_params(k_, args_, [&](size_t i) {
      return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(args_[i].data));
    });
  }
  CudaDevice& dev_;
  const CudaProgram& p_;
  CudaDevice::Function fn_;
  const Kernel& k_;
  std::vector<Arg> args_;
  Grid grid_;
  KernelParams params_;
};

class CudaBackend : public Backend {
 public:
  CudaBackend() : dev_(CudaDevice::get()) {
    if (dev_.sm() < kCudaMmaSm)
      std::fprintf(stderr,
                   "kiln: %s is sm_%d, without mma.sync (sm_%d and later): attention runs as "
                   "FMAs (the walk), not tile dots\n",
                   dev_.name().c_str(), dev_.sm(), kCudaMmaSm);
  }

  std::string name() const override { return "cuda"; }
  std::string target() const override { return "sm_" + std::to_string(dev_.sm()); }
  std::string codegen_version() const override {
    return "nvrtc " + nvrtc_version() + ", " + cuda_codegen_version();
  }
  std::string tuning_class() const override { return target(); }
  TargetDesc target_desc() const override { return cuda_target_desc(); }
  const KernelPolicy& policy() const override { return cuda_kernel_policy(dev_.sm()); }
  bool host_visible() const override { return false; }

  std::unique_ptr<Program> compile(const Kernel& k, const std::string&,
                                   CompileCache& cache) override {
    auto p = std::make_unique<CudaProgram>();
    p->src = emit_cuda(k, {cuda_program_warps(k), dev_.sm()});
    CachedModule m = cached_module(cache, p->src, dev_.sm());
    p->module = std::move(m.module);
    p->from_cache = m.from_cache;
    return p;
  }
  // emit_cuda is pure, NVRTC compiles each program on its own, and the
  // cache locks itself.
  bool parallel_compile() const override { return true; }

  std::unique_ptr<BoundLaunch> bind(const Program& p, const Kernel& k, const std::vector<Arg>& args,
                                    const Grid& grid, int64_t) override {
    check_arg_kinds(k, args);
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_buffer || args[i].count == 0) continue;
      size_t bytes = static_cast<size_t>(args[i].count * dtype_bytes(k.params[i].dtype));
      if (!owns(args[i].data, bytes))
        throw Error("kernel '" + k.name + "': buffer '" + k.params[i].name + "' (" +
                    std::to_string(bytes) + " bytes) is not memory of the cuda backend (" +
                    dev_.name() + "); host buffers must be uploaded first");
    }
    return std::make_unique<CudaLaunch>(dev_, static_cast<const CudaProgram&>(p), k, args, grid);
  }

  void* alloc(size_t bytes) override {
    uint64_t p = dev_.alloc(bytes);
    dev_.synchronize();
    std::vector<uint8_t> zeros(bytes);
    dev_.upload(p, zeros.data(), bytes);
    std::lock_guard<std::mutex> lock(mu_);
    allocations_[p] = bytes;
    return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  }
  void free(void* p) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      allocations_.erase(address(p));
    }
    dev_.free(address(p));
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    dev_.upload(address(dst), src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    dev_.synchronize();
    dev_.download(dst, address(src), bytes);
  }
  void synchronize() override { dev_.synchronize(); }

 private:
  static uint64_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }
  // Whether [p, p + bytes) lies inside one allocation of this backend.
  bool owns(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.upper_bound(address(p));
    if (it == allocations_.begin()) return false;
    --it;
    return address(p) + bytes <= it->first + it->second;
  }

  CudaDevice& dev_;
  std::mutex mu_;
  std::map<uint64_t, size_t> allocations_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace kiln
