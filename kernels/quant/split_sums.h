// The split block sums quantize_q8 writes beside its i32 sums (buffer s8),
// and the byte dots of qgemv_rows16 read (xs8).
//
// A block sum s of 8-bit codes is stored as two bytes, s & 63 in [0, 63]
// and s >> 6 (signed), so s = low + 64 high: 4 consecutive bytes of either
// kind are then one broadcast operand of a u8 x i8 dot against 4 small
// unsigned per-row coefficients. Per group of 8 consecutive 32-blocks
// (256 codes, one Q8_K block), 96 bytes, the sums at two granularities,
// the group's total, and the sums of 32 again as dot starts:
// - bytes 0-15: the 8 sums of 32 codes (|s| <= 32 * 127, high in
//   [-64, 63]): their 8 low bytes, then their 8 high bytes. Q4_K weighs
//   them by its 6-bit mins;
// - bytes 16-47: the 16 sums of 16 codes (high in [-32, 31]): their 16 low
//   bytes, then their 16 high bytes. Q6_K weighs them by its 8-bit group
//   scales (stored + 128, so unsigned);
// - bytes 48-51: the sum of all 256 codes, an i32 (little-endian), written
//   with Q8_K blocks (QBLOCK=256) only, the activations of every format
//   that reads it. The formats whose codes carry an offset (Q2_K, Q3_K,
//   Q6_K) subtract it times the offset once per super-block and
//   token: one broadcast load, where adding the 8 sums of 32 is 7 vector
//   instructions in a prompt GEMM's busiest ports;
// - bytes 52-63: unused;
// - bytes 64-95: the 8 sums of 32 times -128, i32 each. A byte dot of
//   codes stored + 128 (IQ4_XS's, IQ4_NL's and MXFP4's table entries, Q8_0's
//   bytes, Q4_0's codes less its offset) that starts from it is the signed
//   codes' dot: its accumulator is loaded instead of zeroed, where
//   subtracting the offset afterwards costs vector instructions per token.
//   Shifted down 3 bits it is -16 times the sum, Q5_0's start for its
//   unsigned 5-bit codes.
// One definition here keeps the kernel, its callers and the tests in step.
#pragma once

#include <cstdint>

namespace kiln {

inline constexpr int64_t kSplitSumGroupBytes = 96;

// Bytes of the split sums of `blocks` 32-blocks (whole groups of 8).
inline int64_t split_sum_bytes(int64_t blocks) { return kSplitSumGroupBytes * ((blocks + 7) / 8); }

// Where 32-block b's low byte sits; its high byte is 8 further.
inline int64_t split_sum_low_at(int64_t b) { return kSplitSumGroupBytes * (b / 8) + b % 8; }

// Where group g's i32 sum of 256 codes starts.
inline int64_t split_sum256_at(int64_t g) { return kSplitSumGroupBytes * g + 48; }

// Where 32-block b's i32 sum times -128 starts.
inline int64_t split_sum_neg128_at(int64_t b) {
  return kSplitSumGroupBytes * (b / 8) + 64 + 4 * (b % 8);
}

// Where 16-code group g's low byte sits (g = element / 16); its high byte
// is 16 further.
inline int64_t split_sum16_low_at(int64_t g) {
  return kSplitSumGroupBytes * (g / 16) + 16 + g % 16;
}

}  // namespace kiln
