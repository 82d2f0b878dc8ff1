// ggml tensor element types: ids, names and block geometry.
//
// GGUF stores each tensor as rows of fixed-size blocks (a Q4_K block packs
// 256 weights into 144 bytes). The reader's byte sizes and bounds checks use
// this table, whose quantized entries come from the quantisers' own
// (kernels/quant/ggml_blocks.h), so a type is "supported" exactly when both
// the reader and the kernels know it.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// Ids as in ggml.h; only the types Kiln reads are named.
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q2_K = 10,
  q3_K = 11,
  q4_K = 12,
  q5_K = 13,
  q6_K = 14,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  bf16 = 30,
  mxfp4 = 39,
  // Kiln's own, never in a GGUF file: how a Hugging Face folder's weights
  // that ggml has no type for are held in the GgufFile it translates to
  // (models/hf_checkpoint.h). Ids far above ggml's.
  f8_e4m3 = 1024,     // FP8 E4M3FN with block scales in a companion tensor
  i4 = 1025,          // int4 weight-only codes, 2 a byte (kernels/quant/int4w.h)
  u8 = 1026,          // bytes: the int4 codes' zero points
  i8_channel = 1027,  // int8 weights with a scale per row in a companion tensor
};

struct GgmlTypeInfo {
  const char* name;             // as ggml spells it: "Q4_K"
  int64_t block_elems;          // weights per block (1 for plain floats)
  int64_t block_bytes;          // bytes per block
  bool in_memory_only = false;  // a Kiln type no GGUF file may hold
};

// Null when Kiln does not support the id.
const GgmlTypeInfo* find_ggml_type(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType t);
// "Q4_K"; for ids ggml knows but Kiln does not read, ggml's name ("Q4_1");
// otherwise "type 99".
std::string ggml_type_name(uint32_t id);
inline std::string ggml_type_name(GgmlType t) { return ggml_type_name(static_cast<uint32_t>(t)); }

// "F32, F16, BF16, Q4_0, ...": every type Kiln reads, for error messages.
std::string supported_ggml_type_names();

// Whether t is a ggml block format (Kiln's matmuls quantise the activations
// and run qgemv on it), not a plain float type or one of Kiln's own.
bool is_block_quantized(GgmlType t);

// n values of type t as f32: plain floats converted, block formats
// dequantised as ggml does (n a whole number of blocks).
void ggml_to_f32(GgmlType t, const uint8_t* data, int64_t n, float* out);
// n f32 values stored as type t: F32, F16 and BF16 rounded to nearest even,
// block formats through Kiln's ports of ggml's reference quantisers.
void ggml_from_f32(GgmlType t, const float* x, int64_t n, uint8_t* out);

// Bytes of a row of n elements; -1 when n is not a whole number of blocks.
int64_t ggml_row_bytes(GgmlType t, int64_t n);

}  // namespace kiln
