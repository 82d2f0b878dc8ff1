// A chat request's side of `kiln serve`: its messages (with tool calls and
// tool results), tools and tool_choice read and rendered into prompt
// tokens by the model's chat template, and a reply turned back into
// OpenAI's message (content, reasoning, tool_calls).
//
// Why apart from serve_api: OpenAI's chat shapes are many (content parts,
// assistant tool_calls with arguments as JSON text, tool messages,
// tool_choice forms) and map onto what templates expect (arguments as
// objects, as transformers passes them); one unit owns that mapping and its
// 422s, the other the request's sampling fields and the response envelope.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/jinja/template.h"
#include "models/tokenizer.h"
#include "models/tool_calls.h"

namespace kiln {

// The model's chat template: a Jinja template (the model's
// tokenizer.chat_template, or --chat-template FILE) or a family's
// hand-written layout (--chat-template NAME, or chatml for a model with
// none), or why there is none (chat requests are then refused, 422).
struct ChatTemplate {
  std::shared_ptr<const JinjaTemplate> jinja;
  std::string family;
  ToolSyntax tools = ToolSyntax::none;  // how its replies carry tool calls
  std::string bos, eos;                 // the vocabulary's BOS and EOS texts
  std::string error;
};

// The template of a model: `option` (--chat-template: a family's name or a
// template file), else the model's own text, else chatml. An unparsable
// template is kept as `error`.
ChatTemplate chat_template_for(const std::string& option, const std::string& model_template,
                               const Tokenizer& tok);

// What a chat request asks of tools.
struct ChatTools {
  enum class Choice { none, automatic, required, named };
  Choice choice = Choice::none;  // none also when no tools are given
  std::string named;             // Choice::named's function
  bool parallel = true;          // parallel_tool_calls
  nlohmann::ordered_json functions = nlohmann::ordered_json::array();  // each tool's function
  ToolSyntax syntax = ToolSyntax::none;  // the template's, when tools may be called
};

struct ChatPrompt {
  std::vector<int32_t> tokens;
  ChatTools tools;
};

// Reads `messages`, `tools`, `tool_choice`, `parallel_tool_calls` and
// `chat_template_kwargs` of a chat body and renders the prompt. Throws
// ApiError (tools/serve_api.h): 400 without messages, 422 naming the field
// otherwise (a tool_choice naming no tool, tools with a template that
// writes no tool calls, a template's own raise_exception).
ChatPrompt chat_prompt(const nlohmann::ordered_json& body, const Tokenizer& tok,
                       const ChatTemplate& tmpl);

// The grammar a chat's tool calls are held to (GBNF; empty: none): from
// the reply's start for tool_choice "required" or a named function, from
// the syntax's trigger on (a lazy grammar) when tool_choice is "auto" and a
// function is `strict`. A call's arguments match its function's
// parameters schema (models/grammar/json_schema.h; a non-strict
// function's schema that Kiln cannot hold a reply to is relaxed to any
// object). Hermes and Llama 3.x JSON calls are text and can be held; throws
// ApiError (422 naming tool_choice) for a forced call in a syntax whose
// marks are control tokens (Mistral, GPT-OSS).
struct ToolGrammar {
  std::string gbnf, trigger;
};
ToolGrammar tool_grammar(const ChatTools& tools);

// OpenAI's assistant message of a reply: content (null when empty and it
// calls tools), reasoning_content when the reply has any, tool_calls each
// with an id of 9 alphanumerics (as Mistral's templates require) made from
// `seed` and its index.
nlohmann::ordered_json chat_message(const ReplyParse& reply, uint64_t seed);
std::string tool_call_id(uint64_t seed, size_t index);

}  // namespace kiln
