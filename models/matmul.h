// y[t, m] = x[t, k] W^T for a GGUF weight of any type Kiln reads, as the
// kernel launches that compute it: gemv/gemm for f32/f16/bf16 weights,
// quantize_q8 + qgemv for ggml's block formats, qgemv_rows16 for Q4_K/Q6_K
// interleaved at load (the activations are quantised once per input and
// shared by every weight that reads it).
//
// The launches are descriptions (kernel, dtypes, arguments by parameter
// name), which a forward records into a plan. Pointers are the backend's
// buffers. A Plan::Dynamic `t` (an MoE expert's routed tokens) scales the
// arguments that depend on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/ggml_type.h"
#include "runtime/plan.h"

namespace kiln {

// A row-major weight [m, k] (GGUF ne = [k, m]) in a backend buffer (in place
// in the mapped model file on host-memory backends).
struct WeightView {
  const uint8_t* data = nullptr;
  GgmlType type = GgmlType::f32;
  int64_t k = 0, m = 0;
  // The same K-quant weights interleaved across 16 rows (models/packed_weights.h),
  // when the loader made that copy: matmul then runs qgemv_rows16 on it.
  const uint8_t* rows16 = nullptr;
};

// Room for one input's 8-bit blocks: q [t, k], d and s [t, k/32], for any
// t * k up to `capacity` (checked: a kernel writing past a host buffer would
// corrupt the heap silently).
struct QuantizedBuffers {
  int8_t* q = nullptr;
  float* d = nullptr;
  int32_t* s = nullptr;
  int8_t* s8 = nullptr;  // the sums split into bytes (kernels/quant/split_sums.h)
  int64_t capacity = 0;
};

struct LaunchDesc {
  std::string kernel;
  std::map<std::string, DType> dtypes;
  Plan::Args args;
  Sizes sizes;
  std::map<std::string, int64_t> fixed;
};

// A token count: fixed, or a plan slot (at most `t`, the recorded bound).
struct TokenCount {
  int64_t t = 0;
  std::string slot;  // "": fixed
  // The argument for a scalar of `per_token` * tokens.
  Plan::PlanArg times(int64_t per_token) const;
};

bool is_block_quantized(GgmlType t);
// The activation blocks llama.cpp pairs with weight type w: 256 (Q8_K) for
// K-quants, 32 (Q8_0) otherwise; quantize_q8's QBLOCK.
int64_t activation_block(GgmlType w);
// quantize_q8 of x [t, k] into `q` (needed before matmuls of block-quantized
// weights), in blocks of `qblock`. Throws when t * k exceeds q's capacity.
LaunchDesc quantize_activations(const float* x, const TokenCount& t, int64_t k,
                                const QuantizedBuffers& q, int64_t qblock);
// y [t, m] = x [t, k] W^T; `q` must hold x's quantize_activations result
// when W is block-quantized.
LaunchDesc matmul(const WeightView& w, const float* x, const QuantizedBuffers& q, float* y,
                  const TokenCount& t);

}  // namespace kiln
