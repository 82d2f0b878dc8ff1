// rmsnorm and softmax against double-precision references and the
// interpreter. Tolerance: f32 accumulation over n elements (~n * 2^-24
// relative in the worst case, far less in practice) plus the output
// rounding of T; softmax adds the 2.5e-7 relative error of the vector exp.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {
double out_rtol(DType t) { return t == DType::f16 ? 1e-3 : t == DType::bf16 ? 8e-3 : 2e-6; }
const int64_t kCols[] = {1, 7, 127, 256, 4097};
}  // namespace

TEST_CASE("rmsnorm matches x / rms(x) * w", "[kernels][norm]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int64_t n : kCols) {
      INFO(dtype_name(t) << " n=" << n);
      const int64_t rows = 3;
      const double eps = 1e-5;
      Spec spec = find_kernel("rmsnorm").make_spec({{"T", t}}, {{"BLOCK", 64}});
      auto x = HostBuffer::random(t, rows * n, 7, -2, 2), w = HostBuffer::random(t, n, 8);
      HostBuffer y(t, rows * n), yi(t, rows * n);
      kiln::test::runtime().launch(
          spec, {{"x", x}, {"w", w}, {"y", y}, {"n", n}, {"eps", eps}, {"rows", rows}});
      kiln::test::runtime().interpret(
          spec, {{"x", x}, {"w", w}, {"y", yi}, {"n", n}, {"eps", eps}, {"rows", rows}});
      std::vector<double> ref(rows * n), refi(rows * n);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += x.get(r * n + i) * x.get(r * n + i);
        double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int64_t i = 0; i < n; ++i) {
          ref[r * n + i] = x.get(r * n + i) * inv * w.get(i);
          refi[r * n + i] = yi.get(r * n + i);
        }
      }
      CHECK(kiln::test::worst_error(y, ref, 1e-5, out_rtol(t)) <= 1.0);
      CHECK(kiln::test::worst_error(y, refi, 1e-5, out_rtol(t)) <= 1.0);
    }
}

TEST_CASE("softmax matches exp(x - max) / sum, including -inf entries", "[kernels][norm]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int64_t n : kCols) {
      INFO(dtype_name(t) << " n=" << n);
      const int64_t rows = 4;
      Spec spec = find_kernel("softmax").make_spec({{"T", t}}, {{"BLOCK", 128}});
      auto x = HostBuffer::random(t, rows * n, 9, -30, 30);
      for (int64_t i = 1; i < n; i += 3) x.set(n + i, -std::numeric_limits<double>::infinity());
      HostBuffer y(t, rows * n), yi(t, rows * n);
      kiln::test::runtime().launch(spec, {{"x", x}, {"y", y}, {"n", n}, {"rows", rows}});
      kiln::test::runtime().interpret(spec, {{"x", x}, {"y", yi}, {"n", n}, {"rows", rows}});
      std::vector<double> ref(rows * n), refi(rows * n);
      for (int64_t r = 0; r < rows; ++r) {
        double m = -INFINITY, s = 0;
        for (int64_t i = 0; i < n; ++i) m = std::max(m, x.get(r * n + i));
        for (int64_t i = 0; i < n; ++i) s += std::exp(x.get(r * n + i) - m);
        for (int64_t i = 0; i < n; ++i) {
          ref[r * n + i] = std::exp(x.get(r * n + i) - m) / s;
          refi[r * n + i] = yi.get(r * n + i);
        }
      }
      CHECK(kiln::test::worst_error(y, ref, 1e-7, out_rtol(t) + 2e-6) <= 1.0);
      CHECK(kiln::test::worst_error(y, refi, 1e-7, out_rtol(t) + 2e-6) <= 1.0);
    }
}
