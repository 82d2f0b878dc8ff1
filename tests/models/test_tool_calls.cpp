// Tool calls read back from replies (models/tool_calls.h). The replies are
// what the real chat templates of each family render for an assistant
// message carrying tool calls (Python's jinja2 over llama.cpp's copies of
// the templates): the parser must recover the calls the template wrote.
// Every reply is also streamed in pieces of every size: the deltas must add
// up to the whole parse, and a call's name must come whole.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "models/tool_calls.h"

using namespace kiln;

namespace {

struct Want {
  std::string name, arguments, id;
};

void check_parse(ToolSyntax s, const std::string& text, const std::string& content,
                 const std::vector<Want>& calls, const std::string& reasoning = "") {
  const ReplyParse p = parse_reply(s, text, true);
  CHECK(p.content == content);
  CHECK(p.reasoning == reasoning);
  REQUIRE(p.calls.size() == calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    CHECK(p.calls[i].name == calls[i].name);
    CHECK(p.calls[i].arguments == calls[i].arguments);
    CHECK(p.calls[i].id == calls[i].id);
    CHECK(p.calls[i].name_done);
    CHECK(p.calls[i].arguments_done);
  }
  // Streamed in pieces of 1, 2, 3, 5 and 7 bytes.
  for (size_t step : {1, 2, 3, 5, 7}) {
    INFO("pieces of " << step);
    ReplyStream stream(s);
    std::string got_content, got_reasoning;
    std::vector<Want> got;
    auto take = [&](const std::vector<ReplyDelta>& ds) {
      for (const ReplyDelta& d : ds) {
        got_content += d.content;
        got_reasoning += d.reasoning;
        if (d.index < 0) continue;
        if (static_cast<size_t>(d.index) == got.size()) {
          CHECK(!d.name.empty());  // announced with its whole name
          got.push_back({d.name, "", ""});
        }
        REQUIRE(static_cast<size_t>(d.index) < got.size());
        got[d.index].arguments += d.arguments;
      }
    };
    for (size_t i = 0; i < text.size(); i += step) take(stream.push(text.substr(i, step)));
    take(stream.finish());
    CHECK(got_content == content);
    CHECK(got_reasoning == reasoning);
    REQUIRE(got.size() == calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      CHECK(got[i].name == calls[i].name);
      CHECK(got[i].arguments == calls[i].arguments);
    }
  }
}

const std::string paris = R"({"city": "Paris"})", rome = R"({"city": "Rome"})";

}  // namespace

TEST_CASE("Hermes/Qwen <tool_call> blocks", "[models][tools]") {
  check_parse(ToolSyntax::hermes,
              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
              "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
              "\"Rome\"}}\n</tool_call>",
              "\n", {{"get_weather", paris, ""}, {"get_weather", rome, ""}});
  check_parse(ToolSyntax::hermes,
              "Let me look.\n<tool_call>\n{\"arguments\": {\"q\": \"a \\\"}\\\" b\", \"n\": [1, "
              "{\"x\": 2}]}, \"name\": \"search\"}\n</tool_call>",
              "Let me look.\n", {{"search", R"({"q": "a \"}\" b", "n": [1, {"x": 2}]})", ""}});
  check_parse(ToolSyntax::hermes, "No tools: <tool> and < tool_call are text.",
              "No tools: <tool> and < tool_call are text.", {});
  // A block that holds no call object is content.
  check_parse(ToolSyntax::hermes, "<tool_call>oops</tool_call>", "<tool_call>oops</tool_call>", {});
}

TEST_CASE("Llama 3.x JSON calls", "[models][tools]") {
  check_parse(ToolSyntax::llama3_json,
              "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
              {{"get_weather", paris, ""}});
  check_parse(ToolSyntax::llama3_json,
              "<|python_tag|>{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": "
              "{\"city\": \"Paris\"}}",
              "", {{"get_weather", paris, ""}});
  check_parse(ToolSyntax::llama3_json, "Paris is sunny {today}.", "Paris is sunny {today}.", {});
  check_parse(ToolSyntax::llama3_json, "{\"answer\": 42}", "{\"answer\": 42}", {});
}

TEST_CASE("Mistral [TOOL_CALLS], v3 lists and v11 runs", "[models][tools]") {
  check_parse(ToolSyntax::mistral_list,
              "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
              "\"id\": \"abc123xyz\"}, {\"name\": \"get_weather\", \"arguments\": {\"city\": "
              "\"Rome\"}, \"id\": \"abc123xyw\"}]",
              "", {{"get_weather", paris, "abc123xyz"}, {"get_weather", rome, "abc123xyw"}});
  check_parse(ToolSyntax::mistral_args,
              "[TOOL_CALLS]get_weather[CALL_ID]abc123xyz[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]"
              "get_weather[CALL_ID]abc123xyw[ARGS]{\"city\": \"Rome\"}",
              "", {{"get_weather", paris, "abc123xyz"}, {"get_weather", rome, "abc123xyw"}});
  check_parse(ToolSyntax::mistral_args,
              "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "Checking.",
              {{"get_weather", paris, ""}});
}

TEST_CASE("GPT-OSS harmony messages", "[models][tools]") {
  check_parse(ToolSyntax::gpt_oss,
              "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant "
              "to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": "
              "\"Paris\"}<|call|>",
              "", {{"get_weather", paris, ""}}, "Need the weather.");
  check_parse(ToolSyntax::gpt_oss,
              "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final"
              "<|message|>Hello there<|return|>",
              "Hello there", {}, "Easy.");
  check_parse(ToolSyntax::gpt_oss, "plain text", "plain text", {});
}

TEST_CASE("a reply read so far holds back what may become a call", "[models][tools]") {
  ReplyParse p = parse_reply(ToolSyntax::hermes, "Sure <tool", false);
  CHECK(p.content == "Sure ");
  p = parse_reply(ToolSyntax::hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"ci", false);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name_done);
  CHECK(p.calls[0].arguments == "{\"ci");
  CHECK(!p.calls[0].arguments_done);
  // Cut by its length at the end: the call as far as it went.
  p = parse_reply(ToolSyntax::hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"ci", true);
  REQUIRE(p.calls.size() == 1);
  CHECK(!p.calls[0].arguments_done);
  p = parse_reply(ToolSyntax::llama3_json, "  {\"name\": \"f\", \"param", false);
  CHECK(p.content.empty());
  CHECK(p.calls.size() == 1);
}

TEST_CASE("the tool-call syntax of real chat templates", "[models][tools]") {
  const char* env = std::getenv("KILN_LLAMACPP_DATA");
  const char* home = std::getenv("HOME");
  const std::filesystem::path dir =
      env    ? std::filesystem::path(env) / "templates"
      : home ? std::filesystem::path(home) / ".cache/kiln/llama.cpp/templates"
             : std::filesystem::path();
  if (!std::filesystem::exists(dir / "Qwen-Qwen2.5-7B-Instruct.jinja")) {
    WARN("llama.cpp's chat templates are absent (tools/setup-debian.sh --test fetches them)");
    return;
  }
  auto syntax = [&](const std::string& file) {
    std::ifstream in(dir / file);
    std::stringstream ss;
    ss << in.rdbuf();
    return tool_syntax_of(ss.str());
  };
  CHECK(syntax("Qwen-Qwen2.5-7B-Instruct.jinja") == ToolSyntax::hermes);
  CHECK(syntax("Qwen-Qwen3-0.6B.jinja") == ToolSyntax::hermes);
  CHECK(syntax("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja") == ToolSyntax::hermes);
  CHECK(syntax("meta-llama-Llama-3.1-8B-Instruct.jinja") == ToolSyntax::llama3_json);
  CHECK(syntax("meta-llama-Llama-3.2-3B-Instruct.jinja") == ToolSyntax::llama3_json);
  CHECK(syntax("mistralai-Mistral-Nemo-Instruct-2407.jinja") == ToolSyntax::mistral_list);
  CHECK(syntax("Mistral-Small-3.2-24B-Instruct-2506.jinja") == ToolSyntax::mistral_args);
  CHECK(syntax("openai-gpt-oss-120b.jinja") == ToolSyntax::gpt_oss);
  CHECK(syntax("google-gemma-2-2b-it.jinja") == ToolSyntax::none);
}
