// The rounding of f32 values to ggml's Q8_0 as llama.cpp's x86 CPU code
// does it (quantize_row_q8_0): per block of 32, d = amax / 127 kept as f16
// and code = round-half-even(x * 127 / amax), 0 for an all-zero block.
// The activations of the quantized GEMVs (quantize_q8) and a q8_0 KV cache
// (kv_cache_store) are rounded alike, so that both see the same bytes as
// llama.cpp. Half-even rounding is the f32 add-and-subtract of 1.5 * 2^23,
// exact for |v| <= 2^22.
#pragma once

#include "ir/builder.h"

namespace kiln {

struct Q8Blocks {
  Value scale;  // f32 [n], each an f16 value
  Value codes;  // f32 [n, 32], integers in [-127, 127]
};

// v: f32 [n, 32], one block per row.
Q8Blocks round_q8_0(const Value& v);

// round-half-even of f32 values of magnitude <= 2^22.
Value round_half_even(const Value& v);

}  // namespace kiln
