#include "runtime/generated_code.h"

#include "codegen/cuda/cuda_codegen.h"
#include "ir/error.h"
#include "ir/passes.h"
#include "ir/printer.h"
#include "kernels/registry.h"
#include "runtime/compile_cache.h"
#include "runtime/cuda/cuda_compile.h"
#include "runtime/cuda/cuda_policy.h"
#include "runtime/runtime.h"
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

bool is_cuda(const CodeTarget& t) {
  if (t.name != "cuda") return false;
  if (t.sm != 80 && t.sm != 86 && t.sm != 89 && t.sm != 90)
    throw Error("unknown CUDA arch 'sm_" + std::to_string(t.sm) +
                "' (known: sm_80, sm_86, sm_89, sm_90)");
  return true;
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
  CudaOptions o;
  o.sm = target.sm;
  o.num_warps = target.num_warps > 0 ? target.num_warps : cuda_program_warps(k);
  CudaSource src = emit_cuda(k, o);
  if (form == CodeForm::cuda) return src.code;
  CompileCache cache(CompileCache::default_dir());
  return cached_module(cache, src).module.ptx;
}

}  // namespace kiln
