// numpy's .npy files of 2-D float arrays: what `kiln run --logits-out`
// writes and `kiln kld --base-logits` reads (logits saved by llama.cpp
// through llama-cpp-python, or by Kiln).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// f32 little-endian, C order, shape [data.size() / cols, cols] (format 1.0).
void write_npy(const std::string& path, const std::vector<float>& data, int64_t cols);

struct NpyMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;  // row-major
};
// A 2-D little-endian f32 or f16 array in C order (format 1.0 to 3.0);
// anything else is a kiln::Error naming the file and the reason.
NpyMatrix read_npy(const std::string& path);

}  // namespace kiln
