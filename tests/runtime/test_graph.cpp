// Graphs: scratch planned by liveness (buffers that are never live together
// share bytes, and results stay right), in-place steps making older tensors
// stale, ops sharing work through memo(), and errors for bad bindings.
#include <catch2/catch.hpp>
#include <cmath>

#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"
#include "runtime/ops.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {
Runtime& rt() { return kiln::test::runtime(); }
}  // namespace

TEST_CASE("graph scratch is planned by liveness", "[runtime][graph]") {
  const int64_t n = 1000;  // 4000 bytes: 4096 with the 256-byte alignment
  auto x = HostBuffer::random(DType::f32, n, 1);
  HostBuffer y(DType::f32, n);
  Graph g(rt());
  Tensor v = g.external(x.arg().data, DType::f32, {n});
  for (int i = 0; i < 8; ++i) v = ops::add(g, v, v);  // x * 2^8
  g.output("y", v, y.arg().data);                     // the last add writes y in place
  Plan p(rt());
  g.record(p);
  // Seven intermediates, at most two of them live at once.
  CHECK(g.unplanned_bytes() == 7 * 4096);
  CHECK(g.scratch_bytes() == 2 * 4096);
  p.run(rt());
  for (int64_t i = 0; i < n; ++i) CHECK(y.get(i) == x.get(i) * 256);  // exact: powers of two
}

TEST_CASE("graph tensors go stale when a step overwrites their buffer", "[runtime][graph][error]") {
  auto x = HostBuffer::random(DType::f32, 32, 2), b = HostBuffer::random(DType::f32, 8, 3);
  Graph g(rt());
  Tensor v = ops::add(g, g.external(x.arg().data, DType::f32, {4, 8}),
                      g.external(x.arg().data, DType::f32, {4, 8}));
  Tensor biased = ops::add_rows(g, v, g.external(b.arg().data, DType::f32, {8}));
  CHECK(biased.buf == v.buf);  // in place
  REQUIRE_THROWS_WITH(
      ops::add(g, v, biased),
      Catch::Contains("reads a value f32[4,8] that an in-place step has since overwritten"));
}

TEST_CASE("graph launches bind parameters by name", "[runtime][graph][error]") {
  auto x = HostBuffer::random(DType::f32, 8, 4);
  Graph g(rt());
  Tensor t = g.external(x.arg().data, DType::f32, {8});
  g.launch("sum", "add", {{"T", DType::f32}},
           {{"x", t}, {"yy", t}, {"z", g.scratch(DType::f32, {8})}, {"n", Arg::scalar_int(8)}});
  Plan p(rt());
  REQUIRE_THROWS_WITH(g.record(p), Catch::Contains("plan step 'sum': kernel 'add' has no parameter "
                                                   "'yy' (it takes x, y, z, n)"));
  Graph g2(rt());
  Tensor small = g2.scratch(DType::f32, {4});
  g2.launch("sum", "add", {{"T", DType::f32}},
            {{"x", small}, {"y", small}, {"z", small}, {"n", Arg::scalar_int(8)}});
  Plan p2(rt());
  REQUIRE_THROWS_WITH(g2.record(p2), Catch::Contains("holds 4 elements, the launch needs 8"));
}

TEST_CASE("matmuls of one input share its quantisation", "[runtime][graph][ops]") {
  // Two Q8_0 weights read the same x: one quantize_q8 launch serves both.
  // Tolerance: Q8_0 activations (1/254 of each block's max) on Q8_0
  // weights, 2e-2 of the row's absolute sum.
  const int64_t m = 16, k = 64;
  std::vector<float> wf(m * k), xf(k);
  for (int64_t i = 0; i < m * k; ++i) wf[i] = std::sin(0.37 * i);
  for (int64_t i = 0; i < k; ++i) xf[i] = std::cos(0.11 * i);
  std::vector<uint8_t> wq(m * k / 32 * 34);
  ggml::quantize_q8_0(wf.data(), m * k, wq.data());
  std::vector<float> wd(m * k);
  ggml::dequantize(TensorType::q8_0, wq.data(), m * k, wd.data());
  std::vector<float> y1(m), y2(m);
  Graph g(rt());
  Tensor x = g.external(xf.data(), DType::f32, {1, k});
  Weight w{"w", g.external(wq.data(), DType::u8, {m, k / 32 * 34}), m, k, TensorType::q8_0, {}};
  g.output("y1", ops::linear(g, w, x), y1.data());
  g.output("y2", ops::linear(g, w, x), y2.data());
  Plan p(rt());
  g.record(p);
  CHECK(p.kernel_launches() == 3);
  p.run(rt());
  for (int64_t r = 0; r < m; ++r) {
    double ref = 0, mag = 0;
    for (int64_t j = 0; j < k; ++j) {
      ref += static_cast<double>(wd[r * k + j]) * xf[j];
      mag += std::fabs(wd[r * k + j] * xf[j]);
    }
    CHECK(std::fabs(y1[r] - ref) <= 2e-2 * mag);
    CHECK(y1[r] == y2[r]);
  }
}
