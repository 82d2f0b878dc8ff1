// The DSL side of AURA's codes (aura_format.h): how a kernel turns rotated
// coordinates into b-bit codes and packed words, and packed words back
// into codebook values. Written once here so that the encoder, the
// attention walk and the tests' kernels cannot disagree on the bitstream
// (AURA.md section 4, pitfalls 5 and 6).
#pragma once

#include <cstdint>

#include "ir/builder.h"

namespace kiln {

// Codes (i32, same shape) of f32 rotated unit-vector coordinates y at
// dimension D: #{j >= 1 : y > t_j}, by binary search over the thresholds.
Value aura_quantize(const Value& y, int bits, int64_t D);
// The codebook value (f32, same shape) of each i32 code.
Value aura_centroids(const Value& codes, int bits, int64_t D);
// i32 codes [.., D] -> u32 words [.., packed_words(D, bits)], LSB-first
// (D a multiple of 32).
Value aura_pack(const Value& codes, int bits);
// u32 words [.., packed_words(D, bits)] -> i32 codes [.., D].
Value aura_unpack(const Value& words, int bits, int64_t D);
// The same codes in "lane order" for widths dividing 32 (2, 4, 8 bits):
// [.., D] with position k * W + w holding coordinate w * (32 / bits) + k,
// i.e. the k-th code of every word side by side. Each position's code is
// then a shift by a constant of its word, no shuffle (what a row decoded
// for an accumulation that restores the order once, at its end, wants).
// 3-bit codes straddle words, so their lane order is the natural one.
Value aura_unpack_lanes(const Value& words, int bits, int64_t D);
// Lane order -> natural order, [.., D] of any dtype.
Value aura_lanes_to_natural(const Value& x, int bits);

// Coordinates c .. c + m - 1 (of 0..31) of a group of 32 coordinates, for
// many rows at once: `group` holds the group's `bits` words transposed, u32
// [bits, n] (word j of every row in row j), and the result is the n rows'
// codes, i32 [m, n]. Every row shares a coordinate's word and shift, so
// these are shifts by constants: a cache read key-major decodes keys in the
// lanes this way. With m > 1 the coordinates must share one word (bits
// dividing 32). 8-bit codes a whole word at a time (m = 4) come as the
// word's bytes, u8 [4, n], which a 256-entry lookup reads as they are.
Value aura_group_codes(const Value& group, int bits, int64_t c, int64_t m = 1);

}  // namespace kiln
