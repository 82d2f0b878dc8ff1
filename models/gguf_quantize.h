// A model's float weight matrices quantized to one of llama-quantize's
// mixes: what `kiln convert --type` writes.
//
// The per-tensor types come from the plan gen-model writes its models by
// (models/model_generator.h: Q4_K_M's Q6_K layers, the fallbacks of rows off
// 256, norms and router kept F32), laid over the model's own shapes, and
// every quantiser is Kiln's bit-exact port of ggml's reference one, so the
// file matches what llama-quantize makes of the same F16/BF16/F32 weights.
// Tensors the plan does not name (rope_freqs.weight) and tensors already of
// their planned type are copied as they are.
#pragma once

#include <string>

#include "models/gguf.h"
#include "models/model_generator.h"

namespace kiln {

// Writes `in` with its weights in `format` to `path`. Throws kiln::Error
// naming the tensor when one is neither of its planned type nor a float
// type that can be quantized (an already quantized model). Chunks of rows
// are quantized on `threads` threads (0: all); the bytes do not depend on it.
void quantize_gguf(const GgufFile& in, WeightFormat format, const std::string& path,
                   int threads = 0);

}  // namespace kiln
