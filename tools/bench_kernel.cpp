// `kiln bench KERNEL --shape ...`: any registered kernel (a plugin's too) at
// one shape, checked against the interpreter, timed cold as kiln tune times
// it, and set against the memory-bandwidth probe measured in the same run.
#include <cstdio>

#include "ir/error.h"
#include "runtime/tuner.h"
#include "tools/bandwidth_probe.h"
#include "tools/cli.h"

namespace kiln {

int bench_kernel(const CliArgs& a) {
  const std::string kernel = a.positional()[0];
  if (!a.has("shape"))
    throw Error("kiln bench " + kernel + ": give its sizes with --shape NAME=N,...");
  TuneOptions o = tune_options_from_args(kernel, a, false);
  o.warm = a.flag("warm");
  o.reps = static_cast<int>(a.get_int("repeats", 15));
  Runtime rt(static_cast<int>(a.get_int("threads", 0)));
  Measurement m = measure(rt, kernel, o);
  if (m.trial.status != "ok") throw Error(m.spec.str() + ": " + m.trial.status);
  BandwidthProbe probe;
  const double probe_gbps = probe.measure_gbps(rt.pool());
  const double gbps = static_cast<double>(m.bytes) / m.trial.median_ms / 1e6;
  std::printf("%s on %s, %d thread(s), %s\n", m.spec.str().c_str(), rt.backend().target().c_str(),
              rt.threads(), o.warm ? "warm (one set of buffers)" : "cold (buffers cycled)");
  std::printf("median %.4f ms over %d launches (result checked against the interpreter)\n",
              m.trial.median_ms, o.reps);
  std::printf("buffers %.2f MB: %.2f GB/s, bandwidth probe %.2f GB/s, frac_of_probe %.3f\n",
              static_cast<double>(m.bytes) / 1e6, gbps, probe_gbps, gbps / probe_gbps);
  return 0;
}

}  // namespace kiln
