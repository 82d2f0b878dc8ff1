// A kernel over int4 weight-only matrices (gemv_int4w's parameters: q,
// scales, zeros, xq, xd, xs, y, m, k, t) against a double-precision product
// of the dequantised weights ((q - z) * s per group) with the f32
// activations, and the interpreter.
//
// Tolerance: x is quantised to 8-bit blocks (quantize_q8), so each product
// carries at most half an activation step (d_x / 2) of error: the bound is
// sum_j |w_j| d_x(j) / 2 plus f32 accumulation (1e-5 of sum |w x|). The JIT
// and the interpreter differ only in the order of the final lane sums
// (1e-6 of sum |w x|). Against the product with x as quantised (codes
// times scales), which the integer dots compute exactly, only f32
// accumulation remains (1e-5 of sum |w x|): the tight check.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "ir/dtype.h"
#include "support/quantized_x.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

namespace kiln::test {

struct Int4wCase {
  int64_t m, k, group;
  int zp;
  int64_t t;
};

inline void check_int4w(const std::string& kernel, Int4wCase c, int bm, int bt) {
  INFO(kernel << " "
                 "m="
              << c.m << " k=" << c.k << " group=" << c.group << " zp=" << c.zp << " t=" << c.t
              << " BLOCK_M=" << bm << " BLOCK_T=" << bt);
  int64_t g = c.group ? c.group : c.k, ng = c.k / g;
  std::mt19937 rng(5);
  std::vector<uint8_t> q(c.m * c.k / 2), z(c.m * ng);
  std::vector<uint16_t> s(c.m * ng);
  std::vector<float> x(c.t * c.k), y(c.t * c.m), yi(c.t * c.m);
  for (auto& b : q) b = static_cast<uint8_t>(rng());
  for (auto& b : z) b = static_cast<uint8_t>(rng() % 16);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& v : s) v = f32_to_f16_bits(0.05f * u(rng));
  for (auto& v : x) v = u(rng);
  QuantizedX xq = quantize_x(x);
  Spec spec = find_kernel(kernel).make_spec(
      {}, {{"GROUP", c.group}, {"ZP", c.zp}, {"BLOCK_M", bm}, {"BLOCK_T", bt}});
  auto args = [&](std::vector<float>& out) -> LaunchArgs {
    return {{"q", q},     {"scales", s}, {"zeros", z}, {"xq", xq.q}, {"xd", xq.d},
            {"xs", xq.s}, {"y", out},    {"m", c.m},   {"k", c.k},   {"t", c.t}};
  };
  runtime().launch(spec, args(y));
  runtime().interpret(spec, args(yi));
  double worst = 0, worst_interp = 0, worst_quantized = 0;
  for (int64_t tok = 0; tok < c.t; ++tok)
    for (int64_t i = 0; i < c.m; ++i) {
      double ref = 0, mag = 0, bound = 0, qref = 0;
      for (int64_t j = 0; j < c.k; ++j) {
        uint8_t byte = q[(i * c.k + j) / 2];
        int qv = j % 2 ? byte >> 4 : byte & 15;
        int zv = c.zp ? z[i * ng + j / g] : 8;
        double w = (qv - zv) * static_cast<double>(f16_bits_to_f32(s[i * ng + j / g]));
        double xv = x[tok * c.k + j];
        ref += w * xv;
        mag += std::fabs(w * xv);
        bound += std::fabs(w) * xq.d[(tok * c.k + j) / 32] / 2;
        qref += w * xq.q[tok * c.k + j] * xq.d[(tok * c.k + j) / 32];
      }
      float got = y[tok * c.m + i], interp = yi[tok * c.m + i];
      worst = worse(worst, std::fabs(got - ref) / (bound + 1e-5 * mag + 1e-7));
      worst_interp = std::max(worst_interp, std::fabs(got - interp) / (1e-6 * mag + 1e-7));
      worst_quantized = std::max(worst_quantized, std::fabs(got - qref) / (1e-5 * mag + 1e-7));
    }
  CHECK(worst <= 1.0);
  CHECK(worst_interp <= 1.0);
  CHECK(worst_quantized <= 1.0);
}

}  // namespace kiln::test
