// gemv_int4w against a double-precision product of the dequantised weights
// ((q - z) * s per group) and the interpreter. Tolerance: f32 accumulation
// of k products (1e-5 of sum |w x|).
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "ir/dtype.h"
#include "support/runtime_fixture.h"

using namespace kiln;

TEST_CASE("gemv_int4w matches the dequantised product", "[kernels][qgemv]") {
  struct Case {
    int64_t m, k, group;
    int zp;
  };
  for (Case c : {Case{1, 32, 32, 0}, Case{7, 256, 64, 1}, Case{33, 1024, 128, 0},
                 Case{130, 512, 0, 1}, Case{5, 4096, 128, 1}})
    for (int bm : {1, 4, 8}) {
      INFO("m=" << c.m << " k=" << c.k << " group=" << c.group << " zp=" << c.zp << " BM=" << bm);
      int64_t g = c.group ? c.group : c.k, ng = c.k / g;
      std::mt19937 rng(5);
      std::vector<uint8_t> q(c.m * c.k / 2), z(c.m * ng);
      std::vector<uint16_t> s(c.m * ng);
      std::vector<float> x(c.k), y(c.m), yi(c.m);
      for (auto& b : q) b = static_cast<uint8_t>(rng());
      for (auto& b : z) b = static_cast<uint8_t>(rng() % 16);
      std::uniform_real_distribution<float> u(-1, 1);
      for (auto& v : s) v = f32_to_f16_bits(0.05f * u(rng));
      for (auto& v : x) v = u(rng);
      Spec spec = find_kernel("gemv_int4w")
                      .make_spec({}, {{"GROUP", c.group}, {"ZP", c.zp}, {"BLOCK_M", bm}});
      std::vector<Arg> args = {Arg::buffer(q.data(), q.size()),
                               Arg::buffer(s.data(), s.size()),
                               Arg::buffer(z.data(), z.size()),
                               Arg::buffer(x.data(), c.k),
                               Arg::buffer(y.data(), c.m),
                               Arg::scalar_int(c.m),
                               Arg::scalar_int(c.k)};
      kiln::test::runtime().launch(spec, args);
      args[4] = Arg::buffer(yi.data(), c.m);
      kiln::test::runtime().interpret(spec, args);
      double worst = 0;
      for (int64_t i = 0; i < c.m; ++i) {
        double ref = 0, mag = 0;
        for (int64_t j = 0; j < c.k; ++j) {
          uint8_t byte = q[(i * c.k + j) / 2];
          int qv = j % 2 ? byte >> 4 : byte & 15;
          int zv = c.zp ? z[i * ng + j / g] : 8;
          double w = (qv - zv) * static_cast<double>(f16_bits_to_f32(s[i * ng + j / g]));
          ref += w * x[j];
          mag += std::fabs(w * x[j]);
        }
        worst = std::max(worst, std::fabs(y[i] - ref) / (1e-5 * mag + 1e-7));
        CHECK(std::fabs(y[i] - yi[i]) <= 1e-5 * mag + 1e-7);
      }
      CHECK(worst <= 1.0);
    }
}
