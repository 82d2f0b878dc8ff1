// Ops on graph tensors: results against double-precision references,
// dtype-driven dispatch, and shape errors naming the op and the tensors.
#include <catch2/catch.hpp>
#include <cmath>

#include "ir/error.h"
#include "runtime/ops.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {
Runtime& rt() { return kiln::test::runtime(); }
Tensor in(Graph& g, HostBuffer& b, Shape s) {
  return g.external(b.arg().data, b.dtype(), std::move(s));
}
void run(Graph& g) {
  Plan p(rt());
  g.record(p);
  p.run(rt());
}
}  // namespace

TEST_CASE("ops compute from tensors and pick kernels by dtype", "[runtime][ops]") {
  // Tolerances: f32 results 1e-5 relative (sums of 53 products); f16
  // results a few ulps of f16.
  Graph g(rt());
  auto w = HostBuffer::random(DType::bf16, 37 * 53, 1), x = HostBuffer::random(DType::f32, 53, 2);
  HostBuffer y(DType::f32, 37);
  Weight wt{"w", in(g, w, {37, 53}), 37, 53, std::nullopt, {}};
  g.output("y", ops::linear(g, wt, in(g, x, {1, 53})), y.arg().data);
  auto a = HostBuffer::random(DType::f16, 3 * 40, 3), gw = HostBuffer::random(DType::f16, 40, 4);
  HostBuffer o(DType::f16, 3 * 40), s(DType::f16, 3 * 40);
  g.output("o", ops::rmsnorm(g, in(g, a, {3, 40}), in(g, gw, {40}), 1e-6), o.arg().data);
  g.output("s", ops::softmax(g, in(g, a, {3, 40})), s.arg().data);
  run(g);
  for (int i = 0; i < 37; ++i) {
    double ref = 0;
    for (int j = 0; j < 53; ++j) ref += w.get(i * 53 + j) * x.get(j);
    CHECK(std::fabs(y.get(i) - ref) <= 1e-5 * (1 + std::fabs(ref)));
  }
  double ss = 0;
  for (int j = 0; j < 40; ++j) ss += a.get(80 + j) * a.get(80 + j);
  CHECK(std::fabs(o.get(80) - a.get(80) / std::sqrt(ss / 40 + 1e-6) * gw.get(0)) < 3e-3);
  double total = 0;
  for (int j = 0; j < 40; ++j) total += s.get(j);
  CHECK(std::fabs(total - 1) < 1e-2);
}

TEST_CASE("ops reject tensors that do not fit together", "[runtime][ops][error]") {
  Graph g(rt());
  HostBuffer w(DType::f16, 64), x(DType::f32, 8), h(DType::f16, 8), ids(DType::f32, 2);
  Weight w88{"w", in(g, w, {8, 8}), 8, 8, std::nullopt, {}};
  REQUIRE_THROWS_WITH(ops::linear(g, w88, in(g, x, {1, 7})),
                      Catch::Contains("op linear: the weight is [8, 8] but x is f32[1,7]"));
  REQUIRE_THROWS_WITH(ops::add(g, in(g, x, {8}), in(g, h, {8})),
                      Catch::Contains("op add: dtypes differ (f32[8] vs f16[8])"));
  REQUIRE_THROWS_WITH(ops::rmsnorm(g, in(g, x, {2, 4}), in(g, x, {8}), 1e-5),
                      Catch::Contains("x is f32[2,4] but the weight is f32[8]"));
  REQUIRE_THROWS_WITH(ops::get_rows(g, in(g, w, {8, 8}), in(g, ids, {2})),
                      Catch::Contains("op get_rows: ids must be i32, got f32[2]"));
  REQUIRE_THROWS_WITH(in(g, x, {8}).rows(6, 4), Catch::Contains("rows [6, 10) are outside f32[8]"));
  // A q8_0 cache's kernels read q as Q8_0, quantised from f32.
  HostBuffer codes(DType::i8, 64 * 32), scales(DType::f16, 64), qh(DType::f16, 64);
  KvCache q8{.k = in(g, codes, {64 * 32}),
             .v = in(g, codes, {64 * 32}),
             .max_ctx = 32,
             .n_kv_heads = 1,
             .head_dim = 64,
             .k_scale = in(g, scales, {64}),
             .v_scale = in(g, scales, {64})};
  REQUIRE_THROWS_WITH(
      ops::attention(g, in(g, qh, {1, 64}), q8, 0.125, {"kv_len", 32}, {"pos0", 32}),
      Catch::Contains("op attention: q over a q8_0 cache must be f32, got f16[1,64]"));
  HostBuffer wi(DType::i32, 64);
  Graph bad(rt());
  ops::linear(bad, Weight{"w", in(bad, wi, {8, 8}), 8, 8, std::nullopt, {}}, in(bad, x, {1, 8}));
  Plan p(rt());
  REQUIRE_THROWS_WITH(bad.record(p),
                      Catch::Contains("kernel 'gemv' does not support dtype i32 for role 'W'"));
}

TEST_CASE("the runtime builds kernels for its backend's target", "[runtime][ops]") {
  std::vector<float> x(8);
  Spec s =
      rt().select("add", {{"T", DType::f32}}, {{"x", x}, {"y", x}, {"z", x}, {"n", int64_t{8}}});
  CHECK(s.target == rt().backend().target_desc());
}
