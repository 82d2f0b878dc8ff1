// libFuzzer entry point for the grammar front ends and the matcher: an
// input whose first byte is '{' is read as a JSON schema, any other as GBNF
// text. Either it compiles against a small vocabulary (and a walk over the
// allowed tokens then runs, every mask checked against the tokens' bytes
// stepped through the parse) or it raises kiln::Error. Anything else (another
// exception, a crash, a hang, a sanitizer report) is a bug. Seed it with
// grammars: llama.cpp's grammars/*.gbnf and JSON schemas.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/error.h"
#include "models/grammar/gbnf.h"
#include "models/grammar/json_schema.h"
#include "models/grammar/matcher.h"

namespace {

std::shared_ptr<const kiln::TokenVocabulary> vocab() {
  static const std::shared_ptr<const kiln::TokenVocabulary> v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    for (const char* p :
         {"\"", "\":", "\",", "{\"", "  ", "\n", "ab", "\xC3\xA9", "\xE4\xB8", "\x96\""})
      pieces.push_back(p);
    pieces.push_back("");
    pieces.push_back("<eos>");
    return std::make_shared<const kiln::TokenVocabulary>(
        pieces, std::vector<int32_t>{static_cast<int32_t>(pieces.size()) - 1});
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::string gbnf = text;
    if (!text.empty() && text[0] == '{') {
      nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
      if (schema.is_discarded()) return 0;
      gbnf = kiln::json_schema_to_gbnf(schema);
    }
    auto g = kiln::CompiledGrammar::compile(kiln::parse_gbnf(gbnf), vocab());
    kiln::GrammarMatcher m(g);
    std::vector<uint32_t> mask;
    for (size_t step = 0; step < 8; ++step) {
      m.fill_mask(&mask);
      int32_t pick = -1;
      for (int32_t t = 0; t < g->vocab().size(); ++t) {
        kiln::GrammarMatcher probe = m.fork();
        const bool in_mask = (mask[static_cast<size_t>(t) >> 5] >> (t & 31)) & 1;
        if (probe.accept(t) != in_mask) std::abort();
        if (in_mask && (pick < 0 || (t * 7919 + step) % 5 == 0)) pick = t;
      }
      if (pick < 0 || !m.accept(pick)) break;
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
