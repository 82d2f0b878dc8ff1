// Tool calls in a model's reply, as its chat template's family writes them:
// Hermes/Qwen `<tool_call>{"name", "arguments"}</tool_call>` blocks, Llama
// 3.x's bare `{"name", "parameters"}` object, Mistral's `[TOOL_CALLS]` list
// (v3) or `[TOOL_CALLS]name[ARGS]{...}` runs (v11), and GPT-OSS's harmony
// messages addressed `to=functions.NAME` (whose `final` channel is the
// content and `analysis` the reasoning).
//
// Why a unit: a server turns a reply into OpenAI's `message.tool_calls` and,
// streaming, into `delta.tool_calls` pieces with the arguments as they are
// generated. Both come from one parser that reads any prefix of a reply
// (ReplyParse with `final` false holds back what a later token may still
// turn into a call), so a stream's pieces always add up to the whole
// response's. The reply's text must keep control tokens' text
// (Tokenizer::token_to_piece with `special`): most of these marks are
// control tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class ToolSyntax { none, hermes, llama3_json, mistral_list, mistral_args, gpt_oss };

// The syntax a chat template's text writes tool calls in, by its marks;
// none when it shows none.
ToolSyntax tool_syntax_of(std::string_view template_text);
const char* tool_syntax_name(ToolSyntax s);
// The text a reply's first tool call starts with ("<tool_call>",
// "[TOOL_CALLS]", ...; for Llama 3.x "{"), so a grammar can wait for it.
std::string tool_call_trigger(ToolSyntax s);

struct ParsedToolCall {
  std::string name, arguments;  // arguments: the JSON text as generated
  std::string id;               // when the reply names one (Mistral's)
  bool name_done = false, arguments_done = false;
};

struct ReplyParse {
  std::string content, reasoning;
  std::vector<ParsedToolCall> calls;
};

// The reply `text` so far. Not `final`: content that a later token could
// still make part of a call (a prefix of the trigger) is held back, and the
// calls' fields are what has been generated of them; `final`: all of it.
ReplyParse parse_reply(ToolSyntax s, std::string_view text, bool final);

// One piece of a streamed reply: content, or call `index`'s name (once,
// when complete) and a piece of its arguments. (A call's id, where the
// reply names one, may come after: a server names calls itself.)
struct ReplyDelta {
  std::string content, reasoning;
  int index = -1;
  std::string name, arguments;
};

// A reply read piece by piece: each push gives what it adds to the parse,
// finish() what the end releases.
class ReplyStream {
 public:
  explicit ReplyStream(ToolSyntax s) : syntax_(s) {}
  std::vector<ReplyDelta> push(std::string_view piece);
  std::vector<ReplyDelta> finish();

 private:
  std::vector<ReplyDelta> diff(const ReplyParse& now);
  ToolSyntax syntax_;
  std::string text_;
  ReplyParse sent_;
};

}  // namespace kiln
