// `kiln list [--compile]`: the library kernels; with --compile, the cold JIT
// compile time of each kernel's default spec.
#include <cstdio>

#include "kernels/registry.h"
#include "runtime/runtime.h"
#include "tools/cli.h"

namespace kiln {

int cmd_list(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"compile", "help"});
  a.allow_only({"compile", "help"});
  if (a.flag("help")) {
    std::puts(
        "usage: kiln list [--compile]\n  --compile  JIT-compile each kernel's default spec and "
        "print the time");
    return 0;
  }
  std::unique_ptr<Runtime> rt;
  if (a.flag("compile")) rt = std::make_unique<Runtime>(1);
  double total = 0;
  for (const KernelDef& d : all_kernels()) {
    std::string roles, consts;
    for (const auto& [r, ts] : d.dtype_roles) {
      roles += (roles.empty() ? "" : " ") + r + "=";
      for (size_t i = 0; i < ts.size(); ++i)
        roles += (i ? "|" : "") + std::string(dtype_name(ts[i]));
    }
    for (const auto& [c, v] : d.constexpr_defaults)
      consts += (consts.empty() ? "" : " ") + c + "=" + std::to_string(v);
    std::printf("%-12s %-12s %-34s %-28s %s", d.name.c_str(), d.family.c_str(), roles.c_str(),
                consts.c_str(), d.summary.c_str());
    if (rt) {
      double ms = rt->compile(d.make_spec()).cpu.compile_ms;
      total += ms;
      std::printf("  [compile %.1f ms]", ms);
    }
    std::printf("\n");
  }
  if (rt) std::printf("total JIT compile time (cold, default specs): %.1f ms\n", total);
  return 0;
}

}  // namespace kiln
