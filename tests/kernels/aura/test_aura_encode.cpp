// aura_encode against the scalar reference encoder (aura_reference.h), for
// every bit width, head sizes 64, 96 (padded to 128), 128 and 256, and
// f32/f16/bf16 inputs, compiled and in the interpreter.
//
// Codes: equal to the reference's except where the rotated coordinate lies
// within 1e-5 * sqrt(128 / D) of a threshold (the kernel rotates by a
// matrix product, the reference by a butterfly: f32 sums in another order,
// AURA.md pitfall 14). Packed words: bit-exact for the codes the kernel
// chose (tail bits and straddles included). Norms: the corrected norm of
// those codes, to f16 rounding. Rows outside the written ones keep their
// poison, and a decoded vector keeps the input's norm (pitfall 7).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "aura_reference.h"
#include "kernels/aura/aura_format.h"
#include "kernels/registry.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {

struct EncodeCase {
  int kbits = 4, vbits = 4;
  int64_t head_dim = 128;
  DType act = DType::f32;
  int64_t n_kv = 2, n_tokens = 3, pos0 = 2, max_ctx = 7;
};

struct Encoded {
  std::vector<uint32_t> k, v;
  HostBuffer kn{DType::f16, 0}, vn{DType::f16, 0};
};

Encoded run_encode(const EncodeCase& c, HostBuffer& xk, HostBuffer& xv, bool interpret) {
  const int64_t D = aura_padded_dim(c.head_dim), rows = c.n_kv * c.max_ctx;
  Encoded e{std::vector<uint32_t>(rows * packed_words(D, c.kbits), 0xffffffffu),
            std::vector<uint32_t>(rows * packed_words(D, c.vbits), 0xffffffffu),
            HostBuffer(DType::f16, rows), HostBuffer(DType::f16, rows)};
  for (int64_t i = 0; i < rows; ++i) e.kn.set(i, NAN), e.vn.set(i, NAN);
  std::vector<float> kr = aura_forward_matrix(aura_signs(kAuraSeed, 5, AuraKind::k, D)),
                     vr = aura_forward_matrix(aura_signs(kAuraSeed, 5, AuraKind::v, D));
  Spec s = find_kernel("aura_encode")
               .make_spec({{"T", c.act}},
                          {{"HEAD_DIM", c.head_dim}, {"KBITS", c.kbits}, {"VBITS", c.vbits}});
  LaunchArgs a = {{"xk", xk},
                  {"xv", xv},
                  {"k", e.k},
                  {"v", e.v},
                  {"k_scale", e.kn},
                  {"v_scale", e.vn},
                  {"k_rot", kr},
                  {"v_rot", vr},
                  {"n_tokens", c.n_tokens},
                  {"n_kv_heads", c.n_kv},
                  {"max_ctx", c.max_ctx},
                  {"pos0", c.pos0}};
  if (interpret)
    kiln::test::runtime().interpret(s, a);
  else
    kiln::test::runtime().launch(s, a);
  return e;
}

// Checks one kind's rows against the reference; returns how many codes
// differed (each within the threshold allowance).
int check_kind(const EncodeCase& c, const HostBuffer& x, const std::vector<uint32_t>& words,
               const HostBuffer& norms, int bits, AuraKind kind) {
  const int64_t d = c.head_dim, D = aura_padded_dim(d), W = packed_words(D, bits);
  const std::vector<float> s = aura_signs(kAuraSeed, 5, kind, D), t = aura_thresholds(bits, D);
  const double allowance = 1e-5 * std::sqrt(128.0 / D);
  int differing = 0;
  for (int64_t h = 0; h < c.n_kv; ++h)
    for (int64_t n = 0; n < c.max_ctx; ++n) {
      const int64_t row = h * c.max_ctx + n;
      const uint32_t* w = words.data() + row * W;
      if (n < c.pos0 || n >= c.pos0 + c.n_tokens) {
        for (int64_t j = 0; j < W; ++j) REQUIRE(w[j] == 0xffffffffu);
        REQUIRE(std::isnan(norms.get(row)));
        continue;
      }
      std::vector<float> xs;
      for (int64_t i = 0; i < d; ++i)
        xs.push_back(static_cast<float>(x.get(((n - c.pos0) * c.n_kv + h) * d + i)));
      kiln::test::RefEncoded ref = kiln::test::ref_encode(xs, s, bits);
      std::vector<int> got = kiln::test::ref_unpack(w, D, bits);
      for (int64_t i = 0; i < D; ++i) {
        if (got[i] == ref.codes[i]) continue;
        ++differing;
        INFO("row " << row << " coordinate " << i << ": code " << got[i] << " vs " << ref.codes[i]
                    << ", y = " << ref.y[i]);
        REQUIRE(std::abs(got[i] - ref.codes[i]) == 1);
        const float between = t[std::max(got[i], ref.codes[i])];
        REQUIRE(std::abs(ref.y[i] - between) < allowance);
      }
      std::vector<uint32_t> packed = kiln::test::ref_pack(got, bits);
      for (int64_t j = 0; j < W; ++j) REQUIRE(w[j] == packed[j]);
      const double want = kiln::test::ref_norm(xs, got, bits);
      REQUIRE(std::abs(norms.get(row) - want) <= std::ldexp(std::abs(want), -10) + 1e-30);
    }
  return differing;
}

}  // namespace

TEST_CASE("aura_encode matches the reference encoder", "[kernels][aura]") {
  std::mt19937_64 rng(3);
  int differing = 0, coded = 0;
  for (auto [kb, vb] : {std::pair{2, 3}, std::pair{3, 2}, std::pair{4, 8}, std::pair{8, 4}})
    for (int64_t d : {64, 96, 128, 256})
      for (DType act : {DType::f32, DType::f16, DType::bf16}) {
        EncodeCase c{.kbits = kb, .vbits = vb, .head_dim = d, .act = act};
        INFO("K " << kb << " bits, V " << vb << " bits, head_dim " << d << ", " << dtype_name(act));
        const int64_t n = c.n_tokens * c.n_kv * d;
        HostBuffer xk(act, n), xv(act, n);
        std::normal_distribution<double> g(0, 1);
        for (int64_t i = 0; i < n; ++i) {
          // An outlier channel on K, as real keys have; magnitudes 0.25 .. 4.
          const double scale = 0.25 * (1 << (i / d % 3 * 2));
          xk.set(i, g(rng) * scale * (i % d == 5 ? 20 : 1));
          xv.set(i, g(rng) * scale);
        }
        for (int64_t i = 0; i < d; ++i) xk.set(i, 0);  // a zero vector decodes to zero
        for (bool interpret : {false, true}) {
          if (interpret && d != 96) continue;
          Encoded e = run_encode(c, xk, xv, interpret);
          differing += check_kind(c, xk, e.k, e.kn, kb, AuraKind::k);
          differing += check_kind(c, xv, e.v, e.vn, vb, AuraKind::v);
          coded += 2 * static_cast<int>(c.n_tokens * c.n_kv * aura_padded_dim(d));
          const int64_t zero_row = c.pos0;  // head 0, first new token
          CHECK(e.kn.get(zero_row) == 0);
        }
      }
  INFO(differing << " of " << coded << " codes on a threshold's rounding edge");
  CHECK(differing * 1000 < coded);
}

TEST_CASE("aura_encode keeps each vector's norm", "[kernels][aura]") {
  // ||x_hat|| = ||x|| to 1e-3 at magnitudes 0.25, 1 and 4 for 4 and 8 bits
  // (the corrected norm; a constant rescale would fail at one magnitude).
  for (int bits : {4, 8})
    for (double mag : {0.25, 1.0, 4.0}) {
      EncodeCase c{.kbits = bits, .vbits = bits, .head_dim = 128};
      const int64_t d = 128, n = c.n_tokens * c.n_kv * d;
      HostBuffer xk(DType::f32, n), xv(DType::f32, n);
      std::mt19937_64 rng(11);
      std::normal_distribution<double> g(0, 1);
      for (int64_t r = 0; r < n / d; ++r) {
        std::vector<double> v(d);
        double s2 = 0;
        for (auto& e : v) {
          e = g(rng);
          s2 += e * e;
        }
        for (int64_t i = 0; i < d; ++i)
          xk.set(r * d + i, v[i] * mag / std::sqrt(s2)), xv.set(r * d + i, 0);
      }
      Encoded e = run_encode(c, xk, xv, false);
      const std::vector<float> s = aura_signs(kAuraSeed, 5, AuraKind::k, d);
      for (int64_t h = 0; h < c.n_kv; ++h)
        for (int64_t t = 0; t < c.n_tokens; ++t) {
          const int64_t row = h * c.max_ctx + c.pos0 + t;
          std::vector<int> codes =
              kiln::test::ref_unpack(e.k.data() + row * packed_words(d, bits), d, bits);
          auto xhat =
              kiln::test::ref_unrotate(kiln::test::ref_rotated(codes, e.kn.get(row), bits), s, d);
          double n2 = 0;
          for (double v : xhat) n2 += v * v;
          INFO(bits << " bits, magnitude " << mag);
          CHECK(std::abs(std::sqrt(n2) - mag) < 1e-3 * mag);
        }
    }
}
