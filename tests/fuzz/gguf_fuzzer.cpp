// libFuzzer entry point for the GGUF reader, the model config and the
// tokenizers built from its metadata: any input must either open (and then
// every pointer the reader hands out must be readable, the config either
// read or refused, a pruned file's expert map included, and a tokenizer, if
// the file has one, must encode and decode) or raise kiln::Error. Anything else (another
// exception, a crash, a sanitizer report) is a bug. Seed it with real files:
//   gguf_fuzzer corpus/ ../shared/data/vocab/
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "ir/error.h"
#include "models/gguf.h"
#include "models/model_config.h"
#include "models/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    kiln::GgufFile f = kiln::GgufFile::open_memory(bytes, "fuzz.gguf");
    volatile uint64_t sum = 0;
    for (const kiln::GgufTensor& t : f.tensors())
      for (uint64_t i = 0; i < t.nbytes; ++i) sum = sum + t.data[i];
    for (const auto& [key, v] : f.metadata())
      for (std::string_view s : v.strings) sum = sum + s.size();
    if (f.has("general.architecture")) {
      try {
        sum = sum + static_cast<uint64_t>(kiln::ModelConfig::from_gguf(f).n_expert);
      } catch (const kiln::Error&) {
      }
    }
    if (f.has("tokenizer.ggml.model")) {
      std::unique_ptr<kiln::Tokenizer> tok = kiln::Tokenizer::from_gguf(f);
      sum = sum + tok->decode(tok->encode("Hello, world! 123 \xe4\xb8\x96\xff", false)).size();
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
