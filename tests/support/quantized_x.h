// Activations through quantize_q8 (JIT or interpreter) for the quantized
// GEMV/GEMM tests: 8-bit blocks of 32 with their scales and sums.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/registry.h"
#include "support/runtime_fixture.h"

namespace kiln::test {

struct QuantizedX {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> s;
};

// qblock 32 (Q8_0-style) or 256 (Q8_K-style: one scale per 256, repeated in
// each of its 8 slots).
inline QuantizedX quantize_x(const std::vector<float>& x, bool interpreter = false,
                             int64_t qblock = 32) {
  int64_t nb = static_cast<int64_t>(x.size()) / 32;
  QuantizedX r{std::vector<int8_t>(x.size()), std::vector<float>(nb), std::vector<int32_t>(nb)};
  Spec spec = find_kernel("quantize_q8").make_spec({}, {{"QBLOCK", qblock}});
  std::vector<float> xc = x;
  std::vector<Arg> args = {Arg::buffer(xc.data(), xc.size()), Arg::buffer(r.q.data(), r.q.size()),
                           Arg::buffer(r.d.data(), nb), Arg::buffer(r.s.data(), nb),
                           Arg::scalar_int(nb)};
  if (interpreter)
    runtime().interpret(spec, args);
  else
    runtime().launch(spec, args);
  return r;
}

}  // namespace kiln::test
