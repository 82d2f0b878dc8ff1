#include "runtime/cuda_sim/cuda_sim_backend.h"

#include <cstdlib>

#include "runtime/cuda/cuda_compile.h"
#include "runtime/cuda/cuda_policy.h"
#include "runtime/host_backend.h"
#include "targets/cuda/cuda_simulator.h"

namespace kiln {

namespace {

constexpr int kSimSm = 80;

struct SimProgram : Program {
  std::shared_ptr<SimulatedKernel> sim;
};

class SimLaunch : public BoundLaunch {
 public:
  SimLaunch(const SimProgram& p, const Kernel& k, std::vector<Arg> args, const Grid& grid)
      : p_(p), k_(k), args_(std::move(args)), grid_(grid) {}
  void set_scalar(size_t index, int64_t v) override { args_.at(index) = Arg::scalar_int(v); }
  void run() override { p_.sim->launch(k_, args_, grid_); }

 private:
  const SimProgram& p_;
  const Kernel& k_;
  std::vector<Arg> args_;
  Grid grid_;
};

class CudaSimBackend : public HostMemoryBackend {
 public:
  std::string name() const override { return "cuda-sim"; }
  std::string target() const override { return "sm_" + std::to_string(kSimSm) + " simulated"; }
  std::string codegen_version() const override {
    const char* cxx = std::getenv("KILN_HOST_CXX");
    return std::string("host compiler ") + (cxx && *cxx ? cxx : "c++") + ", " +
           cuda_codegen_version();
  }
  std::string tuning_class() const override { return "sm_" + std::to_string(kSimSm); }
  TargetDesc target_desc() const override { return cuda_target_desc(); }
  const KernelPolicy& policy() const override { return cuda_kernel_policy(kSimSm); }

  // The simulator keeps its compiled sources by content itself
  // (SimulatedKernel::cache_dir), so the compile cache is not used.
  std::unique_ptr<Program> compile(const Kernel& k, const std::string&, CompileCache&) override {
    auto p = std::make_unique<SimProgram>();
    p->sim = SimulatedKernel::compile(emit_cuda(k, {cuda_program_warps(k), kSimSm}));
    return p;
  }

  std::unique_ptr<BoundLaunch> bind(const Program& p, const Kernel& k, const std::vector<Arg>& args,
                                    const Grid& grid, int64_t) override {
    check_arg_kinds(k, args);
    return std::make_unique<SimLaunch>(static_cast<const SimProgram&>(p), k, args, grid);
  }

 private:
};

}  // namespace

std::unique_ptr<Backend> make_cuda_sim_backend() { return std::make_unique<CudaSimBackend>(); }

}  // namespace kiln
