// Shared helpers for tests that run kernels: typed host buffers filled with
// reproducible random data, element access as double, and comparisons.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ir/dtype.h"
#include "ir/interpreter.h"
#include "ir/scalar_eval.h"
#include "runtime/named_args.h"

namespace kiln::test {

// A host buffer holding n elements of dtype t in their storage format.
class HostBuffer {
 public:
  HostBuffer(DType t, int64_t n) : t_(t), n_(n), bytes_(static_cast<size_t>(n * dtype_bytes(t))) {}
  // Uniform in [lo, hi], rounded to the dtype (ints truncated).
  static HostBuffer random(DType t, int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
    HostBuffer b(t, n);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < n; ++i) b.set(i, d(rng));
    return b;
  }
  double get(int64_t i) const {
    ScalarValue v = load_element(bytes_.data(), i, t_);
    return is_float(t_) ? v.f : static_cast<double>(v.i);
  }
  void set(int64_t i, double x) {
    ScalarValue v;
    if (is_float(t_))
      v.f = round_to_float_dtype(static_cast<float>(x), t_);
    else
      v.i = normalize_int(static_cast<int64_t>(x), t_);
    store_element(bytes_.data(), i, t_, v);
  }
  // The buffer as a launch argument by name: rt.launch(spec, {{"x", x}, {"n", n}}).
  operator LaunchArg() { return LaunchArg(bytes_.data(), n_, t_); }
  // In parameter order, for the layers below the runtime (the
  // interpreter, a target's own launcher).
  Arg arg() { return Arg::buffer(bytes_.data(), n_); }
  int64_t size() const { return n_; }
  DType dtype() const { return t_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  DType t_;
  int64_t n_;
  std::vector<uint8_t> bytes_;
};

// The larger of a running worst error and a new one, a NaN counting as
// infinitely large: std::max(worst, NaN) keeps worst, so a check of the
// running maximum would pass a kernel that wrote NaN.
inline double worse(double worst, double err) {
  return std::isnan(err) ? INFINITY : std::max(worst, err);
}

// The standard deviation of logits: the scale model tolerances are stated in.
inline double spread(const std::vector<float>& v) {
  double m = 0, s = 0;
  for (float x : v) m += x;
  m /= static_cast<double>(v.size());
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

// Largest |a - b| / (atol + rtol * |b|) over all elements: <= 1 means within tolerance.
double worst_error(const HostBuffer& a, const std::vector<double>& ref, double atol, double rtol);

}  // namespace kiln::test
