// FP8 (E4M3FN) weights widened for a matmul's f32 arithmetic.
//
// A GEMV over FP8 weights is bound by the widening, not by memory, when it
// goes through the exact conversion (which must also turn 0x7F into a NaN
// and rescale). Matmuls with block scales use this instead: a byte
// sign-extended to 16 bits and shifted left by 7 has E4M3's exponent and
// mantissa in an f16's, and with bit 14 cleared its sign on top, so it is
// exactly the weight times 2^-8 (exponent bias 15 for 7; E4M3's subnormals
// are f16 subnormals), widened to f32 by one instruction with F16C
// (vcvtph2ps), every result a normal f32. The kernel folds kFp8Unscale
// into its block scale.
//
// Not the shorter route of a 32-bit shift by 20 (the weight times 2^-120 as
// an f32 directly, no conversion instruction): it makes E4M3's subnormals
// f32 subnormals, which Intel cores multiply through a microcode assist.
// With random weights in [-1, 1] (1.5 % of them subnormal) a 4096x14336
// GEMV ran 10x slower on a Xeon (Emerald Rapids) that way; on Zen 5 it was
// the faster route (a warm 2048x2048 GEMV 87-89 GB/s against 66-67).
//
// The kernel reads the weights as raw bytes (a u8 buffer: widening to f32
// in a load would be the exact conversion again). The NaN bytes 0x7F and
// 0xFF read as +-480 * 2^-8: loaders refuse weights that hold them
// (models/hf_checkpoint.cpp), so no NaN reaches the kernel.
#pragma once

#include "ir/builder.h"

namespace kiln {

inline constexpr double kFp8Unscale = 256.0;

// E4M3 bytes (u8 [..]) -> f32 [..], the weights times 2^-8.
inline Value widen_fp8_scaled_down(const Value& bytes) {
  auto h = (bytes.bitcast(DType::i8).to(DType::i16).bitcast(DType::u16) << 7) & 0xBFFF;
  return h.bitcast(DType::f16).to(DType::f32);
}

}  // namespace kiln
