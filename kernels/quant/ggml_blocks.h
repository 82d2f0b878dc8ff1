// The ggml block formats Kiln reads and writes, as plain host code: block
// geometry, reference quantisers and dequantisers.
//
// These are the definitions the DSL kernels of kernels/qgemv are tested
// against, and what `kiln gen-model` uses to write quantized GGUF files, so
// they must match ggml bit for bit (see ../shared/design/FORMATS.md). Q8_0
// and Q4_0 quantise with ggml's reference rounding (roundf, and
// min(15, (int8)(x/d + 8.5)) with d = max/-8); Q4_K and Q6_K dequantise with
// the 6-bit packed sub-block scales of the K formats.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/quant/tensor_type.h"

namespace kiln::ggml {

// Layouts of the 32-weight formats (little-endian; weight j < 16 in the low
// nibble of qs[j], weight j >= 16 in the high nibble of qs[j - 16]):
//   Q4_0 18 B: f16 d @0, qs[16] @2;                 w = (q - 8) d
//   Q4_1 20 B: f16 d @0, f16 m @2, qs[16] @4;       w = q d + m
//   Q5_0 22 B: f16 d @0, u32 qh @2, qs[16] @6;      w = (q - 16) d
//   Q5_1 24 B: f16 d @0, f16 m @2, u32 qh @4, qs[16] @8; w = q d + m
//   Q8_0 34 B: f16 d @0, i8 qs[32] @2;              w = q d
// where Q5's 5th bit of weight j is bit j of qh.
// The K formats hold 256 weights in sub-blocks of 32 (Q4_K, Q5_K) or 16
// (Q2_K, Q3_K, Q6_K); Q4_K and Q6_K are in FORMATS.md. Weight e of a 2- or
// 3-bit super-block sits in half h = e / 128 at quarter j = (e % 128) / 32,
// lane l = e % 32: bits 2j..2j+1 of qs[32 h + l], and its 16-weight group is
// g = e / 16.
//   Q2_K  84 B: u8 scales[16] @0 (low nibble sc, high nibble m), qs[64] @16,
//               f16 d @80, f16 dmin @82;          w = d sc_g q - dmin m_g
//   Q3_K 110 B: hmask[32] @0, qs[64] @32, scales[12] @96, f16 d @108;
//               w = d (s_g - 32) (q - 4 + 4 hbit), hbit = bit e / 32 of
//               hmask[l]; 6-bit s_g: low nibble of byte g (g < 8) or high
//               nibble of byte g - 8, bits 4-5 from byte 8 + g % 4 at bit
//               2 (g / 4)
//   Q5_K 176 B: f16 d @0, f16 dmin @2, scales[12] @4 (Q4_K's), qh[32] @16,
//               qs[128] @48; sub-block s = e / 32 takes the low (s even)
//               or high nibble of qs[32 (s / 2) + l] and bit s of qh[l] as
//               its 5th bit;                      w = d sc_s q - dmin m_s
// The codebook formats map a 4-bit code q (nibbles as Q4_0's: weight j of
// a 32-weight sub-block in the low nibble of qs[j], j + 16 in the high) to
// a signed byte of a 16-entry table:
//   IQ4_NL  18 B: f16 d @0, qs[16] @2;            w = d kIq4nlValues[q]
//   IQ4_XS 136 B: f16 d @0, u16 scales_h @2, u8 scales_l[4] @4, qs[128] @8;
//                 sub-block s (32 weights, codes at qs[16 s]) has the 6-bit
//                 scale ls = nibble s % 2 of scales_l[s / 2] | bits 2s..2s+1
//                 of scales_h << 4;             w = d (ls - 32) kIq4nlValues[q]
//   MXFP4   17 B: u8 e @0 (e8m0), qs[16] @1;      w = 2^(e - 128) kMxfp4Values[q]
//                 (the table holds twice the e2m1 values: 0, 0.5, 1, 1.5, 2,
//                 3, 4, 6 and their negatives)
// The lattice formats hold 256 weights as 8 sub-blocks s of 32 with f16 d
// @0. Each 8 (IQ2) or 4 (IQ3) weights are the byte magnitudes of one point
// of the format's grid (iq_grids.h); weight j of an 8-weight group l is
// negated where bit j of the group's sign byte is set. sign7 is a 7-bit
// index completed by parity (lattice_signs); ls a 4-bit scale:
//   IQ2_XXS  66 B: 8 bytes @2 + 8s: 4 point indices, then a u32 a holding
//                  group l's sign7 at bits 7l and ls = a >> 28;
//                  w = d (0.5 + ls) / 4 mag
//   IQ2_XS   74 B: u16 q[32] @2 (group 4s + l: point q & 511, sign7
//                  q >> 9), scales[8] @66 (ls of weights 0-15 of sub-block s
//                  in the low nibble of scales[s], 16-31 high); as IQ2_XXS
//   IQ2_S    82 B: point bytes[32] @2, sign bytes[32] @34, qh[8] @66 (bits
//                  2l..2l+1 of qh[s]: bits 8-9 of group 4s + l's point),
//                  scales[8] @74 as IQ2_XS;  w = d (0.5 + ls) / 4 mag
//   IQ3_XXS  98 B: point bytes[64] @2 (8 per sub-block), u32 a[8] @66 as
//                  IQ2_XXS's;                 w = d (0.5 + ls) / 2 mag
//   IQ3_S   110 B: point bytes[64] @2, qh[8] @66 (bit k of qh[s]: bit 8 of
//                  point 8s + k), sign bytes[32] @74, scales[4] @106 (ls of
//                  sub-block s: nibble s % 2 of scales[s / 2], low first);
//                  w = d (1 + 2 ls) mag
// The codebooks: IQ4_NL / IQ4_XS, and MXFP4's doubled e2m1 values.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};
// The codebook of IQ4_NL/IQ4_XS (or MXFP4) + 128, as a lookup table of
// unsigned codes: the kernels' byte dots take unsigned weights.
std::vector<int64_t> unsigned_codebook(TensorType t);
// MXFP4's scale for e8m0 byte e, halved as the doubled table wants: 2^(e - 128).
float e8m0_half(uint8_t e);

// The 6-bit scale and min of sub-block j (0-7) of a Q4_K block, from its 12
// packed scale bytes (FORMATS.md).
void q4k_scale_min(const uint8_t* scales12, int j, int* sc, int* m);
// The signed scale (-32..31) of 16-weight group g (0-15) of a Q3_K block,
// from its 12 packed scale bytes.
int q3k_scale(const uint8_t* scales12, int g);

// n must be a multiple of the block size (32); out holds n/32 blocks.
void quantize_q8_0(const float* x, int64_t n, uint8_t* out);
void quantize_q4_0(const float* x, int64_t n, uint8_t* out);
// ggml's references: Q4_1 and Q5_1 fit d = (max - min) / 15 (/ 31) with the
// min stored, codes rounded by (int8)(v + 0.5) (Q4_1 clamped to 15); Q5_0
// is Q4_0's search with 5 bits (d = max / -16, codes (int8)(x/d + 16.5)
// clamped to 31), the 5th bits packed into a little-endian u32.
void quantize_q4_1(const float* x, int64_t n, uint8_t* out);
void quantize_q5_0(const float* x, int64_t n, uint8_t* out);
void quantize_q5_1(const float* x, int64_t n, uint8_t* out);
// n a multiple of 256. ggml's reference search: per 32-weight sub-block a
// weighted least-squares fit of scale and min over 21 candidate grids, then
// the 6-bit quantisation of those scales and mins against the block's d and
// dmin, then the final nibbles against the quantised scales.
void quantize_q4_k(const float* x, int64_t n, uint8_t* out);
// n a multiple of 256. ggml's reference: per 16-weight group a symmetric
// 6-bit fit (weights x^2, 19 candidate grids), the group scales quantised
// to signed 8 bits against the block's d, then the final 6-bit values.
void quantize_q6_k(const float* x, int64_t n, uint8_t* out);

// ggml's references for the other K formats, bit for bit:
// - Q5_K: Q4_K's search with 5-bit codes (31 levels, grids from -0.5 in 16
//   steps), the 5th bits packed into qh.
// - Q3_K: per 16-weight group a symmetric 3-bit fit refined by up to 5
//   passes of single-code moves (weights x^2), the group scales as 6-bit
//   values against d = max / -32.
// - Q2_K: per 16-weight group a scale and min fit on 2-bit codes weighted
//   by |x| with absolute error, both quantised to 4 bits.
void quantize_q5_k(const float* x, int64_t n, uint8_t* out);
void quantize_q3_k(const float* x, int64_t n, uint8_t* out);
void quantize_q2_k(const float* x, int64_t n, uint8_t* out);

// The codebook formats, as llama-quantize writes them without an importance
// matrix (ggml's quantize_iq4_nl / quantize_iq4_xs / quantize_row_mxfp4_ref):
// - IQ4_NL and IQ4_XS: per 32 weights the scale through the largest |x|
//   onto the table's -127, refined over 15 stretched grids by the
//   x^2-weighted fit; IQ4_XS then quantises the 8 scales to 6 bits against
//   d = max scale / -32 and re-picks every code.
// - MXFP4: e = floor(log2(max |x|)) - 2 + 127, each code the table entry
//   nearest x (the first on ties).
void quantize_iq4_nl(const float* x, int64_t n, uint8_t* out);
void quantize_iq4_xs(const float* x, int64_t n, uint8_t* out);
void quantize_mxfp4(const float* x, int64_t n, uint8_t* out);

// Any of the quantisers above by type; n a multiple of the type's block size.
// Throws for the lattice formats: Kiln has no quantiser for them (ggml's
// needs an importance matrix; llama-quantize writes such files).
void quantize(TensorType t, const float* x, int64_t n, uint8_t* out);
// Whether quantize() handles t.
bool has_quantizer(TensorType t);

// n must be a multiple of the type's block size.
void dequantize(TensorType t, const uint8_t* blocks, int64_t n, float* out);

}  // namespace kiln::ggml
