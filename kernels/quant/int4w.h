// Int4 weight-only (int4w) weights on the host: the row-major form
// gemv_int4w reads, and the 16-row interleave gemv_int4w_rows16 reads.
//
// Row-major (output-major, GPTQ-style): q u8 [m, k/2] with input 2j in the
// low nibble and 2j + 1 in the high one, scales f16 [m, k/group], zero
// points u8 [m, k/group] (empty: every zero point is 8, gemv_int4w's
// ZP=0). w = (q - z) * s.
//
// Why a second layout: in the row-major form a 32-bit lane of an int8 dot
// holds 4 codes of one row, so every lane needs its own scaling per group
// and token, and each short row pays a program's set-up. Interleaved like
// ggml's formats in rows16.h, one 64-byte load holds 4 codes of 16 rows,
// a lane is a row, and a group's scaling is paid once per 16 rows. Made
// once at load time; every code, scale and zero point keeps its value.
//
// Per 16 rows and 256 weights, one chunk of chunk_bytes() at
// ((row / 16) * (k / 256) + b) * chunk_bytes(), n = 256 / group groups:
//   s     f16 [n][16]          group j's scale for row r at 16 j + r
//   z     u8  [n][16]          its zero point (only with zero points)
//   (zero padding to a multiple of 64 bytes, so the codes are aligned)
//   qs    u8  [4][8][16][4]    [pair p][group g][row r][i]: low nibble
//                              weight 64 p + 4 g + i, high nibble weight
//                              64 p + 32 + 4 g + i (Q4_K's code order)
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

struct Int4wRows {
  int64_t m = 0, k = 0, group = 0;
  std::vector<uint8_t> q, zeros;
  std::vector<uint16_t> scales;  // f16 bits
};

// w [m, k] of the row-major form, as f32.
std::vector<float> int4w_dequantize(const Int4wRows& r);

struct Int4wRows16 {
  static constexpr int64_t kRows = 16, kCodeBytes = 2048;
  int64_t group = 128;
  bool zero_points = false;

  int64_t groups() const { return 256 / group; }
  int64_t scales_at() const { return 0; }
  int64_t zeros_at() const { return 32 * groups(); }
  int64_t codes_at() const { return ((zero_points ? 48 : 32) * groups() + 63) / 64 * 64; }
  int64_t chunk_bytes() const { return codes_at() + kCodeBytes; }
  int64_t bytes(int64_t m, int64_t k) const { return m / kRows * (k / 256) * chunk_bytes(); }
};

// The interleave of r (zero points kept when r has them). Throws
// kiln::Error unless m is a multiple of 16, k of 256 and the group size
// 32, 64 or 128.
std::vector<uint8_t> interleave_int4w_rows16(const Int4wRows& r);
// w [m, k] of the interleaved form, as f32 (checks the interleave).
std::vector<float> dequantize_int4w_rows16(const Int4wRows16& layout, const uint8_t* w, int64_t m,
                                           int64_t k);

}  // namespace kiln
