#include "tools/dot_probe.h"

#include <algorithm>
#include <chrono>

#include "kernels/probe/int8_dot_peak.h"
#include "kernels/registry.h"

namespace kiln {

namespace {
// About 10 ms per launch at 1e12 ops/s per core: long enough that the
// pool's wake-up is noise, short enough for a probe before every benchmark.
constexpr int64_t kSteps = int64_t{1} << 17;
}  // namespace

DotProbe::DotProbe(Runtime& rt)
    : rt_(rt),
      spec_(find_kernel("int8_dot_peak").make_spec()),
      programs_(rt.threads()),
      steps_(kSteps) {
  LaunchShape shape = find_kernel("int8_dot_peak").launch_shape(spec_, [&] {
    ScalarArgs a;
    a.set_int("programs", programs_);
    a.set_int("steps", steps_);
    return a;
  }());
  codes_.resize(static_cast<size_t>(shape.buffer_elems.at("codes")));
  x_.resize(static_cast<size_t>(shape.buffer_elems.at("x")));
  y_.resize(static_cast<size_t>(shape.buffer_elems.at("y")));
  // Small values: the sums stay far from overflow over any step count.
  for (size_t i = 0; i < codes_.size(); ++i) codes_[i] = static_cast<uint8_t>(i % 3);
  for (size_t i = 0; i < x_.size(); ++i) x_[i] = static_cast<int8_t>(i % 3 - 1);
  rt_.compile(spec_);
}

int64_t DotProbe::run_once() {
  rt_.launch(spec_,
             {Arg::buffer(codes_.data(), static_cast<int64_t>(codes_.size())),
              Arg::buffer(x_.data(), static_cast<int64_t>(x_.size())),
              Arg::buffer(y_.data(), static_cast<int64_t>(y_.size())), Arg::scalar_int(steps_)},
             {{"programs", programs_}});
  int64_t sum = 0;
  for (int32_t v : y_) sum += v;
  return sum;
}

double DotProbe::ops() const {
  return 2.0 * static_cast<double>(programs_) *
         static_cast<double>(int8_dot_peak_macs(spec_.constexpr_("ACC"), steps_));
}

double DotProbe::measure_gops(int reps) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    volatile int64_t sink = run_once();
    (void)sink;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, ops() / s / 1e9);
  }
  return best;
}

}  // namespace kiln
