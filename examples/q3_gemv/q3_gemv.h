// A weight format Kiln does not ship, and its matrix-vector product: "q3",
// blocks of 32 weights, each a 3-bit code c with w = d * (c - 4) for the
// block's f16 scale d. A block's codes are three 32-bit bit planes in `q`
// (bit j of plane b is bit b of code j): 12 bytes, and a SIMD lane j
// decodes its weight with two shifts per plane, no byte gathers. A row of k
// weights is 3 k/32 words of `q` and k/32 scales in `d`. y = W x, one row
// per program.
#pragma once

#include <kiln/kiln.h>

#include <cstdint>
#include <vector>

const kiln::KernelDef& q3_gemv_def();

// The host codec: rows x k weights to q3 (scale: the largest magnitude / 4,
// codes rounded), and back.
struct Q3Matrix {
  int64_t rows = 0, k = 0;
  std::vector<uint32_t> q;
  std::vector<uint16_t> d;  // f16 bits
};
Q3Matrix q3_quantize(const std::vector<float>& w, int64_t rows, int64_t k);
float q3_weight(const Q3Matrix& m, int64_t row, int64_t col);
