// `kiln run`: until model forwards exist, the main job JIT-compiles the
// library GEMV, runs it on generated weights, checks it against a double
// reference and reports compile time, latency and bandwidth.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "ir/error.h"
#include "runtime/runtime.h"
#include "tools/cli.h"
#include "tools/gemv_workload.h"

namespace kiln {

int cmd_run(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help"});
  a.allow_only({"help", "threads", "m", "k", "dtype", "const", "iters"});
  if (a.flag("help")) {
    std::puts(
        "usage: kiln run [--threads N] [--m 4096] [--k 4096] [--dtype W=f16] [--const "
        "BLOCK_K=128]\n"
        "                [--iters 50]\n"
        "JIT-compiles the GEMV kernel, runs it on random data, checks it against a "
        "double-precision\n"
        "reference and prints compile time, time per call and GB/s.");
    return 0;
  }
  int64_t m = a.get_int("m", 4096), k = a.get_int("k", 4096), iters = a.get_int("iters", 50);
  if (m <= 0 || k <= 0 || iters <= 0) throw Error("--m, --k and --iters must be positive");
  Runtime rt(static_cast<int>(a.get_int("threads", 0)));
  Spec spec = spec_from_args("gemv", a);
  GemvWorkload w(m, k, spec.dtype("W"), spec.dtype("X"));
  auto args = w.args();
  // Without --const the tuning database (or the kernel's heuristic) decides.
  if (a.all("const").empty()) spec = rt.select("gemv", spec.dtypes, args);
  std::printf("kernel   %s on %s, %d thread(s)\n", spec.str().c_str(),
              rt.jit().target().cpu.c_str(), rt.threads());
  const CompiledKernel& c = rt.compile(spec);
  std::printf("compile  %.1f ms (%s)\n", c.cpu.compile_ms,
              c.from_disk ? "loaded from the compile cache"
                          : "build + passes + LLVM O3 + machine code, now cached");
  rt.launch(spec, args);
  double err = w.relative_error();
  std::vector<double> ms;
  for (int64_t i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    rt.launch(spec, args);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double med = ms[ms.size() / 2];
  std::printf("result   y = W x, m=%lld k=%lld, max rel. error vs double reference %.2e\n",
              static_cast<long long>(m), static_cast<long long>(k), err);
  std::printf("time     median %.3f ms over %lld calls, %.1f GB/s\n", med,
              static_cast<long long>(iters), static_cast<double>(w.bytes()) / med / 1e6);
  // Output rounding dominates: half an ulp of X, plus f32 accumulation.
  double tol = spec.dtype("X") == DType::f32 ? 1e-4 : spec.dtype("X") == DType::f16 ? 2e-3 : 1e-2;
  if (err > tol)
    throw Error("GEMV result differs from the reference (rel. error " + std::to_string(err) + ")");
  return 0;
}

}  // namespace kiln
