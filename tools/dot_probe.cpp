#include "tools/dot_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/probe/dot_peak.h"
#include "kernels/registry.h"

namespace kiln {

namespace {
// About 10 ms per launch on a Zen 4 core (one zmm product per cycle, for
// either type): long enough that the pool's wake-up is noise, short enough
// for a probe before every benchmark.
constexpr int64_t kSteps = int64_t{1} << 17;
}  // namespace

DotProbe::DotProbe(Runtime& rt, DType t)
    : rt_(rt),
      t_(t),
      spec_(find_kernel("dot_peak").make_spec({{"T", t}})),
      programs_(rt.threads()),
      steps_(kSteps) {
  LaunchShape shape = find_kernel("dot_peak").launch_shape(spec_, [&] {
    ScalarArgs a;
    a.set_int("programs", programs_);
    a.set_int("steps", steps_);
    return a;
  }());
  codes_n_ = shape.buffer_elems.at("codes");
  x_n_ = shape.buffer_elems.at("x");
  y_n_ = shape.buffer_elems.at("y");
  const size_t b = t == DType::u8 ? 1 : 4;
  codes_.resize(static_cast<size_t>(codes_n_) * b);
  x_.resize(static_cast<size_t>(x_n_) * b);
  y_.resize(static_cast<size_t>(y_n_) * 4);
  // Small integers: the sums stay exact and far from overflow over any
  // step count (at most 2 * 4 * kSteps per lane, below 2^24).
  auto put = [&](std::vector<uint8_t>& buf, int64_t i, int v) {
    if (t == DType::u8) {
      buf[static_cast<size_t>(i)] = static_cast<uint8_t>(static_cast<int8_t>(v));
    } else {
      float f = static_cast<float>(v);
      std::memcpy(&buf[static_cast<size_t>(i) * 4], &f, 4);
    }
  };
  for (int64_t i = 0; i < codes_n_; ++i) put(codes_, i, static_cast<int>(i % 3));
  for (int64_t i = 0; i < x_n_; ++i) put(x_, i, static_cast<int>(i % 3) - 1);
  const bool bytes = t == DType::u8;
  args_ = rt_.bind(spec_, {{"codes", LaunchArg(codes_.data(), codes_n_, t)},
                           {"x", LaunchArg(x_.data(), x_n_, bytes ? DType::i8 : DType::f32)},
                           {"y", LaunchArg(y_.data(), y_n_, bytes ? DType::i32 : DType::f32)},
                           {"steps", steps_},
                           {"programs", programs_}});
  rt_.compile(spec_);
}

double DotProbe::run_once() {
  rt_.launch(spec_, args_);
  double sum = 0;  // of y's bytes: only so that the results are used
  for (uint8_t b : y_) sum += b;
  return sum;
}

double DotProbe::ops() const {
  return 2.0 * static_cast<double>(programs_) *
         static_cast<double>(dot_peak_macs(t_, spec_.constexpr_("ACC"), steps_));
}

double DotProbe::measure_gops(int reps) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    volatile double sink = run_once();
    (void)sink;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, ops() / s / 1e9);
  }
  return best;
}

}  // namespace kiln
