#include "codegen/cpu/fp8_helpers.h"

#include "ir/dtype.h"

extern "C" {
float kiln_f8e4m3_to_f32(uint8_t b) { return kiln::f8e4m3_bits_to_f32(b); }
uint8_t kiln_f32_to_f8e4m3(float x) { return kiln::f32_to_f8e4m3_bits(x); }
float kiln_f8e5m2_to_f32(uint8_t b) { return kiln::f8e5m2_bits_to_f32(b); }
uint8_t kiln_f32_to_f8e5m2(float x) { return kiln::f32_to_f8e5m2_bits(x); }
}

namespace kiln {

const HostSymbol* fp8_host_symbols(int* count) {
  static const HostSymbol kSymbols[] = {
      {"kiln_f8e4m3_to_f32", reinterpret_cast<void*>(&kiln_f8e4m3_to_f32)},
      {"kiln_f32_to_f8e4m3", reinterpret_cast<void*>(&kiln_f32_to_f8e4m3)},
      {"kiln_f8e5m2_to_f32", reinterpret_cast<void*>(&kiln_f8e5m2_to_f32)},
      {"kiln_f32_to_f8e5m2", reinterpret_cast<void*>(&kiln_f32_to_f8e5m2)},
  };
  *count = 4;
  return kSymbols;
}

}  // namespace kiln
