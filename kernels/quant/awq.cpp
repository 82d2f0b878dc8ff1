#include "kernels/quant/awq.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ir/dtype.h"
#include "ir/error.h"

namespace kiln {

namespace {
int nibble(int32_t word, int slot) { return (word >> (4 * slot)) & 15; }
// The nibble slot of column c within its word.
int slot_of(int64_t c) {
  return static_cast<int>(std::find(kAwqOrder, kAwqOrder + 8, c % 8) - kAwqOrder);
}
}  // namespace

AwqWeights awq_pack(const float* w, int64_t k, int64_t n, int64_t group) {
  if (n % 8 || group <= 0 || k % group)
    throw Error("awq_pack: n = " + std::to_string(n) + " must be a multiple of 8 and k = " +
                std::to_string(k) + " a multiple of the group size " + std::to_string(group));
  AwqWeights a{k,
               n,
               group,
               std::vector<int32_t>(k * n / 8, 0),
               std::vector<int32_t>(k / group * n / 8, 0),
               std::vector<uint16_t>(k / group * n)};
  for (int64_t g = 0; g < k / group; ++g)
    for (int64_t c = 0; c < n; ++c) {
      float amax = 0;
      for (int64_t r = g * group; r < (g + 1) * group; ++r)
        amax = std::max(amax, std::fabs(w[r * n + c]));
      a.scales[g * n + c] = f32_to_f16_bits(amax / 7.0f);
    }
  auto put = [](int32_t* words, int64_t col, int value) {
    int slot = slot_of(col);
    words[col / 8] |= static_cast<int32_t>(static_cast<uint32_t>(value) << (4 * slot));
  };
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c) {
      float s = f16_bits_to_f32(a.scales[(r / group) * n + c]);
      int q = s == 0 ? 0 : static_cast<int>(std::nearbyint(w[r * n + c] / s));
      put(&a.qweight[r * n / 8], c, std::clamp(q, -8, 7) + 8);
    }
  for (int64_t g = 0; g < k / group; ++g)
    for (int64_t c = 0; c < n; ++c) put(&a.qzeros[g * n / 8], c, 8);
  return a;
}

std::vector<float> awq_dequantize(const AwqWeights& a) {
  std::vector<float> w(a.k * a.n);
  for (int64_t r = 0; r < a.k; ++r)
    for (int64_t c = 0; c < a.n; ++c) {
      int slot = slot_of(c);
      int q = nibble(a.qweight[r * a.n / 8 + c / 8], slot);
      int z = nibble(a.qzeros[(r / a.group) * a.n / 8 + c / 8], slot);
      w[r * a.n + c] =
          static_cast<float>(q - z) * f16_bits_to_f32(a.scales[(r / a.group) * a.n + c]);
    }
  return w;
}

Int4wRows awq_to_int4w(const AwqWeights& a) {
  if (a.group != 32 && a.group != 64 && a.group != 128)
    throw Error("awq_to_int4w: group size " + std::to_string(a.group) +
                " (gemv_int4w takes 32, 64 or 128)");
  int64_t ng = a.k / a.group;
  Int4wRows r{a.n,
              a.k,
              a.group,
              std::vector<uint8_t>(a.n * a.k / 2, 0),
              std::vector<uint8_t>(a.n * ng),
              std::vector<uint16_t>(a.n * ng)};
  for (int64_t c = 0; c < a.n; ++c) {
    int slot = slot_of(c);
    uint8_t* row = &r.q[c * a.k / 2];
    for (int64_t i = 0; i < a.k; ++i)
      row[i / 2] |=
          static_cast<uint8_t>(nibble(a.qweight[i * a.n / 8 + c / 8], slot) << (4 * (i % 2)));
    for (int64_t g = 0; g < ng; ++g) {
      r.zeros[c * ng + g] = static_cast<uint8_t>(nibble(a.qzeros[g * a.n / 8 + c / 8], slot));
      r.scales[c * ng + g] = a.scales[g * a.n + c];
    }
  }
  return r;
}

}  // namespace kiln
