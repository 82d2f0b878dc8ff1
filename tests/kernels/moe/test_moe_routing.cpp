// MoE routing kernels against a scalar double-precision reference: the
// router softmax's top-k (ties to the lower expert, as a stable sort) and
// its weights, normalised over the chosen experts or all of them (within
// 1e-6 relative: f32 exp and sums against double); the per-expert token
// lists in token order (exact); the weighted combine (exact: one f32
// multiply-add per element, as the reference rounds it). JIT and
// interpreter alike.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>

#include "support/runtime_fixture.h"

using namespace kiln;

namespace {

struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routing reference_topk(const std::vector<float>& logits, int64_t T, int64_t NE, int64_t K,
                       bool norm) {
  Routing r;
  for (int64_t t = 0; t < T; ++t) {
    const float* x = &logits[t * NE];
    double mx = *std::max_element(x, x + NE), total = 0;
    std::vector<double> p(NE);
    for (int64_t e = 0; e < NE; ++e) total += p[e] = std::exp(x[e] - mx);
    std::vector<int64_t> order(NE);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
    double chosen = 0;
    for (int64_t j = 0; j < K; ++j) chosen += p[order[j]];
    for (int64_t j = 0; j < K; ++j) {
      r.ids.push_back(static_cast<int32_t>(order[j]));
      r.weights.push_back(static_cast<float>(p[order[j]] / (norm ? chosen : total)));
    }
  }
  return r;
}

}  // namespace

TEST_CASE("moe_topk picks and weighs experts as a stable sort does", "[kernels][moe]") {
  const int64_t T = 5, NE = 12, K = 3;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> logits(T * NE);
  for (float& v : logits) v = nd(rng);
  logits[2 * NE + 4] = logits[2 * NE + 9] = 5.0f;  // a tie for the top: 4 before 9
  logits[3 * NE + 1] = logits[3 * NE + 7] = logits[3 * NE + 11] = -9.0f;
  for (bool norm : {false, true}) {
    INFO("norm " << norm);
    Routing want = reference_topk(logits, T, NE, K, norm);
    Spec spec = find_kernel("moe_topk").make_spec({}, {{"BLOCK", 16}});
    for (bool interpret : {false, true}) {
      std::vector<int32_t> ids(T * K, -1);
      std::vector<float> w(T * K);
      std::vector<Arg> args = {Arg::buffer(logits.data(), T * NE),
                               Arg::buffer(ids.data(), T * K),
                               Arg::buffer(w.data(), T * K),
                               Arg::scalar_int(NE),
                               Arg::scalar_int(K),
                               Arg::scalar_int(norm)};
      if (interpret)
        test::runtime().interpret(spec, args, {{"tokens", T}});
      else
        test::runtime().launch(spec, args, {{"tokens", T}});
      CHECK(ids == want.ids);
      for (size_t i = 0; i < w.size(); ++i) CHECK(w[i] == Approx(want.weights[i]).epsilon(1e-6));
    }
  }
}

TEST_CASE("moe_group lists each expert's tokens in order; moe_scatter combines them",
          "[kernels][moe]") {
  const int64_t T = 6, K = 2, NE = 5, n = 70;
  // Token t goes to experts (t, t+2) mod 5 with weights 0.25 and 0.75.
  std::vector<int32_t> ids;
  std::vector<float> w;
  for (int64_t t = 0; t < T; ++t) {
    ids.insert(ids.end(), {static_cast<int32_t>(t % NE), static_cast<int32_t>((t + 2) % NE)});
    w.insert(w.end(), {0.25f, 0.75f});
  }
  std::vector<int32_t> counts(NE, 99), rows(NE * T, -1);
  std::vector<float> row_w(NE * T, -1);
  Spec group = find_kernel("moe_group").make_spec();
  test::runtime().launch(group, {Arg::buffer(ids.data(), T * K), Arg::buffer(w.data(), T * K),
                                 Arg::buffer(counts.data(), NE), Arg::buffer(rows.data(), NE * T),
                                 Arg::buffer(row_w.data(), NE * T), Arg::scalar_int(T),
                                 Arg::scalar_int(K), Arg::scalar_int(NE)});
  for (int64_t e = 0; e < NE; ++e) {
    std::vector<int32_t> want_rows;
    std::vector<float> want_w;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < K; ++j)
        if (ids[t * K + j] == e) {
          want_rows.push_back(static_cast<int32_t>(t));
          want_w.push_back(w[t * K + j]);
        }
    INFO("expert " << e);
    REQUIRE(counts[e] == static_cast<int32_t>(want_rows.size()));
    CHECK(std::vector<int32_t>(rows.begin() + e * T, rows.begin() + e * T + counts[e]) ==
          want_rows);
    CHECK(std::vector<float>(row_w.begin() + e * T, row_w.begin() + e * T + counts[e]) == want_w);
  }
  // Expert 2's outputs y [count, n] scattered into out [T, n].
  const int64_t e = 2, count = counts[e];
  std::vector<float> y(count * n), out(T * n), want;
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 13) - 6.5f;
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(i % 7);
  want = out;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t c = 0; c < n; ++c)
      want[rows[e * T + i] * n + c] += row_w[e * T + i] * y[i * n + c];
  Spec scatter = find_kernel("moe_scatter").make_spec({}, {{"BLOCK", 32}});
  test::runtime().launch(scatter,
                         {Arg::buffer(y.data(), count * n), Arg::buffer(&rows[e * T], count),
                          Arg::buffer(&row_w[e * T], count), Arg::buffer(out.data(), T * n),
                          Arg::scalar_int(n), Arg::scalar_int(count)},
                         {{"out_rows", T}});
  CHECK(out == want);
}
