// Element types of the IR and the exact conversions between them.
//
// Every layer (DSL, interpreter, LLVM and CUDA lowering, runtime buffers)
// talks about element types through this one enum, so the set of supported
// types and their spelling in the text form live in exactly one place. The
// narrow float formats (f16, bf16, fp8) are stored as raw bits; the
// conversion helpers here are the reference definition the code generators
// must reproduce bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  f32,
  f16,
  bf16,
  f8e4m3,  // OCP E4M3FN: no infinities, max 448, one NaN pattern per sign
  f8e5m2,  // OCP E5M2: IEEE-like, has infinities
  i8,
  u8,
  i16,
  u16,
  i32,
  u32,
  i64,
  boolean,
};

constexpr int kNumDTypes = 13;

std::string_view dtype_name(DType t);
// Throws kiln::Error naming the text and the accepted spellings.
DType parse_dtype(std::string_view name);
bool try_parse_dtype(std::string_view name, DType* out);

int dtype_bits(DType t);        // storage bits (bool: 8 in memory)
int dtype_bytes(DType t);       // storage bytes
bool is_float(DType t);         // f32 f16 bf16 f8*
bool is_int(DType t);           // i*/u* (not bool)
bool is_signed_int(DType t);    // i8 i16 i32 i64
bool is_narrow_float(DType t);  // f16 bf16 f8*: computed in f32, rounded back

// Round-to-nearest-even conversions. f32 -> fp8 saturates to the largest
// finite value (CUDA's __NV_SATFINITE); NaN stays NaN.
uint16_t f32_to_f16_bits(float x);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float x);
float bf16_bits_to_f32(uint16_t h);
uint8_t f32_to_f8e4m3_bits(float x);
float f8e4m3_bits_to_f32(uint8_t b);
uint8_t f32_to_f8e5m2_bits(float x);
float f8e5m2_bits_to_f32(uint8_t b);

// Rounds x to the nearest value representable in the narrow float `t` and
// returns it as f32 (identity for f32).
float round_to_float_dtype(float x, DType t);

}  // namespace kiln
