// libFuzzer entry point for the Jinja chat template interpreter
// (models/jinja): any input, taken as a template's text, must either fail
// to parse with kiln::Error or parse and then render a small conversation
// to text or to kiln::Error (JinjaRaised included), within the render's
// limits on output and steps. Anything else (another exception, a crash, a
// hang, a sanitizer report) is a bug. Seed it with real templates:
//   jinja_fuzzer corpus/ ../tests/data/chat_templates/
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "ir/error.h"
#include "models/jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Hi \u00e9 \u6771"},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "abc123XYZ",
                   "type": "function", "function": {"name": "f", "arguments": {"x": 1.5}}}]},
                 {"role": "tool", "tool_call_id": "abc123XYZ", "content": "ok"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  try {
    kiln::JinjaTemplate t(std::string(reinterpret_cast<const char*>(data), size));
    kiln::JinjaRenderOptions o;
    o.now = std::tm{};
    o.max_output = 1 << 20;
    volatile size_t n = t.render(context, o).size();
    (void)n;
  } catch (const kiln::Error&) {
  }
  return 0;
}
