// `kiln cache stats|list|clear`: the on-disk compile cache, and the CUDA
// simulator's compiled kernels (stats and clear).
#include <cstdio>

#include "ir/error.h"
#include "runtime/compile_cache.h"
#include "targets/cuda/cuda_simulator.h"
#include "tools/cli.h"

namespace kiln {

int cmd_cache(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help"});
  a.allow_only({"help"});
  if (a.flag("help") || a.positional().size() != 1) {
    std::puts(
        "usage: kiln cache stats|list|clear\n"
        "The compile cache lives in $KILN_CACHE_DIR (default ~/.cache/kiln); the CUDA\n"
        "simulator keeps its compiled kernels in $TMPDIR/kiln-cuda-sim-UID.");
    return a.flag("help") ? 0 : 2;
  }
  CompileCache cache(CompileCache::default_dir());
  if (!cache.persistent()) throw Error("no usable cache directory (set KILN_CACHE_DIR)");
  const std::string& what = a.positional()[0];
  if (what == "clear") {
    std::printf("removed %d entries from %s\n", cache.clear(), cache.dir().c_str());
    std::printf("removed %lld CUDA simulator builds from %s\n",
                static_cast<long long>(SimulatedKernel::clear_cache()),
                SimulatedKernel::cache_dir().c_str());
    return 0;
  }
  auto entries = cache.list();
  if (what == "list") {
    for (const auto& e : entries)
      std::printf("%s  %-12s %9lld bytes%s\n", e.digest.substr(0, 16).c_str(), e.kernel.c_str(),
                  static_cast<long long>(e.bytes), e.valid ? "" : "  CORRUPT (will be replaced)");
    return 0;
  }
  if (what == "stats") {
    int64_t bytes = 0;
    int bad = 0;
    for (const auto& e : entries) {
      bytes += e.bytes;
      bad += !e.valid;
    }
    std::printf("directory  %s\nentries    %zu (%d corrupt)\nbytes      %lld\n",
                cache.dir().c_str(), entries.size(), bad, static_cast<long long>(bytes));
    SimulatedKernel::CacheStats sim = SimulatedKernel::cache_stats();
    std::printf("CUDA simulator  %s: %lld builds, %lld bytes\n",
                SimulatedKernel::cache_dir().c_str(), static_cast<long long>(sim.builds),
                static_cast<long long>(sim.bytes));
    return 0;
  }
  throw Error("unknown cache command '" + what + "' (stats, list, clear)");
}

}  // namespace kiln
