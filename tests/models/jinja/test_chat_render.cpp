// render_chat_template (models/chat_template.h), the entry `kiln serve` and
// `kiln tokenize --chat` call: the variables it gives a template are
// transformers' (tools and documents None when absent, special tokens,
// extra keys last and winning), and a released model's template renders a
// tool-calling conversation exactly as Python's jinja2 does (expected text
// from Python, see tests/models/chat_template_jinja.py for the full
// comparison).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "models/chat_template.h"
#include "models/read_file.h"

using json = nlohmann::ordered_json;

TEST_CASE("render_chat_template passes transformers' variables", "[models][jinja]") {
  const std::string tmpl =
      "{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ bos_token }}|"
      "{{ eos_token }}|{{ messages|length }}|{{ enable_thinking is defined }}";
  const json msgs = json::parse(R"([{"role": "user", "content": "hi"}])");
  CHECK(kiln::render_chat_template(tmpl, msgs, nullptr, true, "<s>", "</s>") ==
        "True|True|True|<s>|</s>|1|False");
  CHECK(kiln::render_chat_template(tmpl, msgs, json::array(), false, "", "",
                                   json{{"enable_thinking", false}, {"bos_token", "B"}}) ==
        "False|True|False|B||1|True");
  CHECK_THROWS_WITH(kiln::render_chat_template(tmpl, json::object(), nullptr, true, "", ""),
                    Catch::Contains("must be a JSON list"));
  CHECK_THROWS_WITH(kiln::render_chat_template(tmpl, msgs, json::object(), true, "", ""),
                    Catch::Contains("tools must be a JSON list or null"));
}

TEST_CASE("render_chat_template: Qwen3's template with tools and thinking off", "[models][jinja]") {
  const kiln::JinjaTemplate qwen3(kiln::read_file(
      std::string(KILN_SOURCE_DIR) + "/tests/data/chat_templates/Qwen-Qwen3-0.6B.jinja",
      "template"));
  const json msgs = json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call0001a", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}]},
    {"role": "tool", "tool_call_id": "call0001a", "content": "{\"temp\": 21.5}"},
    {"role": "assistant", "content": "<think>\nIt is warm.\n</think>\n\nIt is 21.5 °C."},
    {"role": "user", "content": "Thanks!"}])");
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Get the weather", "parameters": {"type": "object", "properties":
    {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])");
  // Python's jinja2, as transformers sets it up, renders this:
  const std::string want =
      "<|im_start|>system\nYou are terse.\n\n# Tools\n\nYou may call one or more functions to "
      "assist with the user query.\n\nYou are provided with function signatures within "
      "<tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
      "\"get_weather\", \"description\": \"Get the weather\", \"parameters\": {\"type\": "
      "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": "
      "\"integer\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a "
      "json object with function name and arguments within <tool_call></tool_call> XML "
      "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in "
      "Zürich?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Zürich\", \"days\": "
      "2}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": "
      "21.5}\n</tool_response><|im_end|>\n<|im_start|>assistant\nIt is 21.5 "
      "°C.<|im_end|>\n<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</"
      "think>\n\n";
  CHECK(kiln::render_chat_template(qwen3, msgs, tools, true, "<|begin_of_text|>", "<|eot_id|>",
                                   json{{"enable_thinking", false}}) == want);
}

TEST_CASE("Family layouts stay selectable by name", "[models][jinja]") {
  CHECK(kiln::is_chat_template_family("chatml"));
  CHECK_FALSE(kiln::is_chat_template_family("{{ messages }}"));
  CHECK(kiln::apply_chat_template("chatml", {{"user", "hi"}}, true) ==
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}
