// AWQ weights as AutoAWQ stores them and vLLM reads them, on the host.
//
// W is input-major [k, n]. qweight i32 [k, n/8]: nibble slot i (bits
// 4i..4i+3) of word c holds column 8c + kAwqOrder[i]; qzeros i32
// [k/group, n/8] is packed the same way; scales f16 [k/group, n].
// w = (q - z) * s. awq_pack is Kiln's seed quantiser: per group and column
// s = max|w| / 7, q = round-half-even(w / s) clamped to [-8, 7] stored as
// q + 8, zero point 8.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant/int4w.h"

namespace kiln {

inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

struct AwqWeights {
  int64_t k = 0, n = 0, group = 0;
  std::vector<int32_t> qweight, qzeros;
  std::vector<uint16_t> scales;  // f16 bits
};

// Throws kiln::Error unless n % 8 == 0 and k % group == 0.
AwqWeights awq_pack(const float* w, int64_t k, int64_t n, int64_t group);
// w [k, n] from the packed form (the reference for the AWQ GEMV).
std::vector<float> awq_dequantize(const AwqWeights& a);

// The same weights as int4w rows (int4w.h) with zero points, for
// gemv_int4w with ZP=1 or, interleaved, gemv_int4w_rows16. AWQ's
// input-major words make every output block of a GEMV a strided walk over
// all of W; this layout change, made once at load time as vLLM's Marlin
// path does, turns it into contiguous row streams. Every value is carried
// over bit for bit: no dequantised copy.
// Throws kiln::Error for group sizes gemv_int4w lacks (32, 64, 128).
Int4wRows awq_to_int4w(const AwqWeights& a);

}  // namespace kiln
