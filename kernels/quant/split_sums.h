// The split block sums quantize_q8 writes beside its i32 sums (buffer s8),
// and the byte dots of qgemv_rows16 read (xs8).
//
// Each 32-block's sum s of 8-bit codes (|s| <= 32 * 127) is stored as two
// bytes, s & 63 in [0, 63] and s >> 6 in [-64, 63], so s = low + 64 high.
// Per 8 consecutive blocks come their 8 low bytes, then their 8 high bytes:
// 4 consecutive bytes of either kind are one broadcast operand of a u8 x i8
// dot against 4 small per-row coefficients (Q4_K's 6-bit mins). One
// definition here keeps the kernel, its callers and the tests in step.
#pragma once

#include <cstdint>

namespace kiln {

// Bytes of the split sums of `blocks` 32-blocks (whole groups of 8).
inline int64_t split_sum_bytes(int64_t blocks) { return 16 * ((blocks + 7) / 8); }

// Where block b's low byte sits; its high byte is 8 further.
inline int64_t split_sum_low_at(int64_t b) { return 16 * (b / 8) + b % 8; }

}  // namespace kiln
