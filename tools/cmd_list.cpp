// `kiln list [--compile] [KERNEL...]`: the library kernels (or the named
// ones); with --compile, the time to have each kernel's default spec ready
// (compiled cold, or loaded warm).
#include <cstdio>

#include "kernels/registry.h"
#include "runtime/runtime.h"
#include "tools/cli.h"

namespace kiln {

int cmd_list(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"compile", "help"});
  a.allow_only({"compile", "help", "plugin"});
  if (a.flag("help")) {
    std::puts(
        "usage: kiln list [--compile] [--plugin LIB.so...] [KERNEL...]\n"
        "  KERNEL     only these kernels\n"
        "  --plugin   also the kernels a plugin registers (runtime/plugin.h)\n"
        "  --compile  make each kernel's default spec ready (compile it, or load it from the\n"
        "             disk cache) and print the time");
    return 0;
  }
  load_plugins(a);
  std::unique_ptr<Runtime> rt;
  if (a.flag("compile")) rt = std::make_unique<Runtime>(1);
  std::vector<const KernelDef*> defs;
  for (const std::string& name : a.positional()) defs.push_back(&find_kernel(name));
  if (defs.empty())
    for (const KernelDef& d : all_kernels()) defs.push_back(&d);
  double total = 0;
  for (const KernelDef* def : defs) {
    const KernelDef& d = *def;
    std::string roles, consts;
    for (const auto& [r, ts] : d.dtype_roles) {
      roles += (roles.empty() ? "" : " ") + r + "=";
      for (size_t i = 0; i < ts.size(); ++i)
        roles += (i ? "|" : "") + std::string(dtype_name(ts[i]));
    }
    // The default spec's constexprs, after the kernel's heuristic.
    for (const auto& [c, v] : d.make_spec().constexprs)
      consts += (consts.empty() ? "" : " ") + c + "=" + std::to_string(v);
    std::printf("%-12s %-12s %-34s %-28s %s", d.name.c_str(), d.family.c_str(), roles.c_str(),
                consts.c_str(), d.summary.c_str());
    if (!d.origin.empty()) std::printf("  [%s]", d.origin.c_str());
    if (rt) {
      const CompiledKernel& c = rt->compile(d.make_spec());
      total += c.compile_ms;
      std::printf("  [%s %.1f ms]", c.from_disk ? "cached" : "compiled", c.compile_ms);
    }
    std::printf("\n");
  }
  if (rt)
    std::printf("total time to have the kernels ready: %.1f ms (%d from the disk cache)\n", total,
                rt->cache().hits.load());
  return 0;
}

}  // namespace kiln
