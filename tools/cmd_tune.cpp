// `kiln tune KERNEL --shape ...`: search block sizes, print every trial and
// record the winner in the tuning database.
#include <cstdio>

#include "ir/error.h"
#include "runtime/cold_copies.h"
#include "runtime/tuner.h"
#include "tools/cli.h"

namespace kiln {

int cmd_tune(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "dry-run", "warm"});
  a.allow_only({"help", "dry-run", "warm", "shape", "dtype", "const", "budget", "threads", "db",
                "scalar", "plugin"});
  load_plugins(a);
  if (a.flag("help") || a.positional().size() != 1 || !a.has("shape")) {
    std::puts(
        "usage: kiln tune KERNEL --shape NAME=N[,NAME=N...] [--dtype [ROLE=]DT] [--budget "
        "SECONDS]\n"
        "                 [--scalar NAME=X] [--threads N] [--db FILE] [--dry-run] [--warm]\n"
        "                 [--plugin LIB.so]\n"
        "Searches the kernel's tunables (coarse, then fine) for this shape, checks every "
        "candidate\n"
        "against the interpreter, prints each trial and writes the winner to the user tuning\n"
        "database under the cache dir (or --db FILE). Each launch reads buffers of 1 MiB and\n"
        "more from DRAM, as in a model forward (copies cycled); --warm re-runs one set of\n"
        "buffers instead. Example:\n"
        "  kiln tune gemv --shape m=4096,k=14336 --dtype W=f16\n"
        "  kiln tune qgemv --shape m=4096,k=14336,t=1 --const FMT=2");
    return a.flag("help") ? 0 : 2;
  }
  std::string kernel = a.positional()[0];
  TuneOptions o = tune_options_from_args(kernel, a, true);
  o.budget_s = parse_double(a.get("budget", "60"), "--budget");
  o.warm = a.flag("warm");
  Runtime rt(static_cast<int>(a.get_int("threads", 0)));
  const std::string cpu = rt.backend().tuning_cpu();
  std::printf("tuning %s for %s on %s%s, %d thread(s), budget %.0f s\n", kernel.c_str(),
              a.get("shape").c_str(), rt.backend().tuning_class().c_str(),
              cpu.empty() ? "" : (" (" + cpu + ")").c_str(), rt.threads(), o.budget_s);
  // The budget covers the candidates; the reference they are checked
  // against comes first, from the interpreter, which is slow on large shapes.
  std::printf("computing the reference in the interpreter (minutes for a large GEMM)...\n");
  std::fflush(stdout);
  TuneResult r = tune(rt, kernel, o);
  const long large_mib = static_cast<long>(kColdBufferBytes >> 20),
             total_mib = static_cast<long>(kColdTotalBytes >> 20);
  if (r.copies > 1)
    std::printf(
        "timed cold: launches cycle through %zu copies of the buffers of %ld MiB and more\n",
        r.copies, large_mib);
  else if (o.warm)
    std::printf("timed warm: --warm\n");
  else
    std::printf(
        "timed on one set of buffers: none of %ld MiB or more, or they alone exceed the %ld MiB "
        "of copies (read from DRAM anyway)\n",
        large_mib, total_mib);
  std::printf("\n  %-32s %12s %10s  %s\n", "constexprs", "median ms", "GB/s", "status");
  for (const TuneTrial& t : r.trials) {
    std::string c;
    for (const auto& [k, v] : t.constexprs)
      c += (c.empty() ? "" : " ") + k + "=" + std::to_string(v);
    bool ok = t.status == "ok";
    std::printf("%s %-32s %12s %10s  %s\n", &t == &r.trials.front() ? "h" : " ", c.c_str(),
                ok ? std::to_string(t.median_ms).substr(0, 8).c_str() : "inf",
                ok ? std::to_string(r.bytes / t.median_ms / 1e6).substr(0, 6).c_str() : "-",
                t.status.c_str());
  }
  std::string best;
  for (const auto& [k, v] : r.best.constexprs)
    best += (best.empty() ? "" : " ") + k + "=" + std::to_string(v);
  std::printf(
      "\n(h = the heuristic's choice)%s\nbest: %s, %.3f ms, %.2fx the heuristic (%.3f ms)\n",
      r.budget_exhausted ? " budget exhausted before the search finished;" : "", best.c_str(),
      r.best.median_ms, r.heuristic.median_ms / r.best.median_ms, r.heuristic.median_ms);
  if (a.flag("dry-run")) return 0;
  std::string path = a.has("db") ? a.get("db") : rt.user_tuning_path();
  if (path.empty()) throw Error("no cache dir to hold the tuning database; pass --db FILE");
  TuningDb db(cpu);
  db.set(r.key, r.best.constexprs);
  db.save_to(path);
  std::printf("wrote %s -> %s\n", r.key.str().c_str(), path.c_str());
  return 0;
}

}  // namespace kiln
