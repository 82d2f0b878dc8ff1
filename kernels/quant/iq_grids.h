// The lattice grids of ggml's IQ2 and IQ3 formats (IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S). These formats store, per 8 (IQ2) or 4 (IQ3) weights, the
// index of a point of a fixed grid of magnitudes plus sign bits; the grids
// are part of the format, so Kiln carries them as data (iq_grids.inc,
// generated from the `gguf` package and checked against ggml-common.h) and
// every decoder, host or DSL, reads them from here.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant/ggml_blocks.h"

namespace kiln::ggml {

// Whether t is one of the lattice formats above.
bool is_lattice(TensorType t);

// The points of t's grid, each as its weights' magnitudes in bytes (weight
// j in byte j, 8 bytes for IQ2 and 4 for IQ3) — a lookup table as the DSL's
// `lookup` takes it. Throws naming the type for a non-lattice format.
const std::vector<int64_t>& lattice_grid(TensorType t);

// The sign byte of a 7-bit sign index (IQ2_XXS, IQ2_XS, IQ3_XXS): bit 7 is
// the parity of the other seven, so every pattern has an even number of
// negative weights. Bit j set makes weight j negative.
inline uint8_t lattice_signs(int index7) {
  return static_cast<uint8_t>(index7 | ((__builtin_popcount(index7) & 1) << 7));
}

// n weights (a multiple of 256) of t as blocks of random codes, with the
// scale d of unit-variance weights: what tests and benchmarks use in place
// of a quantiser, which Kiln lacks for these formats (ggml's needs an
// importance matrix).
void random_lattice_blocks(TensorType t, int64_t n, uint64_t seed, uint8_t* out);
// Blocks of any format for test and benchmark weights: x quantised where
// Kiln has a quantiser, random lattice blocks (x unused) otherwise.
void sample_blocks(TensorType t, const float* x, int64_t n, uint64_t seed, uint8_t* out);

}  // namespace kiln::ggml
