// `kiln inspect KERNEL ...`: the IR as built, after each pass or after the
// pipeline; the LLVM IR before/after O3; the assembly, for any CPU target;
// for --target cuda the CUDA C, the PTX and ptxas' resource report.
#include <cstdio>

#include "ir/error.h"
#include "ir/passes.h"
#include "ir/printer.h"
#include "kernels/registry.h"
#include "runtime/cuda/cuda_compile.h"
#include "targets/cpu/cpu_jit.h"
#include "tools/cli.h"

namespace kiln {

namespace {

int inspect_cuda(const KernelDef& def, const Spec& spec, const CliArgs& a) {
  if (a.flag("cuda") + a.flag("ptx") + a.flag("resources") != 1)
    throw Error("--target cuda: choose exactly one of --cuda, --ptx, --resources");
  std::string arch = a.get("arch", "sm_80");
  if (arch != "sm_80" && arch != "sm_86" && arch != "sm_89" && arch != "sm_90")
    throw Error("unknown CUDA arch '" + arch + "' (known: sm_80, sm_86, sm_89, sm_90)");
  CudaOptions o;
  o.sm = std::stoi(arch.substr(3));
  o.num_warps = static_cast<int>(a.get_int("warps", 4));
  Kernel k = run_pipeline(def.build(spec));
  CudaSource src = emit_cuda(k, o);
  if (a.flag("cuda")) {
    std::fputs(src.code.c_str(), stdout);
    return 0;
  }
  CompileCache cache(CompileCache::default_dir());
  CachedModule ptx = cached_module(cache, src);
  if (a.flag("ptx")) {
    std::fputs(ptx.module.ptx.c_str(), stdout);
    return 0;
  }
  PtxasReport r = run_ptxas(ptx.module, o.sm);
  std::printf("kernel %s for %s: %d threads per block (%d warps)\n", spec.str().c_str(),
              arch.c_str(), src.threads, o.num_warps);
  std::printf("registers per thread: %d\n", r.registers);
  std::printf("shared memory per block: %lld bytes dynamic, %lld static (limit %lld)\n",
              static_cast<long long>(src.shared_bytes), static_cast<long long>(r.shared_bytes),
              static_cast<long long>(cuda_max_shared_bytes(o.sm)));
  std::printf("stack frame %lld bytes, spill stores %lld bytes, spill loads %lld bytes\n",
              static_cast<long long>(r.stack_bytes), static_cast<long long>(r.spill_store_bytes),
              static_cast<long long>(r.spill_load_bytes));
  std::printf("tensor cores (mma.sync): %s\n", src.uses_mma ? "yes" : "no");
  if (ptx.from_cache)
    std::printf("NVRTC: PTX from the compile cache\n");
  else
    std::printf("NVRTC compile: %.1f ms\n", ptx.module.compile_ms);
  std::printf("--- ptxas -v ---\n%s", r.text.c_str());
  return 0;
}

}  // namespace

int cmd_inspect(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"ir", "llvm", "asm", "before", "help", "cuda", "ptx", "resources"});
  a.allow_only({"ir", "llvm", "asm", "before", "help", "dtype", "const", "target", "after", "cuda",
                "ptx", "resources", "arch", "warps"});
  if (a.flag("help") || a.positional().size() != 1) {
    std::puts(
        "usage: kiln inspect KERNEL [--dtype [ROLE=]DT] [--const NAME=V]\n"
        "                    [--target host|x86-64-v3|x86-64-v4|aarch64|cuda]\n"
        "                    (--ir [--before | --after "
        "recognize_dot_groups|fold_constants|cse|dce] | --llvm [--before] "
        "| --asm)\n"
        "  --ir      the kernel IR after the pass pipeline (--before: as built)\n"
        "  --llvm    the LLVM module after O3 for the target (--before: as lowered)\n"
        "  --asm     the assembly for the target\n"
        "With --target cuda [--arch sm_80|sm_90] [--warps N] (one of):\n"
        "  --cuda       the generated CUDA C\n"
        "  --ptx        the PTX from NVRTC\n"
        "  --resources  ptxas' registers, shared memory and spills, and the NVRTC compile time");
    return a.flag("help") ? 0 : 2;
  }
  Spec spec = spec_from_args(a.positional()[0], a);
  const KernelDef& def = find_kernel(spec.kernel);
  const std::string target_name = a.get("target", "host");
  if (target_name == "cuda") {
    spec.target = cuda_target_desc();
    return inspect_cuda(def, spec, a);
  }
  spec.target = target_desc(named_cpu_target(target_name));
  int modes = a.flag("ir") + a.flag("llvm") + a.flag("asm") + a.has("after");
  if (modes != 1) throw Error("choose exactly one of --ir, --after PASS, --llvm, --asm");
  Kernel built = def.build(spec);
  if (a.flag("ir")) {
    std::fputs(print_kernel(a.flag("before") ? built : run_pipeline(built)).c_str(), stdout);
    return 0;
  }
  if (a.has("after")) {
    std::string pass = a.get("after");
    std::vector<PassDump> dumps;
    run_pipeline(built, &dumps);
    for (const PassDump& d : dumps) {
      if (d.pass == pass) {
        std::fputs(print_kernel(d.after).c_str(), stdout);
        return 0;
      }
    }
    throw Error("unknown pass '" + pass +
                "' (passes: recognize_dot_groups, fold_constants, cse, dce)");
  }
  CpuTarget target = named_cpu_target(target_name);
  Kernel k = run_pipeline(built);
  if (a.flag("llvm"))
    std::fputs(cpu_llvm_ir(k, target, !a.flag("before")).c_str(), stdout);
  else
    std::fputs(cpu_assembly(k, target).c_str(), stdout);
  return 0;
}

}  // namespace kiln
