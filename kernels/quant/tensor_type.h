// The one description of every element format a Kiln tensor is stored in:
// plain floats, ggml's block formats and Kiln's own in-memory forms (int4
// weight-only codes, per-row int8, FP8 with block scales).
//
// A format is an id (ggml's, as GGUF tensor infos store it; Kiln's own far
// above ggml's), a name, its block geometry and, for block formats, the byte
// offsets of each block's fields (FORMATS.md). The GGUF reader and writer,
// the loader, the kernel policies, the DSL decoders (kernels/qgemv/
// block_decoder.h, kernels/rows/get_rows.cpp), the 16-row interleave and the
// host quantisers (ggml_blocks.h) all read this table, so a format is added
// in one place and "supported" means the same everywhere.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

// Ids as in ggml.h; only the types Kiln reads are named.
enum class TensorType : uint32_t {
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
  // that ggml has no type for are held (models/hf_checkpoint.h), and the
  // formats the loader gives matrices (runtime/ops.h's Weight).
  f8_e4m3 = 1024,     // FP8 E4M3FN with block scales in a companion tensor
  i4 = 1025,          // int4 weight-only codes, 2 a byte (kernels/quant/int4w.h)
  u8 = 1026,          // bytes: the int4 codes' zero points
  i8_channel = 1027,  // int8 weights with a scale per row in a companion tensor
};

enum class TensorKind {
  plain,     // one float per element (F32, F16, BF16)
  blocks,    // a ggml block format: Kiln's matmuls quantise the activations
             // and multiply the blocks as stored
  kiln_own,  // in memory only, never in a GGUF file
};

struct TensorTypeInfo {
  TensorType type;
  const char* name;     // as ggml spells it: "Q4_K"; Kiln's own: "I4"
  int64_t block_elems;  // elements per block (1 for plain floats)
  int64_t block_bytes;  // bytes per block
  TensorKind kind;
};

// Every type Kiln supports, in kind order (plain, blocks, Kiln's own) and
// id order within a kind.
std::span<const TensorTypeInfo> tensor_types();
// The ggml block formats alone, in id order.
std::span<const TensorTypeInfo> block_types();

// Null when Kiln does not support the id.
const TensorTypeInfo* find_tensor_type(uint32_t id);
const TensorTypeInfo& tensor_type_info(TensorType t);
// By name, in any case ("q4_k", "Q4_K"); null for a name Kiln does not know.
const TensorTypeInfo* find_tensor_type_named(std::string_view name);
// A kernel's FMT parameter: throws a kiln::Error naming the id and the block
// formats Kiln supports unless id is one of them.
const TensorTypeInfo& block_type_info(int64_t id);
// "Q4_K"; for ids ggml knows but Kiln does not read, ggml's name ("Q8_1");
// otherwise "type 99".
std::string tensor_type_name(uint32_t id);
inline std::string tensor_type_name(TensorType t) {
  return tensor_type_name(static_cast<uint32_t>(t));
}
// "F32, F16, BF16, Q4_0, ...": every type a GGUF file may hold, for errors.
std::string supported_tensor_type_names();

bool is_block_quantized(TensorType t);
// The id as kernels take it (their FMT parameter).
inline int64_t type_id(TensorType t) { return static_cast<int64_t>(t); }

// Where each field of a block sits: byte offsets from the block's start,
// little-endian (FORMATS.md and ggml_blocks.h give the bit layouts).
namespace fields {
struct Q4_0 {
  static constexpr int64_t d = 0, qs = 2;
};
struct Q4_1 {
  static constexpr int64_t d = 0, m = 2, qs = 4;
};
struct Q5_0 {
  static constexpr int64_t d = 0, qh = 2, qs = 6;
};
struct Q5_1 {
  static constexpr int64_t d = 0, m = 2, qh = 4, qs = 8;
};
struct Q8_0 {
  static constexpr int64_t d = 0, qs = 2;
};
struct Q2_K {
  static constexpr int64_t scales = 0, qs = 16, d = 80, dmin = 82;
};
struct Q3_K {
  static constexpr int64_t hmask = 0, qs = 32, scales = 96, d = 108;
};
struct Q4_K {
  static constexpr int64_t d = 0, dmin = 2, scales = 4, qs = 16;
};
struct Q5_K {
  static constexpr int64_t d = 0, dmin = 2, scales = 4, qh = 16, qs = 48;
};
struct Q6_K {
  static constexpr int64_t ql = 0, qh = 128, scales = 192, d = 208;
};
struct IQ4_NL {
  static constexpr int64_t d = 0, qs = 2;
};
struct IQ4_XS {
  static constexpr int64_t d = 0, scales_h = 2, scales_l = 4, qs = 8;
};
struct MXFP4 {
  static constexpr int64_t e = 0, qs = 1;
};
// The lattice formats: f16 d, then per 32-weight sub-block its points.
struct IQ2_XXS {
  static constexpr int64_t d = 0, qs = 2;
};
struct IQ2_XS {
  static constexpr int64_t d = 0, qs = 2, scales = 66;
};
struct IQ2_S {
  static constexpr int64_t d = 0, qs = 2, signs = 34, qh = 66, scales = 74;
};
struct IQ3_XXS {
  static constexpr int64_t d = 0, qs = 2, aux = 66;
};
struct IQ3_S {
  static constexpr int64_t d = 0, qs = 2, qh = 66, signs = 74, scales = 106;
};
}  // namespace fields

}  // namespace kiln
