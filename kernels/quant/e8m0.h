// MXFP4's shared scale in kernels: the DSL twin of ggml::e8m0_half, kept
// in one place so qgemv and get_rows decode the byte alike.
#pragma once

#include "ir/builder.h"

namespace kiln {

// e8m0 scale bytes e (any integer dtype) as f32 2^(e - 128), half the e8m0
// value as MXFP4's doubled e2m1 table wants: the float whose exponent field
// is e - 1, or for e < 2 the subnormals 2^-128 and 2^-127.
inline Value e8m0_half_value(const Value& e) {
  Value e32 = e.to(DType::i32);
  Value subnormal = full(e32.shape(), 0x00200000, DType::i32) << e32;
  return where(e32 < 2, subnormal, (e32 - 1) << 23).bitcast(DType::f32);
}

}  // namespace kiln
