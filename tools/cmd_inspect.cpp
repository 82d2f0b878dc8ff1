// `kiln inspect KERNEL ...`: the IR as built, after each pass or after the
// pipeline; the LLVM IR before/after O3; the assembly, for any CPU target;
// for --target cuda the CUDA C, the PTX and ptxas' resource report.
// `kiln inspect --model MODEL --target cuda`: the same report for every
// kernel a model's plans launch on a GPU, without one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "ir/error.h"
#include "ir/passes.h"
#include "ir/printer.h"
#include "kernels/registry.h"
#include "models/llm.h"
#include "runtime/cuda/cuda_compile.h"
#include "runtime/cuda/cuda_policy.h"
#include "runtime/cuda/gpu_kernel_report.h"
#include "runtime/generated_code.h"
#include "runtime/tuner.h"
#include "targets/cpu/cpu_jit.h"
#include "targets/cpu/thread_pool.h"
#include "tools/cli.h"

namespace kiln {

namespace {

CodeTarget cuda_code_target(const CliArgs& a) {
  CodeTarget t{"cuda", parse_cuda_arch(a.get("arch", "sm_80"))};
  t.num_warps = static_cast<int>(a.get_int("warps", 0));
  return t;
}

int inspect_cuda(const Spec& spec, const CliArgs& a) {
  if (a.flag("cuda") + a.flag("ptx") + a.flag("resources") != 1)
    throw Error("--target cuda: choose exactly one of --cuda, --ptx, --resources");
  CodeTarget target = cuda_code_target(a);
  if (!a.flag("resources")) {
    std::fputs(
        generated_code(spec, a.flag("cuda") ? CodeForm::cuda : CodeForm::ptx, target).c_str(),
        stdout);
    return 0;
  }
  const std::string arch = "sm_" + std::to_string(target.sm);
  CudaSource src = cuda_source(spec, target);
  CompileCache cache(CompileCache::default_dir());
  CachedModule ptx = cached_module(cache, src);
  PtxasReport r = run_ptxas(ptx.module, target.sm);
  std::printf("kernel %s for %s: %d threads per block (%d warps)\n", spec.str().c_str(),
              arch.c_str(), src.threads, src.threads / 32);
  std::printf("registers per thread: %d\n", r.registers);
  std::printf("shared memory per block: %lld bytes dynamic, %lld static (limit %lld)\n",
              static_cast<long long>(src.shared_bytes), static_cast<long long>(r.shared_bytes),
              static_cast<long long>(cuda_max_shared_bytes(target.sm)));
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

// `--why`: Runtime::explain for the sizes of --shape (and float scalars of
// --scalar) on this machine's backend (or --device's).
int inspect_why(const std::string& kernel, const CliArgs& a) {
  RuntimeOptions o;
  o.threads = 1;
  o.backend = a.get("device", "cpu");
  Runtime rt(o);
  const TuneOptions given = tune_options_from_args(kernel, a, false);
  ScalarArgs sizes;
  std::string shown, needed;
  for (const auto& [k, v] : given.shape) {
    sizes.set_int(k, v);
    shown += (shown.empty() ? "" : ",") + k + "=" + std::to_string(v);
  }
  for (const auto& [k, v] : given.floats) sizes.set_float(k, v);
  const KernelDef& def = find_kernel(kernel);
  bool missing = false;
  for (const std::string& key : def.shape_keys) {
    needed += (needed.empty() ? "" : ",") + key + "=N";
    missing |= !given.shape.count(key);
  }
  if (missing)
    throw Error("--why: kernel '" + kernel + "' chooses by the sizes " + needed +
                "; give them with --shape");
  Runtime::Selection sel = rt.explain(kernel, given.dtypes, sizes, given.fixed);
  const std::string cpu = rt.backend().tuning_cpu();
  std::printf("%s for %s on %s%s\n", sel.spec.str().c_str(),
              shown.empty() ? "any sizes" : shown.c_str(), rt.backend().tuning_class().c_str(),
              cpu.empty() ? "" : (" (" + cpu + ")").c_str());
  for (const auto& [name, v] : sel.spec.constexprs)
    std::printf("  %-10s = %-8lld %s\n", name.c_str(), static_cast<long long>(v),
                sel.origin.at(name).c_str());
  return 0;
}

// Every distinct kernel the model's plans for the given token counts launch
// as the cuda backend records them (its kernel policy and target, through
// cuda-sim, which needs no GPU), compiled as a first `kiln run --device
// cuda` compiles them: NVRTC to a cubin for the arch, on every core.
int inspect_model(const CliArgs& a) {
  if (a.get("target", "") != "cuda")
    throw Error("--model: give --target cuda (a model's CPU kernels are timed by kiln run)");
  const int sm = parse_cuda_arch(a.get("arch", "sm_90"));
  const std::string arch = "sm_" + std::to_string(sm);
  const std::vector<int64_t> token_counts = parse_int_list(a.get("tokens", "512,1"), "--tokens");
  Runtime rt(RuntimeOptions{1, "", true, "cuda-sim"});
  Llm model(a.get("model"), rt, a.get_int("ctx", 4096));
  std::vector<GpuKernelReport> rows;
  std::map<std::string, size_t> row_of;
  for (int64_t n : token_counts)
    for (const Spec& s : model.plan_specs(n)) {
      auto [it, fresh] = row_of.emplace(s.str(), rows.size());
      if (fresh) {
        rows.emplace_back();
        rows.back().spec = s;
      }
      ++rows[it->second].launches;
    }
  // As the backend's compile_all spreads a plan's kernels.
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const double wall_ms = compile_gpu_reports(rows, sm, threads);

  std::printf("model %s (%s), the cuda kernel policy, %s\n", a.get("model").c_str(),
              model.config().arch.c_str(), arch.c_str());
  std::printf("%-9s %6s %8s %7s %5s %8s %8s %4s  %s\n", "CUDA_C_KB", "NVRTC", "launches", "threads",
              "regs", "spill_B", "smem_B", "mma", "kernel");
  double nvrtc_sum = 0;
  size_t biggest = 0, spilling = 0, failed = 0;
  for (const GpuKernelReport& r : rows) {
    if (!r.error.empty()) {
      ++failed;
      std::printf("error: %s: %s\n", r.spec.str().c_str(), r.error.c_str());
      continue;
    }
    const int64_t spill = r.spill_bytes();
    std::printf("%9.1f %6.0f %8lld %7d %5d %8lld %8lld %4s  %s\n", r.cuda_bytes / 1024.0,
                r.nvrtc_ms, static_cast<long long>(r.launches), r.threads, r.ptxas.registers,
                static_cast<long long>(spill), static_cast<long long>(r.shared_bytes),
                r.mma ? "yes" : "no", r.spec.str().c_str());
    nvrtc_sum += r.nvrtc_ms;
    biggest = std::max(biggest, r.cuda_bytes);
    spilling += spill > 0;
  }
  std::printf(
      "%zu kernels: largest CUDA C %.1f KB; NVRTC %.0f ms of compile, %.0f ms wall on %u "
      "threads; %zu kernels spill registers\n",
      rows.size(), biggest / 1024.0, nvrtc_sum, wall_ms, threads, spilling);
  return failed ? 1 : 0;
}

}  // namespace

int cmd_inspect(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"ir", "llvm", "asm", "before", "help", "cuda", "ptx", "resources", "why"});
  a.allow_only({"ir",    "llvm",   "asm", "before",    "help",   "dtype", "const", "target",
                "after", "cuda",   "ptx", "resources", "arch",   "warps", "model", "tokens",
                "ctx",   "plugin", "why", "shape",     "scalar", "device"});
  load_plugins(a);
  if (a.flag("why") && !a.flag("help")) {
    if (a.positional().size() != 1) throw Error("--why explains one KERNEL's constexprs");
    return inspect_why(a.positional()[0], a);
  }
  if (a.has("model") && !a.flag("help")) {
    if (!a.positional().empty()) throw Error("--model inspects a model's kernels: give no KERNEL");
    return inspect_model(a);
  }
  if (a.flag("help") || a.positional().size() != 1) {
    std::puts(
        "usage: kiln inspect KERNEL [--dtype [ROLE=]DT] [--const NAME=V] [--plugin LIB.so]\n"
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
        "  --resources  ptxas' registers, shared memory and spills, and the NVRTC compile time\n"
        "kiln inspect KERNEL --why [--shape NAME=N,...] [--dtype ...] [--const ...] [--device "
        "cuda]\n"
        "  the spec a launch with those sizes runs on this machine and where each constexpr\n"
        "  came from: given (--const), the tuning database (file, line and entry), the shape\n"
        "  heuristic, the kernel's heuristic for its dtypes and target, or the default\n"
        "kiln inspect --model MODEL --target cuda [--arch sm_90] [--tokens 512,1] [--ctx 4096]\n"
        "  every kernel of the model's plans for those token counts as the cuda backend runs\n"
        "  them: CUDA C size, NVRTC time (a cubin, as a first run compiles), registers, spills,\n"
        "  shared memory, tensor cores; no GPU needed");
    return a.flag("help") ? 0 : 2;
  }
  CodeTarget target{a.get("target", "host")};
  if (target.name == "cuda") target = cuda_code_target(a);
  Spec spec = spec_from_args(a.positional()[0], a, code_target_desc(target));
  if (target.name == "cuda") return inspect_cuda(spec, a);
  int modes = a.flag("ir") + a.flag("llvm") + a.flag("asm") + a.has("after");
  if (modes != 1) throw Error("choose exactly one of --ir, --after PASS, --llvm, --asm");
  if (a.has("after")) {
    std::string pass = a.get("after");
    std::vector<PassDump> dumps;
    run_pipeline(find_kernel(spec.kernel).build(spec), &dumps);
    for (const PassDump& d : dumps) {
      if (d.pass == pass) {
        std::fputs(print_kernel(d.after).c_str(), stdout);
        return 0;
      }
    }
    throw Error("unknown pass '" + pass +
                "' (passes: recognize_dot_groups, fold_constants, cse, dce)");
  }
  const bool before = a.flag("before");
  CodeForm form = a.flag("ir")     ? (before ? CodeForm::ir_built : CodeForm::ir)
                  : a.flag("llvm") ? (before ? CodeForm::llvm_before : CodeForm::llvm)
                                   : CodeForm::assembly;
  std::fputs(generated_code(spec, form, target).c_str(), stdout);
  return 0;
}

}  // namespace kiln
