// Op calls on tensors: the library kernels as functions of shaped, typed
// data. Each op checks that its tensors fit together (errors name the op,
// the tensors and their shapes), derives the kernel's dtypes and sizes from
// them, and launches through Runtime::call, so the tuning database (or the
// kernel's heuristic) picks the constexprs for the shape.
#pragma once

#include "runtime/runtime.h"
#include "runtime/tensor.h"

namespace kiln::ops {

// z = x + y, all the same dtype and element count.
void add(Runtime& rt, const Tensor& x, const Tensor& y, const Tensor& z);
// y = W x: W [m, k] (f32/f16/bf16), x [k], y [m] of one dtype.
void gemv(Runtime& rt, const Tensor& w, const Tensor& x, const Tensor& y);
// y = rmsnorm(x) * w over the last axis; x, y [rows, n] (or [n]), w [n].
void rmsnorm(Runtime& rt, const Tensor& x, const Tensor& w, const Tensor& y, double eps);
// y = softmax(x) over the last axis.
void softmax(Runtime& rt, const Tensor& x, const Tensor& y);
// out = silu(gate) * up.
void silu_mul(Runtime& rt, const Tensor& gate, const Tensor& up, const Tensor& out);

}  // namespace kiln::ops
