// Scalar fp8 conversion helpers that lowered CPU code calls by name.
//
// fp8 has no LLVM type and no x86 instructions; calling the same C++
// conversions the interpreter uses keeps the JIT bit-exact with it. fp8
// tiles are rare outside storage, so a call per element is acceptable.
#pragma once

#include <cstdint>

extern "C" {
float kiln_f8e4m3_to_f32(uint8_t b);
uint8_t kiln_f32_to_f8e4m3(float x);
float kiln_f8e5m2_to_f32(uint8_t b);
uint8_t kiln_f32_to_f8e5m2(float x);
}

namespace kiln {

struct HostSymbol {
  const char* name;
  void* address;
};

// The helpers above, for registration with a JIT's symbol table.
const HostSymbol* fp8_host_symbols(int* count);

}  // namespace kiln
