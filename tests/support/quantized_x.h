// Activations through quantize_q8 (JIT or interpreter) for the quantized
// GEMV/GEMM tests: 8-bit blocks of 32 with their scales and sums.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "ir/dtype.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/iq_grids.h"
#include "kernels/quant/split_sums.h"
#include "kernels/registry.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

namespace kiln::test {

struct QuantizedX {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> s;
  std::vector<int8_t> s8;  // s split into bytes (kernels/quant/split_sums.h)
};

// qblock 32 (Q8_0-style) or 256 (Q8_K-style: one scale per 256, repeated in
// each of its 8 slots).
inline QuantizedX quantize_x(const std::vector<float>& x, bool interpreter = false,
                             int64_t qblock = 32, int64_t blocks = 8) {
  int64_t nb = static_cast<int64_t>(x.size()) / 32;
  QuantizedX r{std::vector<int8_t>(x.size()), std::vector<float>(nb), std::vector<int32_t>(nb),
               std::vector<int8_t>(split_sum_bytes(nb))};
  Spec spec = find_kernel("quantize_q8").make_spec({}, {{"QBLOCK", qblock}, {"BLOCKS", blocks}});
  std::vector<float> xc = x;
  const LaunchArgs args = {{"x", xc},  {"q", r.q},   {"d", r.d},
                           {"s", r.s}, {"s8", r.s8}, {"nblocks", nb}};
  if (interpreter)
    runtime().interpret(spec, args);
  else
    runtime().launch(spec, args);
  return r;
}

// n normal floats (mean 0, standard deviation `scale`).
inline std::vector<float> normal_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// y [t, m] of a qgemv-style kernel (parameters w, xq, xd, xs, [xs8,] y, m,
// k, t) through the JIT and through the interpreter; xs8 is passed when the
// kernel declares it.
struct QuantizedGemmOutputs {
  std::vector<float> jit, interpreter;
};
inline QuantizedGemmOutputs run_quantized_gemm(const Spec& spec, std::vector<uint8_t>& w,
                                               QuantizedX& xq, int64_t m, int64_t k, int64_t t) {
  const Kernel kernel = find_kernel(spec.kernel).build(spec);
  bool takes_s8 = false;
  for (const Param& p : kernel.params) takes_s8 = takes_s8 || p.name == "xs8";
  QuantizedGemmOutputs out{std::vector<float>(t * m), std::vector<float>(t * m)};
  auto args = [&](std::vector<float>& y) {
    LaunchArgs a = {{"w", w},
                    {"xq", std::span(xq.q.data(), t * k)},
                    {"xd", std::span(xq.d.data(), t * k / 32)},
                    {"xs", std::span(xq.s.data(), t * k / 32)},
                    {"y", y},
                    {"m", m},
                    {"k", k},
                    {"t", t}};
    if (takes_s8) a.emplace_back("xs8", std::span(xq.s8.data(), split_sum_bytes(t * k / 32)));
    return a;
  };
  runtime().launch(spec, args(out.jit));
  runtime().interpret(spec, args(out.interpreter));
  return out;
}

// The min m of each 32-weight block (w = d q + m) of ggml blocks of type t
// holding m x k weights, for Q4_1 and Q5_1 (empty for other types).
inline std::vector<float> block_mins(TensorType t, const std::vector<uint8_t>& blocks, int64_t m,
                                     int64_t k) {
  if (t != TensorType::q4_1 && t != TensorType::q5_1) return {};
  const int64_t bytes = tensor_type_info(t).block_bytes;
  std::vector<float> mins(static_cast<size_t>(m * k / 32));
  for (size_t b = 0; b < mins.size(); ++b) {
    uint16_t h;
    std::memcpy(&h, &blocks[b * bytes + 2], 2);  // after the f16 scale d
    mins[b] = f16_bits_to_f32(h);
  }
  return mins;
}

// How far a quantized GEMM's y [t, m] (JIT) and yi (interpreter) are from
// their tolerances, as the largest ratio (<= 1 is within):
// - against the double-precision product of the dequantised weights wd
//   [m, k] with x [t, k]: x's quantisation to 8-bit blocks moves each
//   product by at most half a step, sum_j |w_j d_x| / 2, plus 1e-5 of
//   sum_j |w_j x_j| for f32 accumulation;
// - JIT against interpreter: the same integer dots and f32 ops, except
//   reassociated final sums, within 1e-6 of sum_j |w_j x_j|;
// - against the double-precision product of wd with x as quantised (xq's
//   codes times scales), which the integer dots compute exactly: within
//   1e-5 of sum_j |w_j x_j| for f32 accumulation and scaling. This is the
//   tight one: a wrong scale or code in a few groups stays inside the first
//   bound. Q4_1's and Q5_1's min terms m dx s take dx s rounded to f16, as
//   llama.cpp's Q8_1 holds it: given their blocks' mins (block_mins), the
//   reference rounds it so too.
struct QuantizedGemmError {
  double vs_reference = 0, vs_interpreter = 0, vs_quantized = 0;
};
inline QuantizedGemmError quantized_gemm_error(const std::vector<float>& wd,
                                               const std::vector<float>& x, const QuantizedX& xq,
                                               const std::vector<float>& y,
                                               const std::vector<float>& yi, int64_t m, int64_t k,
                                               int64_t t,
                                               const std::vector<float>& block_mins = {}) {
  QuantizedGemmError e;
  for (int64_t tok = 0; tok < t; ++tok)
    for (int64_t i = 0; i < m; ++i) {
      const float* xt = &x[tok * k];
      double ref = 0, bound = 0, mag = 0, qref = 0;
      for (int64_t j = 0; j < k; ++j) {
        double wj = wd[i * k + j];
        ref += wj * xt[j];
        mag += std::fabs(wj * xt[j]);
        bound += std::fabs(wj * xq.d[(tok * k + j) / 32]) / 2;  // Q8_K's d may be negative
        qref += wj * (static_cast<double>(xq.q[tok * k + j]) * xq.d[(tok * k + j) / 32]);
      }
      for (int64_t b = 0; !block_mins.empty() && b < k / 32; ++b) {
        const int64_t xb = (tok * k) / 32 + b;
        const float dxs = static_cast<float>(xq.s[xb]) * xq.d[xb];
        qref += block_mins[i * (k / 32) + b] *
                (static_cast<double>(f16_bits_to_f32(f32_to_f16_bits(dxs))) - dxs);
      }
      double got = y[tok * m + i], interp = yi[tok * m + i];
      e.vs_reference = std::max(e.vs_reference, std::fabs(got - ref) / (bound + 1e-5 * mag + 1e-6));
      e.vs_quantized = std::max(e.vs_quantized, std::fabs(got - qref) / (1e-5 * mag + 1e-6));
      e.vs_interpreter = std::max(e.vs_interpreter, std::fabs(got - interp) / (1e-6 * mag + 1e-7));
    }
  return e;
}

// Random weights of `fmt` for an m x k matrix; K-quant blocks get random
// bytes with small, sane super-block scales.
inline std::vector<uint8_t> random_ggml_weights(int fmt, int64_t m, int64_t k) {
  auto qt = static_cast<TensorType>(fmt);
  const TensorTypeInfo& bf = tensor_type_info(qt);
  std::vector<uint8_t> w(static_cast<size_t>(m * k / bf.block_elems * bf.block_bytes));
  if (fmt == 12 || fmt == 14) {
    std::mt19937 rng(7);
    for (auto& byte : w) byte = static_cast<uint8_t>(rng());
    for (size_t b = 0; b < w.size(); b += bf.block_bytes) {
      uint16_t d = f32_to_f16_bits(0.002f * (1 + b % 5)), dm = f32_to_f16_bits(0.001f);
      std::memcpy(&w[b + (fmt == 12 ? 0 : 208)], &d, 2);
      if (fmt == 12) std::memcpy(&w[b + 2], &dm, 2);
    }
  } else {
    std::vector<float> wf = normal_floats(static_cast<size_t>(m * k), 2, 1.0f);
    ggml::sample_blocks(qt, wf.data(), m * k, 5, w.data());
  }
  return w;
}

// Runs a qgemv-style kernel over ggml blocks (`spec`, its FMT the format)
// for t tokens through the JIT and the interpreter and checks both against
// the double-precision product on the dequantised weights.
inline void check_ggml_gemm(const Spec& spec, int64_t m, int64_t k, int64_t t) {
  const int fmt = static_cast<int>(spec.constexpr_("FMT"));
  INFO(spec.kernel << " fmt " << fmt << " m=" << m << " k=" << k << " t=" << t);
  auto qt = static_cast<TensorType>(fmt);
  std::vector<uint8_t> w = random_ggml_weights(fmt, m, k);
  std::vector<float> wd(static_cast<size_t>(m * k));
  ggml::dequantize(qt, w.data(), m * k, wd.data());
  std::vector<float> x = normal_floats(static_cast<size_t>(t * k), 3, 1.0f);
  QuantizedX xq = quantize_x(x, false);
  auto out = run_quantized_gemm(spec, w, xq, m, k, t);
  auto e =
      quantized_gemm_error(wd, x, xq, out.jit, out.interpreter, m, k, t, block_mins(qt, w, m, k));
  CHECK(e.vs_reference <= 1.0);
  CHECK(e.vs_interpreter <= 1.0);
  CHECK(e.vs_quantized <= 1.0);
}

}  // namespace kiln::test
