// Op calls on tensors: results, dtype/shape-driven dispatch, shape errors.
#include <catch2/catch.hpp>
#include <cmath>

#include "ir/error.h"
#include "runtime/ops.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {
Runtime& rt() {
  static Runtime r(RuntimeOptions{2, "", false});
  return r;
}
Tensor view(HostBuffer& b, Shape s) { return Tensor{b.arg().data, b.dtype(), std::move(s)}; }
}  // namespace

TEST_CASE("op calls compute from tensors and pick kernels by dtype", "[runtime][ops]") {
  auto w = HostBuffer::random(DType::bf16, 37 * 53, 1), x = HostBuffer::random(DType::f32, 53, 2);
  HostBuffer y(DType::f32, 37);
  ops::gemv(rt(), view(w, {37, 53}), view(x, {53}), view(y, {37}));
  for (int i = 0; i < 37; ++i) {
    double ref = 0;
    for (int j = 0; j < 53; ++j) ref += w.get(i * 53 + j) * x.get(j);
    CHECK(std::fabs(y.get(i) - ref) <= 1e-5 * (1 + std::fabs(ref)));
  }
  auto a = HostBuffer::random(DType::f16, 3 * 40, 3), g = HostBuffer::random(DType::f16, 40, 4);
  HostBuffer o(DType::f16, 3 * 40);
  ops::rmsnorm(rt(), view(a, {3, 40}), view(g, {40}), view(o, {3, 40}), 1e-6);
  double ss = 0;
  for (int j = 0; j < 40; ++j) ss += a.get(80 + j) * a.get(80 + j);
  CHECK(std::fabs(o.get(80) - a.get(80) / std::sqrt(ss / 40 + 1e-6) * g.get(0)) < 3e-3);
  HostBuffer s(DType::f16, 3 * 40);
  ops::softmax(rt(), view(a, {3, 40}), view(s, {3, 40}));
  double total = 0;
  for (int j = 0; j < 40; ++j) total += s.get(j);
  CHECK(std::fabs(total - 1) < 1e-2);
}

TEST_CASE("op calls reject tensors that do not fit together", "[runtime][ops][error]") {
  HostBuffer w(DType::f16, 64), x(DType::f32, 8), y(DType::f32, 8), h(DType::f16, 8);
  REQUIRE_THROWS_WITH(ops::gemv(rt(), view(w, {8, 8}), view(x, {7}), view(y, {8})),
                      Catch::Contains("op gemv: W is f16[8,8] but x is f32[7]"));
  REQUIRE_THROWS_WITH(ops::gemv(rt(), view(w, {64}), view(x, {8}), view(y, {8})),
                      Catch::Contains("W must be [m, k], got f16[64]"));
  REQUIRE_THROWS_WITH(ops::add(rt(), view(x, {8}), view(h, {8}), view(y, {8})),
                      Catch::Contains("op add: dtypes differ (f32[8] vs f16[8])"));
  REQUIRE_THROWS_WITH(ops::rmsnorm(rt(), view(x, {2, 4}), view(y, {8}), view(y, {2, 4}), 1e-5),
                      Catch::Contains("x is f32[2,4] but the weight is f32[8]"));
  HostBuffer wi(DType::i32, 64);
  REQUIRE_THROWS_WITH(ops::gemv(rt(), view(wi, {8, 8}), view(x, {8}), view(y, {8})),
                      Catch::Contains("kernel 'gemv' does not support dtype i32 for role 'W'"));
}
