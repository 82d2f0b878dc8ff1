// RoPE in both pairings against a double-precision rotation. The table is
// f32, so the angle's cos/sin carry 2^-24 relative error; outputs are
// within that plus the rounding of T. The YaRN table against llama.cpp's
// published correction range and mscale for GPT-OSS's rope.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/rope/rope.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

TEST_CASE("rope rotates pairs like the reference, both pairings", "[kernels][rope]") {
  const double base = 10000.0;
  struct Case {
    int64_t head_dim, rot;
  };
  for (DType t : {DType::f32, DType::f16})
    for (int neox : {0, 1})
      for (Case c : {Case{64, 64}, Case{128, 128}, Case{128, 64}, Case{16, 8}}) {
        INFO(dtype_name(t) << " neox=" << neox << " D=" << c.head_dim << " rot=" << c.rot);
        const int64_t tokens = 5, heads = 3, n_pos = 4096;
        Spec spec = find_kernel("rope").make_spec(
            {{"T", t}}, {{"HEAD_DIM", c.head_dim}, {"ROT", c.rot}, {"NEOX", neox}});
        auto x = HostBuffer::random(t, tokens * heads * c.head_dim, 10), x0 = x, xi = x;
        std::vector<float> table = rope_cos_sin_table(base, c.rot, n_pos);
        std::vector<int32_t> pos = {0, 1, 17, 1000, 4095};
        kiln::test::runtime().launch(spec, {{"x", x},
                                            {"cos_sin", table},
                                            {"pos", pos},
                                            {"n_heads", heads},
                                            {"n_pos", n_pos},
                                            {"tokens", tokens}});
        kiln::test::runtime().interpret(spec, {{"x", xi},
                                               {"cos_sin", table},
                                               {"pos", pos},
                                               {"n_heads", heads},
                                               {"n_pos", n_pos},
                                               {"tokens", tokens}});
        std::vector<double> ref(x.size()), refi(x.size());
        for (int64_t tk = 0; tk < tokens; ++tk)
          for (int64_t h = 0; h < heads; ++h) {
            int64_t b = (tk * heads + h) * c.head_dim;
            for (int64_t d = 0; d < c.head_dim; ++d) ref[b + d] = x0.get(b + d);
            for (int64_t i = 0; i < c.rot / 2; ++i) {
              double th = pos[tk] * std::pow(base, -2.0 * i / c.rot);
              int64_t a = neox ? i : 2 * i, p = neox ? i + c.rot / 2 : 2 * i + 1;
              double xa = x0.get(b + a), xp = x0.get(b + p);
              ref[b + a] = xa * std::cos(th) - xp * std::sin(th);
              ref[b + p] = xa * std::sin(th) + xp * std::cos(th);
            }
          }
        for (int64_t i = 0; i < x.size(); ++i) refi[i] = xi.get(i);
        double rtol = t == DType::f16 ? 1e-3 : 1e-6;
        CHECK(kiln::test::worst_error(x, ref, 1e-6, rtol) <= 1.0);
        CHECK(kiln::test::worst_error(x, refi, 1e-7, rtol) <= 1.0);
      }
}

TEST_CASE("YaRN tables keep the high frequencies, divide the low ones, and scale by mscale",
          "[kernels][rope]") {
  // GPT-OSS's rope: base 150000, factor 32 over 4096 original positions, 64
  // dims. llama.cpp's correction range for it is pairs 8..18 and its mscale
  // 1 + 0.1 ln 32 = 1.34657359.
  const double base = 150000, mscale = 1.34657359;
  const int64_t rot = 64, half = 32, n_pos = 300;
  RopeScaling s{32, true, 4096};
  std::vector<float> t = rope_cos_sin_table(base, rot, n_pos, s);
  CHECK(t[0] == Approx(mscale).epsilon(1e-7));  // cos(0) * mscale
  for (int64_t p : {1, 100, 299})
    for (int64_t i = 0; i < half; ++i) {
      INFO("position " << p << " pair " << i);
      const double extrap = static_cast<double>(p) * std::pow(base, -2.0 * i / rot);
      const double keep = 1 - std::clamp((static_cast<double>(i) - 8) / 10, 0.0, 1.0);
      const double theta = extrap * keep + extrap / 32 * (1 - keep);
      CHECK(t[p * rot + i] == Approx(std::cos(theta) * mscale).margin(1e-6));
      CHECK(t[p * rot + half + i] == Approx(std::sin(theta) * mscale).margin(1e-6));
      if (i <= 8) CHECK(theta == Approx(extrap));
      if (i >= 18) CHECK(theta == Approx(extrap / 32));
    }
  // Linear scaling: every angle divided by the factor, no mscale.
  std::vector<float> lin = rope_cos_sin_table(base, rot, n_pos, RopeScaling{4});
  CHECK(lin[100 * rot + 3] ==
        Approx(std::cos(100.0 / 4 * std::pow(base, -6.0 / rot))).margin(1e-6));
}

TEST_CASE("frequency factors (Llama 3's rope_freqs) divide each pair's angle", "[kernels][rope]") {
  const double base = 500000;
  const int64_t rot = 8, half = 4, n_pos = 50;
  RopeScaling s;
  s.freq_factors = {1, 1.5f, 8, 8};
  std::vector<float> t = rope_cos_sin_table(base, rot, n_pos, s);
  for (int64_t p : {0, 1, 49})
    for (int64_t i = 0; i < half; ++i) {
      const double theta =
          static_cast<double>(p) * std::pow(base, -2.0 * i / rot) / s.freq_factors[i];
      CHECK(t[p * rot + i] == Approx(std::cos(theta)).margin(1e-6));
      CHECK(t[p * rot + half + i] == Approx(std::sin(theta)).margin(1e-6));
    }
  s.freq_factors = {1, 2};
  CHECK_THROWS_WITH(rope_cos_sin_table(base, rot, n_pos, s),
                    Catch::Contains("2 frequency factors for 4 rotated pairs"));
}
