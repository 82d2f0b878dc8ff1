// Tensors' bytes as f32 and back, for every type a GGUF file may hold
// (kernels/quant/tensor_type.h): the host side of the formats, which the
// GGUF reader and writer, `kiln convert`, `kiln quantize` and the tests use.
#pragma once

#include <cstdint>

#include "kernels/quant/tensor_type.h"

namespace kiln {

// n values of type t as f32: plain floats converted, block formats
// dequantised as ggml does (n a whole number of blocks).
void ggml_to_f32(TensorType t, const uint8_t* data, int64_t n, float* out);
// n f32 values stored as type t: F32, F16 and BF16 rounded to nearest even,
// block formats through Kiln's ports of ggml's reference quantisers.
void ggml_from_f32(TensorType t, const float* x, int64_t n, uint8_t* out);

// Bytes of a row of n elements; -1 when n is not a whole number of blocks.
int64_t ggml_row_bytes(TensorType t, int64_t n);

}  // namespace kiln
