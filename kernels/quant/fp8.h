// FP8 (E4M3FN) weights widened for a matmul's f32 arithmetic.
//
// A GEMV over FP8 weights is bound by the widening, not by memory, when it
// goes through the exact conversion (which must also turn 0x7F into a NaN
// and rescale). Matmuls with block scales use this instead: a byte
// sign-extended to 32 bits and shifted left by 20 has E4M3's exponent and
// mantissa in an f32's, and with bits 27-30 cleared its sign on top, so it
// is exactly the weight times 2^-120 (exponent bias 127 for 7; E4M3's
// subnormals land on f32 subnormals, exact, which x86, NEON and CUDA
// multiply at full speed with flush-to-zero off, as Kiln leaves it). Three
// integer ops and no conversion instruction: on Zen 5 the earlier f16
// image (a 16-bit shift, then F16C's vcvtph2ps, one per 16 weights) capped
// a warm 2048x2048 GEMV at 66-67 GB/s, this at 87-89.
//
// The 2^-120 is undone in two halves, kFp8HalfUnscale = 2^60: one folded
// into the block scale, one on the finished sums. So an operand overflows
// f32 only at |x * scale| >= 2^68, and a product underflows only below
// 2^-66 (an absolute error under 2^-89 in the result). The kernel reads
// the weights as raw bytes (a u8 buffer: widening to f32 in a load would be
// the exact conversion again). The NaN bytes 0x7F and 0xFF read as
// +-480 * 2^-120: loaders refuse weights that hold them
// (models/hf_checkpoint.cpp), so no NaN reaches the kernel.
#pragma once

#include "ir/builder.h"

namespace kiln {

inline constexpr double kFp8HalfUnscale = 0x1p60;

// E4M3 bytes (u8 [..]) -> f32 [..], the weights times 2^-120.
inline Value widen_fp8_scaled_down(const Value& bytes) {
  auto bits = (bytes.bitcast(DType::i8).to(DType::i32).bitcast(DType::u32) << 20) & 0x87F00000u;
  return bits.bitcast(DType::f32);
}

// Widened weights times their block scale (a scalar) and half the 2^120
// they lack, through an FMA with a +0 addend; the finished sums take the
// other half. Zen 5 multiplies a subnormal (an E4M3 subnormal, widened)
// slowly in vmulps and at full speed in vfmadd: a 4096x14336 FP8 GEMM over
// 512 tokens, 1 thread, took 730 ms through the multiply, 400 through the
// FMA. The addend keeps LLVM from folding it back into a multiply
// (fma(a, b, +0) is +0 where a * b is -0).
inline Value scale_fp8(const Value& widened, const Value& scale) {
  return fma(widened, broadcast_to(scale * kFp8HalfUnscale, widened.shape()),
             zeros(DType::f32, widened.shape()));
}

}  // namespace kiln
