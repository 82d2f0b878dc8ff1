// Random int4w weights (kernels/quant/int4w.h) for the int4w kernel tests:
// random codes, finite scales in [-0.05, 0.05] and, with zp, random zero
// points (random bytes as scales could be NaN or inf).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "ir/dtype.h"
#include "kernels/quant/int4w.h"

namespace kiln::test {

inline Int4wRows random_int4w(int64_t m, int64_t k, int64_t group, bool zp, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Int4wRows r{m,     k,
              group, std::vector<uint8_t>(static_cast<size_t>(m * k / 2)),
              {},    std::vector<uint16_t>(static_cast<size_t>(m * k / group))};
  for (auto& b : r.q) b = static_cast<uint8_t>(rng());
  for (auto& s : r.scales) s = f32_to_f16_bits(0.05f * u(rng));
  if (zp) {
    r.zeros.resize(r.scales.size());
    for (auto& z : r.zeros) z = static_cast<uint8_t>(rng() % 16);
  }
  return r;
}

}  // namespace kiln::test
