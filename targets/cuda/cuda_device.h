// A CUDA GPU through the driver API, loaded with dlopen("libcuda.so.1").
//
// Nothing links against the driver, so Kiln builds and runs on machines
// without one; only asking for the device (`--device cuda`) fails there,
// with a one-line reason. The device holds one context; modules are loaded
// from a cubin for the GPU at hand, or from PTX (which the driver compiles),
// and launches check the block and shared-memory limits before calling the
// driver.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "ir/interpreter.h"
#include "targets/cuda/nvrtc_compiler.h"

namespace kiln {

class CudaDevice {
 public:
  // The first GPU. Throws kiln::Error with one line saying why there is
  // none (no driver library, cuInit failed, no device).
  static CudaDevice& get();

  const std::string& name() const { return name_; }
  int sm() const { return sm_; }  // compute capability x10

  uint64_t alloc(size_t bytes);
  void free(uint64_t ptr);
  void upload(uint64_t dst, const void* src, size_t bytes);
  void download(void* dst, uint64_t src, size_t bytes);
  void synchronize();

  // A kernel ready to launch: its module loaded (once per cubin or PTX
  // image; the driver JIT-compiles PTX) and its shared-memory limit raised.
  using Function = void*;
  Function load(const CudaSource& src, const CudaModule& m);

  // Launches src.entry over `grid` blocks of src.threads threads with
  // src.shared_bytes of dynamic shared memory; `params` point at each
  // argument's value, as cuLaunchKernel takes.
  void launch(const CudaSource& src, Function fn, const Grid& grid, void** params);

  // Copies the host buffers of `args` to the device, launches, copies them
  // back: the simplest way to run one kernel on host data.
  void run(const Kernel& k, const CudaSource& src, const CudaModule& m,
           const std::vector<Arg>& args, const Grid& grid);

  struct Api;

 private:
  CudaDevice() = default;
  std::unique_ptr<Api> api_;
  void* ctx_ = nullptr;
  std::string name_;
  int sm_ = 0;
  std::vector<std::pair<std::string, void*>> modules_;  // image -> CUmodule
};

}  // namespace kiln
