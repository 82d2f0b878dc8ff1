// Scalar fp8 rounding helpers that lowered CPU code calls by name.
//
// fp8 has no LLVM type and no x86 instructions. Widening is a few integer
// lanes (lowering.h's from_storage); rounding to fp8 (saturation, ties to
// even, subnormals) calls the same C++ the interpreter uses, which keeps
// the JIT bit-exact with it. Only stores of fp8 results round, which are
// rare outside tests, so a call per element is acceptable.
#pragma once

#include <cstdint>

extern "C" {
uint8_t kiln_f32_to_f8e4m3(float x);
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
