// ggml weights (every 32-weight block format, Q2_K-Q6_K, IQ4_XS) interleaved across 16 rows: the
// layouts qgemv_rows16 reads.
//
// ggml keeps each row's blocks contiguous, so the 4 codes of one row that a
// 32-bit lane of an int8 dot (vpdpbusd) multiplies sit 144 bytes away from
// the next row's. Prompt GEMM wants the opposite: one 64-byte load holding
// 4 consecutive codes of 16 rows, one row per lane, so a lane sums a whole
// sub-block in its accumulator and the f32 scaling is paid once per row and
// sub-block instead of once per lane. This layout is made once, at load
// time (as llama.cpp repacks Q4_K for its CPU GEMM); every code, scale and
// min keeps its value.
//
// Q4_K: the 6-bit scales and mins are unpacked to bytes.
// Per 16 rows r and super-block b (256 weights), one 2368-byte chunk at
// ((row / 16) * (k / 256) + b) * 2368:
//   d     f16 [16]            the rows' block scales
//   dmin  f16 [16]            their min scales
//   sc    u8  [8][16]         sub-block j's 6-bit scale for row r at 16 j + r
//   mn    u8  [2][16][4]      sub-block 4 h + i's 6-bit min for row r at
//                             64 h + 4 r + i (4 per i32 lane, the operand
//                             of one byte dot per row)
//   qs    u8  [4][8][16][4]   codes: [pair p][group g][row r][i] is ggml's
//                             qs[32 p + 4 g + i] of row r, whose low nibble is
//                             weight 64 p + 4 g + i and high nibble weight
//                             64 p + 32 + 4 g + i
//
// Q5_K: Q4_K's chunk with a byte per 8 weights between the mins and the
// codes, one 2880-byte chunk, the 5-bit codes (ggml's nibble | qh bit << 4)
// lo (weight 64 p + 4 g + i) and hi (64 p + 32 + 4 g + i) of pair p as
//   ...   as Q4_K up to the mins
//   hl    u8  [8][16][4]      [group g][row r][i]: bits 2p, 2p + 1 the low
//                             2 bits of pair p's hi
//   qs    u8  [4][8][16][4]   [pair p][group g][row r][i]: lo | (hi >> 2) << 5
// so that lo is one mask and hi, in place times 8, one rotate, a mask and
// a merge (ggml's nibbles and bit planes: 8 operations per pair, here 4).
//
// IQ4_XS: per 16 rows and super-block, one 2208-byte chunk:
//   d     f16 [16]
//   ls    u8  [2][16][4]      sub-block 4 h + i's 6-bit scale (w = d (ls - 32)
//                             table[q]) for row r at 64 h + 4 r + i (as
//                             Q4_K's mins: the operand of a byte dot per row)
//   qs    u8  [8][4][16][4]   [sub-block s][group g][row r][i] is ggml's
//                             qs[16 s + 4 g + i] of row r: low nibble weight
//                             32 s + 4 g + i, high nibble 32 s + 16 + 4 g + i
//
// Q3_K: per 16 rows and super-block, one 1824-byte chunk (16 of ggml's
// 110-byte blocks, their 12 bytes of packed 6-bit scales as 16 bytes):
//   d     f16 [16]
//   sc    u8  [4][16][4]      16-weight group s's signed scale (s_g - 32) +
//                             128 for row r at 64 (s / 4) + 4 r + s % 4, as Q6_K's
//   codes [2][4] of 192 bytes half h, pair p of groups g = 2 p + e (l =
//                             4 g + i, i < 4): the 3-bit codes c_j (ggml's
//                             2 low bits | its hmask bit << 2) of weights
//                             128 h + 32 j + l, as
//           x  u8 [2][16][4]  [e][r][i]: c_0 | c_1 << 3 | (c_3 & 3) << 6
//           y  u8 [16][4]     nibble e (e = 0 low): c_2 | (c_3 >> 2) << 3
//                             so that codes 0-2 are read in place (c_1
//                             times 8, group 2 p + 1's c_2 after one
//                             shift), one mask each, and only c_3 is
//                             gathered: 6 operations per 4 code vectors
//                             (7 for odd groups), not ggml's bit planes' 13
//
// Q2_K: per 16 rows and super-block, one 1344-byte chunk (16 x 84):
//   d     f16 [16]
//   dmin  f16 [16]
//   sc    u8  [4][16][4]      ggml's scales[s] (scale in the low nibble, min
//                             in the high) of row r at 64 (s / 4) + 4 r + s % 4
//   qs    u8  [2][8][16][4]   [half h][group g][row r][i] is ggml's
//                             qs[32 h + 4 g + i]: bits 2j..2j+1 the code
//                             of weight 128 h + 32 j + 4 g + i
//
// Q6_K: per 16 rows and super-block, one 3360-byte chunk (exactly 16 of
// ggml's 210-byte blocks):
//   d     f16 [16]
//   sc    u8  [4][16][4]        16-weight group s's signed scale + 128 for
//                               row r at 64 (s / 4) + 4 r + s % 4 (4 per
//                               i32 lane and unsigned, the operand of one
//                               byte dot against the tokens' 16-code sums)
//   codes [2][8] of 192 bytes   half h, group g (l = 4 g + i, i < 4): the
//                               6-bit codes c_j of weights 128 h + 32 j + l
//                               (ggml's ql nibble | qh bits << 4), as
//           p  u8 [16][4]       c_0 << 2 | (c_3 & 3)
//           q  u8 [16][4]       c_1 << 2 | (c_3 >> 2 & 3)
//           r  u8 [16][4]       c_2 << 2 | c_3 >> 4
//                               so that codes 0-2 are read in place (times
//                               4, one mask each) and only code 3 is
//                               gathered: 8 operations per 4 code vectors,
//                               not ggml's nibble-and-2-bit 13
//
// The 32-weight-block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL,
// MXFP4): per 16 rows and 8 consecutive blocks (256 weights), one chunk of
// exactly 16 x 8 ggml blocks, its fields in this order (Blocks32Rows16
// holds the offsets):
//   d     f16 [8][16]           block j's scale for row r at 16 j + r
//                               (MXFP4: its e8m0 byte, u8 [8][16])
//   m     f16 [8][16]           Q4_1, Q5_1: the block's min
//   qh    u8  [8][16][4]        Q5_0, Q5_1: ggml's qh transposed so a byte
//                               serves a code byte's lane: byte i holds the
//                               5th bit of weight 4 g + i at bit g and of
//                               weight 16 + 4 g + i at bit 4 + g (g < 4)
//   codes [8][g][16][4]         block j, group g, row r: ggml's qs[4 g + i]
//         nibbles (g < 4): low nibble weight 4 g + i, high 16 + 4 g + i
//         Q8_0 (g < 8): weight 4 g + i (signed byte)
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant/ggml_blocks.h"

namespace kiln::ggml {

// Q4_K (Q5 = false) and Q5_K.
template <bool Q5>
struct KRows16 {
  static constexpr int64_t kRows = 16;
  static constexpr int64_t kD = 0, kDmin = 32, kScales = 64, kMins = 192, kHigh = 320;
  static constexpr int64_t kCodes = Q5 ? kHigh + 512 : kHigh;
  static constexpr int64_t kChunkBytes = kCodes + 2048;
  // Where Q5_K's hi low bits (hl) of group g for row r are.
  static constexpr int64_t high_at(int64_t g, int64_t r) { return kHigh + (g * kRows + r) * 4; }
  // Where byte i of code group g of pair p is for row r, from the codes'
  // start (int4w's 16-row layout shares this order).
  static constexpr int64_t code_at(int64_t p, int64_t g, int64_t r, int64_t i) {
    return ((p * 8 + g) * kRows + r) * 4 + i;
  }
  // Where sub-block j's min for row r is.
  static constexpr int64_t min_at(int64_t j, int64_t r) {
    return kMins + 64 * (j / 4) + 4 * r + j % 4;
  }
  // Bytes of an [m, k] matrix in this layout.
  static int64_t bytes(int64_t m, int64_t k) { return m / kRows * (k / 256) * kChunkBytes; }
};
using Q4KRows16 = KRows16<false>;
using Q5KRows16 = KRows16<true>;

struct IQ4XSRows16 {
  static constexpr int64_t kRows = 16;
  static constexpr int64_t kD = 0, kScales = 32, kCodes = 160, kChunkBytes = 2208;
  static constexpr int64_t code_at(int64_t s, int64_t g, int64_t r) {
    return kCodes + ((s * 4 + g) * kRows + r) * 4;
  }
  static constexpr int64_t scale_at(int64_t s, int64_t r) {
    return kScales + 64 * (s / 4) + 4 * r + s % 4;
  }
  static int64_t bytes(int64_t m, int64_t k) { return m / kRows * (k / 256) * kChunkBytes; }
};

// Where the byte of 16-weight group s (0-15) of row r is among the 256
// group bytes of a Q2_K, Q3_K or Q6_K chunk: 4 groups per i32 lane.
constexpr int64_t group16_at(int64_t s, int64_t r) { return 64 * (s / 4) + 4 * r + s % 4; }

struct Q6KRows16 {
  static constexpr int64_t kRows = 16;
  static constexpr int64_t kD = 0, kScales = 32, kCodes = 288, kGroupBytes = 192;
  static constexpr int64_t kChunkBytes = 3360;
  // Where group s's biased scale for row r is.
  static constexpr int64_t scale_at(int64_t s, int64_t r) { return kScales + group16_at(s, r); }
  static int64_t bytes(int64_t m, int64_t k) { return m / kRows * (k / 256) * kChunkBytes; }
};

struct Q3KRows16 {
  static constexpr int64_t kRows = 16;
  static constexpr int64_t kD = 0, kScales = 32, kCodes = 288, kPairBytes = 192;
  static constexpr int64_t kChunkBytes = 1824;
  static constexpr int64_t scale_at(int64_t s, int64_t r) { return kScales + group16_at(s, r); }
  // Where byte 0 of piece `part` (0, 1: the x bytes of group 2 p + part;
  // 2: the pair's y) of half h's group pair p is for row r.
  static constexpr int64_t code_at(int64_t h, int64_t p, int64_t part, int64_t r) {
    return kCodes + (h * 4 + p) * kPairBytes + part * 64 + r * 4;
  }
  static int64_t bytes(int64_t m, int64_t k) { return m / kRows * (k / 256) * kChunkBytes; }
};

// Q2_K: 2-bit codes in ggml's order, [half][group][row][4].
struct Q2KRows16 {
  static constexpr int64_t kRows = 16;
  static constexpr int64_t kD = 0, kDmin = 32, kScales = 64, kCodes = 320;
  static constexpr int64_t kChunkBytes = 1344;
  static constexpr int64_t scale_at(int64_t s, int64_t r) { return kScales + group16_at(s, r); }
  static constexpr int64_t code_at(int64_t h, int64_t g, int64_t r) {
    return kCodes + ((h * 8 + g) * kRows + r) * 4;
  }
  static int64_t bytes(int64_t m, int64_t k) { return m / kRows * (k / 256) * kChunkBytes; }
};

// The offsets of a 32-weight-block format's fields in its chunk (-1: absent).
struct Blocks32Rows16 {
  static constexpr int64_t kRows = 16;
  int64_t scale_bytes = 2;  // f16, or MXFP4's e8m0 byte
  int64_t d = 0, min = -1, high = -1, codes = 0;
  int64_t code_bytes = 16;  // per block: 16 nibble bytes or Q8_0's 32
  int64_t chunk_bytes = 0;
  static Blocks32Rows16 of(TensorType t);
  // Where byte 0 of group g of block j is for row r.
  int64_t code_at(int64_t j, int64_t g, int64_t r) const {
    return codes + ((j * (code_bytes / 4) + g) * kRows + r) * 4;
  }
  int64_t bytes(int64_t m, int64_t k) const { return m / kRows * (k / 256) * chunk_bytes; }
};
// Whether t is one of the 32-weight-block formats above.
bool is_blocks32(TensorType t);

// Whether Kiln has a 16-row layout for type t (the 32-weight blocks, Q2_K-Q6_K, IQ4_XS).
bool has_rows16(TensorType t);
// Bytes of an [m, k] matrix of type t in its 16-row layout.
int64_t rows16_bytes(TensorType t, int64_t m, int64_t k);
// Repacks m rows of k weights in ggml blocks of type t (row-major, as in
// GGUF) into `out` (rows16_bytes). Throws kiln::Error naming the type for
// types without a layout, and unless m is a multiple of 16 and k of 256.
void interleave_rows16(TensorType t, const uint8_t* blocks, int64_t m, int64_t k, uint8_t* out);
std::vector<uint8_t> interleave_rows16(TensorType t, const uint8_t* blocks, int64_t m, int64_t k);
// The weights [m, k] of the interleaved form, as f32 (the reference of the
// kernel's tests). The K and IQ4_XS layouts are decoded here, independently
// of ggml's dequantiser; the 32-weight blocks are rebuilt into ggml's bytes
// and go through it, so a field the interleave misplaces still shows.
std::vector<float> dequantize_rows16(TensorType t, const uint8_t* rows16, int64_t m, int64_t k);

}  // namespace kiln::ggml
