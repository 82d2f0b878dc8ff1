#include "kernels/quant/q4k_rows16.h"

#include <cstring>
#include <string>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"

namespace kiln::ggml {

namespace {
constexpr int64_t kBlockBytes = 144;
using L = Q4KRows16;
}  // namespace

void interleave_q4_k_rows16(const uint8_t* blocks, int64_t m, int64_t k, uint8_t* out) {
  if (m <= 0 || m % L::kRows || k <= 0 || k % 256)
    throw Error("Q4_K 16-row interleave: [" + std::to_string(m) + ", " + std::to_string(k) +
                "] needs rows a multiple of 16 and columns a multiple of 256");
  const int64_t nb = k / 256;
  for (int64_t g = 0; g < m / L::kRows; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* c = out + (g * nb + b) * L::kChunkBytes;
      for (int64_t r = 0; r < L::kRows; ++r) {
        const uint8_t* blk = blocks + ((g * L::kRows + r) * nb + b) * kBlockBytes;
        std::memcpy(c + L::kD + 2 * r, blk, 2);
        std::memcpy(c + L::kDmin + 2 * r, blk + 2, 2);
        for (int j = 0; j < 8; ++j) {
          int sc, mn;
          q4k_scale_min(blk + 4, j, &sc, &mn);
          c[L::kScales + 16 * j + r] = static_cast<uint8_t>(sc);
          c[L::kMins + 16 * j + r] = static_cast<uint8_t>(mn);
        }
        for (int64_t p = 0; p < 4; ++p)
          for (int64_t q = 0; q < 8; ++q)
            std::memcpy(c + L::kCodes + ((p * 8 + q) * L::kRows + r) * 4, blk + 16 + 32 * p + 4 * q,
                        4);
      }
    }
}

std::vector<uint8_t> interleave_q4_k_rows16(const uint8_t* blocks, int64_t m, int64_t k) {
  std::vector<uint8_t> out(static_cast<size_t>(L::bytes(m, k)));
  interleave_q4_k_rows16(blocks, m, k, out.data());
  return out;
}

std::vector<float> dequantize_q4_k_rows16(const uint8_t* rows16, int64_t m, int64_t k) {
  const int64_t nb = k / 256;
  std::vector<float> w(static_cast<size_t>(m * k));
  auto f16 = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_bits_to_f32(h);
  };
  for (int64_t g = 0; g < m / L::kRows; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* c = rows16 + (g * nb + b) * L::kChunkBytes;
      for (int64_t r = 0; r < L::kRows; ++r) {
        float d = f16(c + L::kD + 2 * r), dmin = f16(c + L::kDmin + 2 * r);
        float* row = w.data() + (g * L::kRows + r) * k + b * 256;
        for (int64_t p = 0; p < 4; ++p)
          for (int64_t q = 0; q < 8; ++q)
            for (int64_t i = 0; i < 4; ++i) {
              uint8_t byte = c[L::kCodes + ((p * 8 + q) * L::kRows + r) * 4 + i];
              for (int64_t half = 0; half < 2; ++half) {
                int64_t j = 2 * p + half;
                int code = half ? byte >> 4 : byte & 15;
                row[32 * j + 4 * q + i] =
                    d * c[L::kScales + 16 * j + r] * code - dmin * c[L::kMins + 16 * j + r];
              }
            }
      }
    }
  return w;
}

}  // namespace kiln::ggml
