#include "codegen/cpu/fp8_helpers.h"

#include "ir/dtype.h"

extern "C" {
uint8_t kiln_f32_to_f8e4m3(float x) { return kiln::f32_to_f8e4m3_bits(x); }
uint8_t kiln_f32_to_f8e5m2(float x) { return kiln::f32_to_f8e5m2_bits(x); }
}

namespace kiln {

const HostSymbol* fp8_host_symbols(int* count) {
  static const HostSymbol kSymbols[] = {
      {"kiln_f32_to_f8e4m3", reinterpret_cast<void*>(&kiln_f32_to_f8e4m3)},
      {"kiln_f32_to_f8e5m2", reinterpret_cast<void*>(&kiln_f32_to_f8e5m2)},
  };
  *count = 2;
  return kSymbols;
}

}  // namespace kiln
