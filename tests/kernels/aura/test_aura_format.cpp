// AURA's host-side format (kernels/aura/aura_format.h) against the
// specification: the codebooks re-derived by Lloyd iteration and checked
// against their invariants and Max's published anchors, scheme names, the
// auto-asymmetric rule's boundaries, packed widths and bytes per token
// (AURA.md section 7's table), and the rotation matrices against a fast
// Walsh-Hadamard transform.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "aura_reference.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/aura/aura_format.h"

using namespace kiln;

namespace {

double phi(double t) { return std::isinf(t) ? 0 : std::exp(-0.5 * t * t) / std::sqrt(2 * M_PI); }
// P(lo < X < hi) for X ~ N(0, 1), from the tail nearer zero.
double mass(double lo, double hi) {
  if (lo >= 0) return 0.5 * (std::erfc(lo / M_SQRT2) - std::erfc(hi / M_SQRT2));
  return 0.5 * (std::erfc(-hi / M_SQRT2) - std::erfc(-lo / M_SQRT2));
}

std::vector<double> cells(const std::vector<double>& c) {
  std::vector<double> t = {-std::numeric_limits<double>::infinity()};
  for (size_t j = 1; j < c.size(); ++j) t.push_back((c[j - 1] + c[j]) / 2);
  t.push_back(std::numeric_limits<double>::infinity());
  return t;
}

// Lloyd's iteration from uniform-probability starting points (not the
// generator's N(0, 3) quantiles), to the same fixed point.
std::vector<double> lloyd(int levels) {
  std::vector<double> c(static_cast<size_t>(levels));
  for (int j = 0; j < levels; ++j) c[j] = 4.0 * (2.0 * (j + 0.5) / levels - 1.0);
  for (int it = 0; it < 2000000; ++it) {
    std::vector<double> t = cells(c), n(c.size());
    double delta = 0;
    for (size_t j = 0; j < c.size(); ++j) {
      n[j] = (phi(t[j]) - phi(t[j + 1])) / mass(t[j], t[j + 1]);
      delta = std::max(delta, std::abs(n[j] - c[j]));
    }
    c = n;
    if (delta < 1e-14) break;
  }
  return c;
}

double mse(const std::vector<double>& c) {
  // E[(X - c(X))^2] = 1 - sum_j c_j^2 P(cell j) at a Lloyd-Max fixed point;
  // computed here from the definition instead: sum_j E[X^2 - 2 c X + c^2].
  std::vector<double> t = cells(c);
  double e = 0;
  for (size_t j = 0; j < c.size(); ++j) {
    const double lo = t[j], hi = t[j + 1], p = mass(lo, hi);
    // E[X^2; cell] = p + lo phi(lo) - hi phi(hi); E[X; cell] = phi(lo) - phi(hi).
    const double x2 = p + (std::isinf(lo) ? 0 : lo * phi(lo)) - (std::isinf(hi) ? 0 : hi * phi(hi));
    e += x2 - 2 * c[j] * (phi(lo) - phi(hi)) + c[j] * c[j] * p;
  }
  return e;
}

}  // namespace

TEST_CASE("AURA codebooks are the Lloyd-Max quantisers of N(0,1)", "[kernels][aura]") {
  const std::map<int, double> published_mse = {
      {2, 0.117482}, {3, 0.034548}, {4, 0.009501}, {8, 4.1185e-5}};
  for (int bits : {2, 3, 4, 8}) {
    INFO(bits << " bits");
    const std::vector<double> c = lloyd_max_gaussian(bits);
    REQUIRE(c.size() == static_cast<size_t>(1 << bits));
    // Iterated from scratch for up to 16 levels. At 256 levels plain Lloyd
    // needs ~1e5 steps; there the centroid condition below (the table is a
    // fixed point of one Lloyd step) stands in, as the fixed point is
    // unique for a log-concave density (Fleischer 1964).
    const std::vector<double> derived = bits <= 4 ? lloyd(1 << bits) : c;
    for (size_t j = 0; j < c.size(); ++j) {
      CHECK(std::abs(c[j] - derived[j]) < 1e-8);
      CHECK(c[j] == -c[c.size() - 1 - j]);  // symmetric
      if (j) CHECK(c[j] > c[j - 1]);
    }
    // The centroid condition: c_j = E[X | X in cell j].
    std::vector<double> t = cells(c);
    for (size_t j = 0; j < c.size(); ++j)
      CHECK(std::abs(c[j] - (phi(t[j]) - phi(t[j + 1])) / mass(t[j], t[j + 1])) < 1e-10);
    // E[c(X)^2] = 1 - MSE, and the MSE as published (Max 1960; AURA.md).
    double ec2 = 0;
    for (size_t j = 0; j < c.size(); ++j) ec2 += c[j] * c[j] * mass(t[j], t[j + 1]);
    const double m = mse(c);
    CHECK(std::abs(ec2 - (1 - m)) < 1e-9);
    CHECK(std::abs(m - published_mse.at(bits)) < 1e-4 * published_mse.at(bits));
  }
  // Anchors printed in the specification.
  auto b4 = lloyd_max_gaussian(4), b8 = lloyd_max_gaussian(8);
  CHECK(std::abs(b4[15] - 2.732590) < 1e-6);
  CHECK(std::abs(b8[128] - 0.008446) < 1e-6);
  CHECK(std::abs(b8[255] - 4.603536) < 1e-6);
  // D = 128 scaling and thresholds: t_{L/2} = 0, entry 0 is -inf.
  auto c128 = aura_codebook(4, 128);
  CHECK(std::abs(c128[15] - 0.241529f) < 1e-6f);
  // 8 bits: stored as f16, each value the f16 rounding of z / sqrt(D) and
  // still strictly increasing.
  for (int64_t D : {64, 128, 256}) {
    auto c8 = aura_codebook(8, D);
    for (size_t j = 0; j < c8.size(); ++j) {
      const double exact = b8[j] / std::sqrt(static_cast<double>(D));
      CHECK(c8[j] == round_to_float_dtype(static_cast<float>(exact), DType::f16));
      CHECK(std::abs(c8[j] - exact) <= std::abs(exact) * 0x1p-11);
      if (j) CHECK(c8[j] > c8[j - 1]);
    }
  }
  auto t3 = aura_thresholds(3, 128);
  REQUIRE(t3.size() == 8);
  CHECK(std::isinf(t3[0]));
  CHECK(t3[4] == 0.f);
}

TEST_CASE("AURA scheme names, auto-asymmetric rule and sizes", "[kernels][aura]") {
  CHECK(parse_aura_scheme("aura4v4") == AuraScheme{4, 4});
  CHECK(parse_aura_scheme("aura8v4") == AuraScheme{8, 4});
  CHECK(parse_aura_scheme("aura3") == AuraScheme{3, 3});
  CHECK(aura_scheme_name({8, 2}) == "aura8v2");
  for (const char* bad : {"aura5v4", "aura4v", "aura", "aura4v4x", "aura16"})
    CHECK_THROWS_WITH(parse_aura_scheme(bad),
                      Catch::Contains(bad) && Catch::Contains("2, 3, 4 or 8"));
  // Boundaries (AURA.md section 6): G = 2 and 5 unchanged, G = 8 bumps K
  // and keeps V, kb = 8 and aura8v8 no-ops.
  CHECK(aura_auto_asymmetric({4, 4}, 2) == AuraScheme{4, 4});
  CHECK(aura_auto_asymmetric({4, 2}, 5) == AuraScheme{4, 2});
  CHECK(aura_auto_asymmetric({4, 2}, 6) == AuraScheme{8, 2});
  CHECK(aura_auto_asymmetric({3, 3}, 8) == AuraScheme{8, 3});
  CHECK(aura_auto_asymmetric({8, 4}, 8) == AuraScheme{8, 4});
  CHECK(aura_auto_asymmetric({8, 8}, 16) == AuraScheme{8, 8});
  // One packed_words for every width (pitfall 5: 12 words, not 13, at 3 bits).
  CHECK(packed_words(128, 3) == 12);
  CHECK(packed_words(64, 3) == 6);
  CHECK(packed_words(256, 8) == 64);
  CHECK(aura_padded_dim(96) == 128);
  CHECK(aura_padded_dim(128) == 128);
  // Bytes per token per layer and KV head at d = 128 (section 7's table).
  const std::map<std::string, int64_t> bytes = {
      {"aura2v2", 68},  {"aura3v3", 100}, {"aura4v2", 100}, {"aura4v4", 132},
      {"aura8v2", 164}, {"aura8v4", 196}, {"aura8v8", 260}};
  for (const auto& [name, b] : bytes)
    CHECK(aura_bytes_per_token(1, 128, parse_aura_scheme(name)) == b);
  CHECK(aura_bytes_per_token(8, 96, {4, 4}) == 8 * 132);  // d = 96 pads to 128
}

TEST_CASE("AURA rotation matrices are the seeded randomised Hadamard transform",
          "[kernels][aura]") {
  for (int64_t D : {32, 64, 128, 256}) {
    INFO("D=" << D);
    const std::vector<float> s = aura_signs(kAuraSeed, 3, AuraKind::v, D);
    const std::vector<float> F = aura_forward_matrix(s), I = aura_inverse_matrix(s);
    // Not all signs equal: with s = 1, Pi = Pi^T and a transposed rotation
    // would pass every test (pitfall 4).
    int neg = 0;
    for (float e : s) neg += e < 0;
    CHECK(neg > 0);
    CHECK(neg < D);
    // K and V, and layers, draw different signs.
    CHECK(aura_signs(kAuraSeed, 3, AuraKind::k, D) != s);
    CHECK(aura_signs(kAuraSeed, 4, AuraKind::v, D) != s);
    CHECK(aura_signs(7, 3, AuraKind::v, D) != s);
    std::vector<float> u(static_cast<size_t>(D));
    for (int64_t i = 0; i < D; ++i) u[i] = std::sin(0.7f * i + 0.3f);
    // u^T F = the FWHT rotation of u; then y^T I brings it back.
    std::vector<float> y = kiln::test::ref_rotate(u, s, false);
    for (int64_t c = 0; c < D; ++c) {
      double fy = 0, back = 0;
      for (int64_t r = 0; r < D; ++r) fy += u[r] * F[r * D + c];
      for (int64_t r = 0; r < D; ++r) back += y[r] * I[r * D + c];
      CHECK(std::abs(fy - y[c]) < 1e-5);
      CHECK(std::abs(back - u[c]) < 1e-5);
    }
  }
  CHECK_THROWS_WITH(aura_forward_matrix(std::vector<float>(96, 1.f)),
                    Catch::Contains("96 dims: not a power of two"));
}
