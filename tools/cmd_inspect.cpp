// `kiln inspect KERNEL ...`: the IR as built, after each pass or after the
// pipeline; the LLVM IR before/after O3; the assembly, for any CPU target.
#include <cstdio>

#include "ir/error.h"
#include "ir/passes.h"
#include "ir/printer.h"
#include "kernels/registry.h"
#include "targets/cpu/cpu_jit.h"
#include "tools/cli.h"

namespace kiln {

int cmd_inspect(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"ir", "llvm", "asm", "before", "help"});
  a.allow_only({"ir", "llvm", "asm", "before", "help", "dtype", "const", "target", "after"});
  if (a.flag("help") || a.positional().size() != 1) {
    std::puts(
        "usage: kiln inspect KERNEL [--dtype [ROLE=]DT] [--const NAME=V]\n"
        "                    [--target host|x86-64-v3|x86-64-v4|aarch64]\n"
        "                    (--ir [--before | --after fold_constants|cse|dce] | --llvm [--before] "
        "| --asm)\n"
        "  --ir      the kernel IR after the pass pipeline (--before: as built)\n"
        "  --llvm    the LLVM module after O3 for the target (--before: as lowered)\n"
        "  --asm     the assembly for the target");
    return a.flag("help") ? 0 : 2;
  }
  Spec spec = spec_from_args(a.positional()[0], a);
  const KernelDef& def = find_kernel(spec.kernel);
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
    throw Error("unknown pass '" + pass + "' (passes: fold_constants, cse, dce)");
  }
  CpuTarget target = named_cpu_target(a.get("target", "host"));
  Kernel k = run_pipeline(built);
  if (a.flag("llvm"))
    std::fputs(cpu_llvm_ir(k, target, !a.flag("before")).c_str(), stdout);
  else
    std::fputs(cpu_assembly(k, target).c_str(), stdout);
  return 0;
}

}  // namespace kiln
