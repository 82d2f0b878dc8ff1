// libFuzzer entry point for the safetensors reader: any input must either
// open, with every tensor's bytes readable, or raise kiln::Error. Anything
// else (another exception, a crash, a sanitizer report) is a bug. Seed it
// with real files: safetensors_fuzzer corpus/ some-model/
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ir/error.h"
#include "models/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    kiln::SafetensorsFile f = kiln::SafetensorsFile::open_memory(bytes, "fuzz.safetensors");
    volatile uint64_t sum = 0;
    for (const kiln::SafeTensor& t : f.tensors())
      for (uint64_t i = 0; i < t.nbytes; ++i) sum = sum + t.data[i];
  } catch (const kiln::Error&) {
  }
  return 0;
}
