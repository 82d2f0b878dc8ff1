#include "kernels/quant/iq_grids.h"

#include <cstring>
#include <random>
#include <string>

#include "ir/dtype.h"
#include "ir/error.h"

namespace kiln::ggml {
namespace {

#include "kernels/quant/iq_grids.inc"

// Expands packed level indices (`bits` per weight, weight 0 lowest) into
// bytes of magnitudes.
template <size_t N, size_t L>
std::vector<int64_t> expand(const uint16_t (&points)[N], const uint8_t (&levels)[L], int bits,
                            int weights) {
  std::vector<int64_t> out;
  out.reserve(N);
  for (uint16_t p : points) {
    uint64_t v = 0;
    for (int j = 0; j < weights; ++j)
      v |= uint64_t{levels[(p >> (bits * j)) & ((1 << bits) - 1)]} << (8 * j);
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

}  // namespace

bool is_lattice(TensorType t) {
  switch (t) {
    case TensorType::iq2_xxs:
    case TensorType::iq2_xs:
    case TensorType::iq2_s:
    case TensorType::iq3_xxs:
    case TensorType::iq3_s: return true;
    default: return false;
  }
}

const std::vector<int64_t>& lattice_grid(TensorType t) {
  static const std::vector<int64_t> iq2xxs = expand(kIQ2XXSPoints, kIQ2XXSLevels, 2, 8),
                                    iq2xs = expand(kIQ2XSPoints, kIQ2XSLevels, 2, 8),
                                    iq2s = expand(kIQ2SPoints, kIQ2SLevels, 2, 8),
                                    iq3xxs = expand(kIQ3XXSPoints, kIQ3XXSLevels, 4, 4),
                                    iq3s = expand(kIQ3SPoints, kIQ3SLevels, 4, 4);
  switch (t) {
    case TensorType::iq2_xxs: return iq2xxs;
    case TensorType::iq2_xs: return iq2xs;
    case TensorType::iq2_s: return iq2s;
    case TensorType::iq3_xxs: return iq3xxs;
    case TensorType::iq3_s: return iq3s;
    default:
      throw Error("ggml type " + std::to_string(static_cast<int>(t)) + " has no lattice grid");
  }
}

void random_lattice_blocks(TensorType t, int64_t n, uint64_t seed, uint8_t* out) {
  lattice_grid(t);  // throws for other formats
  const TensorTypeInfo& f = tensor_type_info(t);
  if (n % f.block_elems)
    throw Error("random_lattice_blocks: " + std::to_string(n) +
                " weights is not a multiple of 256");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> scale(0.5f, 1.5f);
  for (int64_t b = 0; b < n / f.block_elems; ++b, out += f.block_bytes) {
    for (int i = 0; i < f.block_bytes; ++i) out[i] = static_cast<uint8_t>(rng());
    // The largest weights (IQ2: 43 at 15.5 / 4 scale steps, 166 d; IQ3:
    // 62 at 15.5 / 2 or 15 at 31, 480 d) land near 3 sigma.
    const bool iq3 = t == TensorType::iq3_xxs || t == TensorType::iq3_s;
    const float d = scale(rng) * (iq3 ? 0.007f : 0.02f);
    const uint16_t h = f32_to_f16_bits(d);
    std::memcpy(out, &h, 2);
  }
}

void sample_blocks(TensorType t, const float* x, int64_t n, uint64_t seed, uint8_t* out) {
  if (has_quantizer(t))
    quantize(t, x, n, out);
  else
    random_lattice_blocks(t, n, seed, out);
}

}  // namespace kiln::ggml
