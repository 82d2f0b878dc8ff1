#include "kernels/quant/q8_0_rounding.h"

namespace kiln {

Value round_half_even(const Value& v) { return (v + 12582912.0) - 12582912.0; }

Q8Blocks round_q8_0(const Value& v) {
  const int64_t n = v.shape()[0];
  auto amax = max(abs(v), 1);  // [n]
  auto id = where(amax != 0.0, 127.0 / amax, zeros(DType::f32, {n}));
  return {(amax / 127.0).to(DType::f16).to(DType::f32), round_half_even(v * expand_dims(id, 1))};
}

}  // namespace kiln
