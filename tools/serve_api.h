// The OpenAI-style bodies of `kiln serve`'s POST /v1/completions and
// /v1/chat/completions: the request read and checked into prompt tokens and
// GenerationOptions, and the response, stream chunk and error bodies written
// back.
//
// Checking lives apart from the HTTP server so that each status code has
// one rule: 400 for a body that is not a JSON object or lacks its prompt,
// 422 for a field Kiln does not take (unknown or unsupported) and for a
// value of the wrong type or out of range. An ApiError carries the status,
// the message and the parameter it names.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/generation.h"
#include "models/tokenizer.h"
#include "tools/grammar_cache.h"
#include "tools/serve_chat.h"

namespace kiln {

struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = "")
      : std::runtime_error(message), status(status), param(std::move(param)) {}
  int status;
  std::string param;
};

struct CompletionRequest {
  // Token ids (a text prompt tokenized, BOS as the model adds it): one, or
  // a completions request's list of prompts, each giving n choices (choice
  // index = prompt index * n + sample).
  std::vector<std::vector<int32_t>> prompts;
  int64_t n = 1;
  // options.logprobs >= 0: the chosen tokens' logprobs with that many
  // alternatives (completions' `logprobs`, chat's `top_logprobs`).
  GenerationOptions options;
  // Completions: each choice's text and logprobs begin with its prompt's.
  bool echo = false;
  // Embeddings: each input's vector as base64 of its little-endian float32
  // bytes instead of a list of numbers.
  bool base64 = false;
  // Chat: the tools it offers, and the syntax its replies are read in
  // (tools/serve_chat.h; none: the reply is all content).
  ChatTools tools;
  ToolSyntax reply = ToolSyntax::none;
  bool stream = false;
  // vLLM's extension: the response lists the prompt's and the choice's ids.
  bool return_token_ids = false;
  // stream_options.include_usage: a stream ends with a chunk of usage alone
  // (no choices), as OpenAI sends it.
  bool include_usage = false;
};

// POST /v1/completions (a prompt), /v1/chat/completions (messages) or
// /v1/embeddings (inputs, each a prompt whose pooled hidden state is its
// embedding: options.embed).
enum class Endpoint { completions, chat, embeddings };

// Limits that keep one request from taking the server: stop strings (count
// and bytes each), alternatives per token (OpenAI's limit), prompts in a
// list.
inline constexpr int kMaxStopStrings = 16, kMaxStopBytes = 256, kMaxTopLogprobs = 20,
                     kMaxPrompts = 64, kMaxEmbeddingInputs = 256;

// Reads a request body for a model of `n_ctx` positions. Throws ApiError.
// Without a seed, `fresh_seed` is used (sampling then differs between
// requests, as OpenAI's does). Chat: max_tokens (or max_completion_tokens)
// defaults to the context, completions' to 16, as OpenAI's do. `max_n`:
// the most choices (n times the prompts) the server runs for one request.
// `grammars` compiles a reply's constraint (response_format, grammar,
// forced or strict tool calls; a 422 naming the field when it is wrong).
CompletionRequest parse_request(Endpoint endpoint, const std::string& body, const Tokenizer& tok,
                                const ChatTemplate& tmpl, int64_t n_ctx, uint64_t fresh_seed,
                                int64_t max_n, GrammarCache* grammars);

// "stop" for an end of sequence or a stop string, "length" otherwise.
std::string finish_reason(const GenerationResult& r);

// What a response says, of a request and its choices' results (in choice
// order).
struct ResponseHead {
  Endpoint endpoint;
  std::string id;
  int64_t created;
  std::string model;
};

// The response of a whole completion.
std::string completion_body(const ResponseHead& h, const CompletionRequest& req,
                            const std::vector<GenerationResult>& choices, const Tokenizer& tok);

// What a stream has sent of one choice: the next chunk carries the tokens
// and text since.
struct StreamedChoice {
  bool opened = false;      // its first chunk is out (a chat's role, an echo's prompt)
  size_t tokens = 0;        // generated tokens whose logprobs are out
  int64_t text_offset = 0;  // completions' text_offset of the next token
};
// One chunk of choice `index`: `text` released since the last, the
// logprobs of so_far's tokens since, and `finish` on its last chunk (empty
// before). The stream's last chunk carries the usage of `all` choices.
std::string chunk_body(const ResponseHead& h, const CompletionRequest& req, const Tokenizer& tok,
                       int64_t index, const std::string& text, const GenerationResult& so_far,
                       StreamedChoice& sent, const std::string& finish,
                       const std::vector<GenerationResult>* all = nullptr,
                       const nlohmann::ordered_json& delta_extra = nullptr);
// A chat reply's text with control tokens' text kept (what tool calls and
// channels are read from), cut before a stop string it met.
std::string reply_text(const Tokenizer& tok, const GenerationResult& r,
                       const std::vector<std::string>& stop);
// The seed of choice `index`'s tool call ids.
uint64_t tool_call_seed(const ResponseHead& h, int64_t index);

// A streamed chat choice read for tool calls and channels (its request's
// `reply` syntax): take() turns the tokens generated since the last call
// into a delta: content and arguments (an incomplete UTF-8 sequence at
// their ends held for the next), and `reasoning_content` and `tool_calls` pieces as OpenAI
// streams them (a call's index, id, type and name first, then its
// arguments as they come).
class ReplyChunker {
 public:
  ReplyChunker(ToolSyntax s, uint64_t id_seed) : stream_(s), seed_(id_seed) {}
  // `end`: so_far is the whole result.
  std::pair<std::string, nlohmann::ordered_json> take(const Tokenizer& tok,
                                                      const GenerationResult& so_far, bool end);
  bool called() const { return calls_ > 0; }

 private:
  ReplyStream stream_;
  uint64_t seed_;
  size_t fed_ = 0;
  std::string held_;               // content
  std::vector<std::string> args_;  // per call: arguments held likewise
  int calls_ = 0;
};
// The response of an embeddings request: each input's embedding, its
// pooled hidden state scaled to unit length (as OpenAI's are).
std::string embeddings_body(const ResponseHead& h, const CompletionRequest& req,
                            const std::vector<GenerationResult>& inputs);
// The chunk of usage alone that ends a stream with include_usage.
std::string usage_chunk_body(const ResponseHead& h, const CompletionRequest& req,
                             const std::vector<GenerationResult>& choices);
std::string error_body(const ApiError& e);

// The 422 of a field: "'param' why", naming it.
[[noreturn]] void invalid_field(const std::string& param, const std::string& why);
// Whether s is valid UTF-8 (a U+FFFD it holds as such counts as valid).
bool valid_utf8(const std::string& s);

// The length of the longest prefix of s that does not end inside a UTF-8
// sequence: what a stream may send now, the rest waiting for its bytes.
size_t complete_utf8_prefix(const std::string& s);

}  // namespace kiln
