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
#include <stdexcept>
#include <string>
#include <vector>

#include "models/generation.h"
#include "models/tokenizer.h"

namespace kiln {

struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = "")
      : std::runtime_error(message), status(status), param(std::move(param)) {}
  int status;
  std::string param;
};

struct CompletionRequest {
  std::vector<int32_t> prompt;  // token ids (a text prompt tokenized, BOS as the model adds it)
  GenerationOptions options;
  bool stream = false;
  // vLLM's extension: the response lists the prompt's and the choice's ids.
  bool return_token_ids = false;
  // stream_options.include_usage: a stream ends with a chunk of usage alone
  // (no choices), as OpenAI sends it.
  bool include_usage = false;
};

// POST /v1/completions (a prompt) or /v1/chat/completions (messages).
enum class Endpoint { completions, chat };

// The model's chat template as Kiln lays it out (models/chat_template.h):
// its family, or why there is none (chat requests are then refused, 422).
struct ChatTemplate {
  std::string family, error;
};

// Limits that keep one request from taking the server: stop strings (count
// and bytes each).
inline constexpr int kMaxStopStrings = 16, kMaxStopBytes = 256;

// Reads a request body for a model of `n_ctx` positions. Throws ApiError.
// Without a seed, `fresh_seed` is used (sampling then differs between
// requests, as OpenAI's does). Chat: max_tokens (or max_completion_tokens)
// defaults to the context, completions' to 16, as OpenAI's do.
CompletionRequest parse_request(Endpoint endpoint, const std::string& body, const Tokenizer& tok,
                                const ChatTemplate& tmpl, int64_t n_ctx, uint64_t fresh_seed);

// "stop" for an end of sequence or a stop string, "length" otherwise.
std::string finish_reason(const GenerationResult& r);

// The response of a whole completion, and one stream chunk (`first`: a
// chat's opens the assistant's turn; `finish` empty while the text goes
// on; the last chunk carries usage too).
std::string completion_body(Endpoint endpoint, const std::string& id, int64_t created,
                            const std::string& model, const GenerationResult& r, bool token_ids);
std::string chunk_body(Endpoint endpoint, const std::string& id, int64_t created,
                       const std::string& model, const std::string& text, bool first,
                       const std::string& finish, const GenerationResult* usage);
// The chunk of usage alone that ends a stream with include_usage.
std::string usage_chunk_body(Endpoint endpoint, const std::string& id, int64_t created,
                             const std::string& model, const GenerationResult& r);
std::string error_body(const ApiError& e);

// The length of the longest prefix of s that does not end inside a UTF-8
// sequence: what a stream may send now, the rest waiting for its bytes.
size_t complete_utf8_prefix(const std::string& s);

}  // namespace kiln
