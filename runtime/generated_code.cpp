#include "runtime/generated_code.h"

#include "ir/error.h"
#include "ir/passes.h"
#include "ir/printer.h"
#include "kernels/registry.h"
#include "runtime/compile_cache.h"
#include "runtime/cuda/cuda_compile.h"
#include "runtime/cuda/cuda_policy.h"
#include "targets/cpu/cpu_jit.h"
#include "targets/cpu/cpu_target.h"

namespace kiln {

CodeForm parse_code_form(const std::string& name) {
  static const std::map<std::string, CodeForm> kForms = {{"ir-before", CodeForm::ir_built},
                                                         {"ir", CodeForm::ir},
                                                         {"llvm-before", CodeForm::llvm_before},
                                                         {"llvm", CodeForm::llvm},
                                                         {"asm", CodeForm::assembly},
                                                         {"cuda", CodeForm::cuda},
                                                         {"ptx", CodeForm::ptx}};
  auto it = kForms.find(name);
  if (it == kForms.end())
    throw Error("unknown code form '" + name +
                "' (known: ir, ir-before, llvm, llvm-before, asm, cuda, ptx)");
  return it->second;
}

namespace {

constexpr int kCudaArchs[] = {80, 86, 89, 90};

bool is_cuda(const CodeTarget& t) {
  if (t.name != "cuda") return false;
  parse_cuda_arch("sm_" + std::to_string(t.sm));
  return true;
}

}  // namespace

int parse_cuda_arch(const std::string& arch) {
  for (int sm : kCudaArchs)
    if (arch == "sm_" + std::to_string(sm)) return sm;
  std::string known;
  for (int sm : kCudaArchs) known += (known.empty() ? "sm_" : ", sm_") + std::to_string(sm);
  throw Error("unknown CUDA arch '" + arch + "' (known: " + known + ")");
}

namespace {

// The emitter's options for a kernel on a cuda target: its own warps unless
// the target names them.
CudaOptions cuda_options(const Kernel& k, const CodeTarget& target) {
  CudaOptions o;
  o.sm = target.sm;
  o.num_warps = target.num_warps > 0 ? target.num_warps : cuda_program_warps(k);
  return o;
}

}  // namespace

TargetDesc code_target_desc(const CodeTarget& target) {
  return is_cuda(target) ? cuda_target_desc() : target_desc(named_cpu_target(target.name));
}

Spec code_spec(const std::string& kernel, const std::map<std::string, DType>& dtypes,
               const std::map<std::string, int64_t>& constexprs, const CodeTarget& target) {
  return find_kernel(kernel).make_spec(dtypes, constexprs, code_target_desc(target));
}

std::string generated_code(const Spec& spec, CodeForm form, const CodeTarget& target) {
  const bool cuda = is_cuda(target);
  Kernel built = find_kernel(spec.kernel).build(spec);
  if (form == CodeForm::ir_built) return print_kernel(built);
  Kernel k = run_pipeline(built);
  if (form == CodeForm::ir) return print_kernel(k);
  const bool cuda_form = form == CodeForm::cuda || form == CodeForm::ptx;
  if (cuda != cuda_form)
    throw Error(std::string(cuda_form ? "CUDA C and PTX are for the target cuda"
                                      : "LLVM IR and assembly are for CPU targets") +
                ", not '" + target.name + "'");
  if (!cuda) {
    CpuTarget t = named_cpu_target(target.name);
    if (form == CodeForm::assembly) return cpu_assembly(k, t);
    return cpu_llvm_ir(k, t, form == CodeForm::llvm);
  }
  CudaSource src = emit_cuda(k, cuda_options(k, target));
  if (form == CodeForm::cuda) return src.code;
  CompileCache cache(CompileCache::default_dir());
  return cached_module(cache, src).module.ptx;
}

CudaSource cuda_source(const Spec& spec, const CodeTarget& target) {
  if (!is_cuda(target)) throw Error("CUDA C is for the target cuda, not '" + target.name + "'");
  Kernel k = run_pipeline(find_kernel(spec.kernel).build(spec));
  return emit_cuda(k, cuda_options(k, target));
}

}  // namespace kiln
