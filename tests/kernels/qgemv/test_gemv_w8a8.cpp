// The w8a8 path (INT8 checkpoints): quantize_rows_i8 against the
// properties of per-token int8 quantisation, and gemv_w8a8 against a
// double-precision product of the same codes and scales. Integer sums are
// exact, so the only error is the f32 rounding of the dot and two scale
// products (3 * 2^-24 relative); bit-identical for a fixed thread count.
#include <catch2/catch.hpp>
#include <cmath>

#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {

struct Quantized {
  HostBuffer q, d, s;
};

Quantized quantize_rows(HostBuffer& x, int64_t rows, int64_t n, int64_t block) {
  Quantized r{HostBuffer(DType::i8, rows * n), HostBuffer(DType::f32, rows),
              HostBuffer(DType::i32, rows)};
  Spec spec = find_kernel("quantize_rows_i8").make_spec({}, {{"BLOCK", block}});
  kiln::test::runtime().launch(
      spec, {{"x", x}, {"q", r.q}, {"d", r.d}, {"s", r.s}, {"n", n}, {"rows", rows}});
  return r;
}

}  // namespace

TEST_CASE("quantize_rows_i8: one scale per row, codes within half a step", "[kernels][qgemv]") {
  const int64_t rows = 5, n = 300;
  auto x = HostBuffer::random(DType::f32, rows * n, 41, -3, 3);
  for (int64_t j = 0; j < n; ++j) x.set(2 * n + j, 0.0);  // an all-zero row
  x.set(3 * n + 7, -9.0);                                 // a negative extreme
  Quantized r = quantize_rows(x, rows, n, 64);
  for (int64_t i = 0; i < rows; ++i) {
    double amax = 0, sum = 0, worst = 0;
    for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x.get(i * n + j)));
    CHECK(r.d.get(i) == Approx(amax / 127).epsilon(1e-6));
    for (int64_t j = 0; j < n; ++j) {
      double q = r.q.get(i * n + j);
      CHECK(std::fabs(q) <= 127);
      sum += q;
      worst = kiln::test::worse(worst, std::fabs(x.get(i * n + j) - q * r.d.get(i)));
    }
    CHECK(worst <= r.d.get(i) * 0.5 * (1 + 1e-5));
    CHECK(r.s.get(i) == sum);
  }
  CHECK(r.q.get(3 * n + 7) == -127);
}

TEST_CASE("gemv_w8a8 matches a double-precision reference", "[kernels][qgemv]") {
  struct Case {
    int64_t m, k, t, bm, bk, bt;
  };
  for (Case c : {Case{37, 100, 1, 4, 64, 1}, Case{64, 4096, 1, 8, 128, 1},
                 Case{13, 260, 5, 4, 32, 4}, Case{130, 512, 3, 16, 64, 2}}) {
    INFO("m=" << c.m << " k=" << c.k << " t=" << c.t << " BLOCK_M=" << c.bm << " BLOCK_K=" << c.bk
              << " BLOCK_T=" << c.bt);
    auto w = HostBuffer::random(DType::i8, c.m * c.k, 42, -127, 127);
    auto ws = HostBuffer::random(DType::f32, c.m, 43, 1e-3, 1e-2);
    auto x = HostBuffer::random(DType::f32, c.t * c.k, 44, -2, 2);
    Quantized xq = quantize_rows(x, c.t, c.k, 256);
    HostBuffer y(DType::f32, c.t * c.m);
    Spec spec = find_kernel("gemv_w8a8")
                    .make_spec({}, {{"BLOCK_M", c.bm}, {"BLOCK_K", c.bk}, {"BLOCK_T", c.bt}});
    // The kernel reads the i8 codes as bytes (a u8 parameter).
    auto args = [&](HostBuffer& out) -> LaunchArgs {
      return {{"w", LaunchArg(w.arg().data, w.size(), DType::u8)},
              {"ws", ws},
              {"xq", xq.q},
              {"xd", xq.d},
              {"xs", xq.s},
              {"y", out},
              {"m", c.m},
              {"k", c.k},
              {"t", c.t}};
    };
    kiln::test::runtime().launch(spec, args(y));
    double worst = 0;
    for (int64_t t = 0; t < c.t; ++t)
      for (int64_t i = 0; i < c.m; ++i) {
        double dot = 0;
        for (int64_t j = 0; j < c.k; ++j) dot += w.get(i * c.k + j) * xq.q.get(t * c.k + j);
        double ref = dot * ws.get(i) * xq.d.get(t);
        worst = kiln::test::worse(
            worst, std::fabs(y.get(t * c.m + i) - ref) / (3e-7 * std::fabs(ref) + 1e-30));
      }
    CHECK(worst <= 1.0);
    HostBuffer y2(DType::f32, c.t * c.m);
    kiln::test::runtime().launch(spec, args(y2));
    CHECK(y.bytes() == y2.bytes());
  }
}
