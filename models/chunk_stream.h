// A tensor's bytes produced in chunks on several threads and handed to a
// GgufWriter sink in order.
//
// Writing a model (gen-model's random weights, `kiln convert --type`'s
// quantization) is encode-bound: each chunk of rows is encoded on its own,
// a window of chunks at a time on `threads` threads, and the window is
// written in chunk order, so the bytes do not depend on the thread count
// and memory holds two chunks per thread, not the tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "models/gguf_writer.h"

namespace kiln {

// encode(chunk, out) fills *out with chunk number `chunk`'s bytes.
void stream_chunks(int64_t n_chunks, int threads,
                   const std::function<void(int64_t chunk, std::vector<uint8_t>* out)>& encode,
                   const GgufWriter::ByteSink& sink);

}  // namespace kiln
