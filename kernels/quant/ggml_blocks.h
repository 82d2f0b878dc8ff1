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
#include <string_view>

namespace kiln::ggml {

// Layouts of the 32-weight formats (little-endian; weight j < 16 in the low
// nibble of qs[j], weight j >= 16 in the high nibble of qs[j - 16]):
//   Q4_0 18 B: f16 d @0, qs[16] @2;                 w = (q - 8) d
//   Q4_1 20 B: f16 d @0, f16 m @2, qs[16] @4;       w = q d + m
//   Q5_0 22 B: f16 d @0, u32 qh @2, qs[16] @6;      w = (q - 16) d
//   Q5_1 24 B: f16 d @0, f16 m @2, u32 qh @4, qs[16] @8; w = q d + m
//   Q8_0 34 B: f16 d @0, i8 qs[32] @2;              w = q d
// where Q5's 5th bit of weight j is bit j of qh. The K formats: FORMATS.md.
// ggml's type ids, as stored in GGUF tensor infos.
enum class QuantType : int {
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q6_K = 14
};

struct BlockFormat {
  QuantType type;
  std::string_view name;  // "q8_0"
  int block_elems;        // weights per block
  int block_bytes;
};

const BlockFormat& block_format(QuantType t);
// Throws kiln::Error naming the type id when Kiln does not know it.
const BlockFormat& block_format(int ggml_type_id);

// The 6-bit scale and min of sub-block j (0-7) of a Q4_K block, from its 12
// packed scale bytes (FORMATS.md).
void q4k_scale_min(const uint8_t* scales12, int j, int* sc, int* m);

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

// Any of the quantisers above by type; n a multiple of the type's block size.
void quantize(QuantType t, const float* x, int64_t n, uint8_t* out);

// n must be a multiple of the type's block size.
void dequantize(QuantType t, const uint8_t* blocks, int64_t n, float* out);

}  // namespace kiln::ggml
