#include "kernels/quant/int4w.h"

#include <cstring>
#include <string>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/rows16.h"

namespace kiln {

namespace {
int code_of(const Int4wRows& r, int64_t row, int64_t col) {
  uint8_t byte = r.q[(row * r.k + col) / 2];
  return col % 2 ? byte >> 4 : byte & 15;
}

// The position of weight j (0..255) of a chunk in the code bytes of one
// row: pair p, group g, byte i, and whether it is the high nibble.
struct CodeSlot {
  int64_t p, g, i;
  bool high;
};
CodeSlot slot_of(int64_t j) {
  int64_t p = j / 64, rest = j % 64;
  return {p, rest % 32 / 4, rest % 4, rest >= 32};
}
int64_t code_byte(int64_t row, const CodeSlot& s) {
  return ggml::Q4KRows16::code_at(s.p, s.g, row, s.i);
}
}  // namespace

std::vector<float> int4w_dequantize(const Int4wRows& r) {
  const int64_t ng = r.k / r.group;
  std::vector<float> w(static_cast<size_t>(r.m * r.k));
  for (int64_t row = 0; row < r.m; ++row)
    for (int64_t col = 0; col < r.k; ++col) {
      int64_t g = row * ng + col / r.group;
      int z = r.zeros.empty() ? 8 : r.zeros[g];
      w[row * r.k + col] =
          static_cast<float>(code_of(r, row, col) - z) * f16_bits_to_f32(r.scales[g]);
    }
  return w;
}

std::vector<uint8_t> interleave_int4w_rows16(const Int4wRows& r) {
  if (r.group != 32 && r.group != 64 && r.group != 128)
    throw Error("interleave_int4w_rows16: group size " + std::to_string(r.group) +
                " (the 16-row layout takes 32, 64 or 128)");
  if (r.m % 16 || r.k % 256)
    throw Error("interleave_int4w_rows16: [m, k] = [" + std::to_string(r.m) + ", " +
                std::to_string(r.k) + "] needs m a multiple of 16 and k of 256");
  const Int4wRows16 L{r.group, !r.zeros.empty()};
  const int64_t ng = r.k / r.group, nb = r.k / 256, gpc = L.groups();
  std::vector<uint8_t> out(static_cast<size_t>(L.bytes(r.m, r.k)), 0);
  for (int64_t rg = 0; rg < r.m / 16; ++rg)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* c = &out[(rg * nb + b) * L.chunk_bytes()];
      for (int64_t lr = 0; lr < 16; ++lr) {
        const int64_t row = rg * 16 + lr;
        for (int64_t j = 0; j < gpc; ++j) {
          const int64_t g = row * ng + b * gpc + j;
          std::memcpy(c + L.scales_at() + (16 * j + lr) * 2, &r.scales[g], 2);
          if (L.zero_points) c[L.zeros_at() + 16 * j + lr] = r.zeros[g];
        }
        for (int64_t j = 0; j < 256; ++j) {
          CodeSlot s = slot_of(j);
          int code = code_of(r, row, b * 256 + j);
          c[L.codes_at() + code_byte(lr, s)] |= static_cast<uint8_t>(s.high ? code << 4 : code);
        }
      }
    }
  return out;
}

std::vector<float> dequantize_int4w_rows16(const Int4wRows16& L, const uint8_t* w, int64_t m,
                                           int64_t k) {
  const int64_t nb = k / 256;
  std::vector<float> out(static_cast<size_t>(m * k));
  for (int64_t row = 0; row < m; ++row)
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* c = w + ((row / 16) * nb + b) * L.chunk_bytes();
      const int64_t lr = row % 16;
      for (int64_t j = 0; j < 256; ++j) {
        const int64_t grp = j / L.group;
        uint16_t s;
        std::memcpy(&s, c + L.scales_at() + (16 * grp + lr) * 2, 2);
        int z = L.zero_points ? c[L.zeros_at() + 16 * grp + lr] : 8;
        CodeSlot slot = slot_of(j);
        uint8_t byte = c[L.codes_at() + code_byte(lr, slot)];
        int code = slot.high ? byte >> 4 : byte & 15;
        out[row * k + b * 256 + j] = static_cast<float>(code - z) * f16_bits_to_f32(s);
      }
    }
  return out;
}

}  // namespace kiln
