// The KL-divergence statistics (models/kld.h) on cases with known answers:
// identical logits and logits shifted by a constant give 0 and 100 %
// same-top; a uniform base against a peaked test has a closed form; a
// single outlier shows in the maximum but not the median; percentiles
// interpolate as numpy's "linear"; the errors follow their formulas.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "ir/error.h"
#include "models/kld.h"

using namespace kiln;

TEST_CASE("KL divergence of identical and shifted logits is zero", "[models][kld]") {
  const int64_t V = 50;
  KldAccumulator same, shifted;
  for (int p = 0; p < 20; ++p) {
    std::vector<float> a(V), b(V);
    // Multiples of 1/64 shifted by 8: exact in f32.
    for (int64_t v = 0; v < V; ++v)
      a[v] = std::round(64 * std::sin(0.3f * v + p)) / 64, b[v] = a[v] + 8;
    same.add(a.data(), a.data(), V, p % V);
    shifted.add(a.data(), b.data(), V, p % V);
  }
  for (const KldStats& s : {same.finish(), shifted.finish()}) {
    CHECK(s.positions == 20);
    CHECK(std::abs(s.mean_kld) < 1e-12);
    CHECK(s.kld_max < 1e-12);
    CHECK(s.same_top == 1.0);
    CHECK(s.same_top_error == 0.0);
    CHECK(std::abs(s.rms_dp) < 1e-12);
    CHECK(std::abs(s.ppl_base - s.ppl_test) < 1e-9 * s.ppl_base);
  }
}

TEST_CASE("KL divergence of a uniform base from a peaked test has its closed form",
          "[models][kld]") {
  // P uniform over V; Q puts logit a on token 0, 0 elsewhere:
  // KL(P || Q) = log(e^a + V - 1) - log V - a / V.
  const int64_t V = 64;
  for (double peak : {0.5, 3.0, 10.0}) {
    std::vector<float> p(V, 0.f), q(V, 0.f);
    q[0] = static_cast<float>(peak);
    KldAccumulator acc;
    acc.add(p.data(), q.data(), V, 0);
    KldStats s = acc.finish();
    const double want =
        std::log(std::exp(peak) + V - 1) - std::log(static_cast<double>(V)) - peak / V;
    CHECK(std::abs(s.mean_kld - want) < 1e-6 * want);
    // dp of token 0 = Q(0) - P(0).
    CHECK(std::abs(s.mean_dp - (std::exp(peak) / (std::exp(peak) + V - 1) - 1.0 / V)) < 1e-6);
  }
}

TEST_CASE("KL statistics: outliers, percentiles and errors", "[models][kld]") {
  // numpy.percentile([1, 2, 3, 4, 10], q): 50 -> 3, 90 -> 7.6, 99 -> 9.76, 100 -> 10.
  CHECK(percentile_linear({10, 2, 3, 1, 4}, 50) == Approx(3));
  CHECK(percentile_linear({10, 2, 3, 1, 4}, 90) == Approx(7.6));
  CHECK(percentile_linear({10, 2, 3, 1, 4}, 99) == Approx(9.76));
  CHECK(percentile_linear({10, 2, 3, 1, 4}, 100) == Approx(10));
  CHECK(percentile_linear({10, 2, 3, 1, 4}, 0) == Approx(1));
  // 99 positions where base = test, one where the test is far off: the
  // maximum sees it, the median does not; same-top 99 % with error
  // sqrt(0.99 * 0.01 / 99).
  const int64_t V = 8;
  KldAccumulator acc;
  std::vector<float> a = {0, 1, 2, 3, 4, 5, 6, 7}, far = {9, 1, 2, 3, 4, 5, 6, 0};
  for (int i = 0; i < 99; ++i) acc.add(a.data(), a.data(), V, 7);
  acc.add(a.data(), far.data(), V, 7);
  KldStats s = acc.finish();
  CHECK(s.kld_max > 1);
  CHECK(s.kld_median < 1e-12);
  CHECK(s.same_top == Approx(0.99));
  CHECK(s.same_top_error == Approx(std::sqrt(0.99 * 0.01 / 99)));
  // Standard error of the mean: one nonzero value k among N: mean k / N,
  // sqrt((k^2 / N - k^2 / N^2) / (N - 1)).
  const double k = s.kld_max, n = 100;
  CHECK(s.mean_kld == Approx(k / n));
  CHECK(s.kld_error == Approx(std::sqrt((k * k / n - k * k / n / n) / (n - 1))));
  CHECK(s.report().find("Mean    KLD:") != std::string::npos);
  CHECK(s.json().find("\"same_top_p\": 0.99") != std::string::npos);
  KldAccumulator bad;
  CHECK_THROWS_WITH(bad.add(a.data(), a.data(), V, 8), Catch::Contains("outside the vocabulary"));
}
