// Vectorisable f32 transcendental functions emitted as plain LLVM IR.
//
// LLVM's llvm.exp/llvm.log intrinsics on vectors become one libm call per
// lane; softmax, SiLU and GELU would spend their time there. These
// Cephes-style range reductions and polynomials stay in vector registers.
// Accuracy against the interpreter's double-precision results (checked in
// tests/codegen): exp, exp2, log, log2 within 2 ulp; tanh, sigmoid within
// 4 ulp; erf within 2e-7 absolute. Each takes and returns f32 scalars or
// vectors and handles NaN, +-inf and overflow/underflow. The profile says
// which target instructions may shorten them (AVX-512's vscalefps).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "codegen/cpu/llvm_lowering.h"

namespace kiln::cpu_math {

llvm::Value* exp(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile);
llvm::Value* exp2(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile);
llvm::Value* log(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* log2(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* tanh(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile);
llvm::Value* sigmoid(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile);
llvm::Value* erf(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile);

}  // namespace kiln::cpu_math
