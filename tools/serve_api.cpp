#include "tools/serve_api.h"

#include <nlohmann/json.hpp>
#include <set>

#include "models/chat_template.h"
#include "models/unicode.h"

namespace kiln {

namespace {

using nlohmann::json;

[[noreturn]] void invalid(const std::string& param, const std::string& why) {
  throw ApiError(422, "'" + param + "' " + why, param);
}

bool valid_utf8(const std::string& s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t at = pos;
    if (decode_utf8(s, &pos) == kReplacementChar && s.compare(at, 3, "\xEF\xBF\xBD") != 0)
      return false;
  }
  return true;
}

double number_in(const json& body, const std::string& key, double def, double lo, double hi,
                 bool lo_open) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return def;
  if (!it->is_number()) invalid(key, "must be a number");
  const double v = it->get<double>();
  if (!(lo_open ? v > lo : v >= lo) || !(v <= hi))
    invalid(key, "must be in " + std::string(lo_open ? "(" : "[") + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got " + it->dump());
  return v;
}

int64_t integer_in(const json& body, const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return def;
  if (!it->is_number_integer()) invalid(key, "must be an integer");
  // A negative number parses as signed; one past int64 as unsigned.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi))
    invalid(key, "must be at most " + std::to_string(hi));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    invalid(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                     std::to_string(v));
  return v;
}

std::vector<std::string> stop_strings(const json& body) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return {};
  json list = it->is_string() ? json::array({*it}) : *it;
  if (!list.is_array()) invalid("stop", "must be a string or a list of strings");
  if (list.size() > static_cast<size_t>(kMaxStopStrings))
    invalid("stop", "lists " + std::to_string(list.size()) + " strings; at most " +
                        std::to_string(kMaxStopStrings) + " are taken");
  std::vector<std::string> out;
  for (const json& s : list) {
    if (!s.is_string()) invalid("stop", "must be a string or a list of strings");
    const std::string& t = s.get_ref<const std::string&>();
    if (t.empty() || t.size() > static_cast<size_t>(kMaxStopBytes))
      invalid("stop", "strings must be 1 to " + std::to_string(kMaxStopBytes) + " bytes");
    if (!valid_utf8(t)) throw ApiError(400, "'stop' is not valid UTF-8", "stop");
    out.push_back(t);
  }
  return out;
}

std::vector<int32_t> prompt_tokens(const json& body, const Tokenizer& tok) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw ApiError(400, "'prompt' is required", "prompt");
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    if (!valid_utf8(text)) throw ApiError(400, "'prompt' is not valid UTF-8", "prompt");
    std::vector<int32_t> ids = tok.encode(text, tok.add_bos_default() && tok.bos_id() >= 0);
    if (ids.empty()) invalid("prompt", "encodes to no tokens");
    return ids;
  }
  if (!it->is_array() || it->empty())
    invalid("prompt", "must be a string or a non-empty list of token ids (one prompt: n = 1)");
  std::vector<int32_t> ids;
  for (const json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tok.vocab_size())
      invalid("prompt",
              "token ids must be integers in [0, " + std::to_string(tok.vocab_size()) + ")");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

// A chat's messages laid out by the model's chat template (the assistant's
// turn opened), tokenized with the template's special tokens as such.
std::vector<int32_t> chat_tokens(const json& body, const Tokenizer& tok, const ChatTemplate& tmpl) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) throw ApiError(400, "'messages' is required", "messages");
  if (!it->is_array() || it->empty()) invalid("messages", "must be a non-empty list");
  std::vector<ChatMessage> msgs;
  for (const json& m : *it) {
    if (!m.is_object() || !m.value("role", json()).is_string() ||
        !m.value("content", json()).is_string())
      invalid("messages", "must hold {\"role\": string, \"content\": string} objects");
    for (const auto& [key, v] : m.items())
      if (key != "role" && key != "content" && key != "name")
        invalid("messages", "field '" + key + "' is not one Kiln takes");
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (role != "system" && role != "user" && role != "assistant")
      invalid("messages", "role '" + role + "' is not system, user or assistant");
    if (!valid_utf8(m["content"].get_ref<const std::string&>()))
      throw ApiError(400, "a message is not valid UTF-8", "messages");
    msgs.push_back({role, m["content"].get<std::string>()});
  }
  if (!tmpl.error.empty()) throw ApiError(422, tmpl.error, "messages");
  const std::string text = apply_chat_template(tmpl.family, msgs, true);
  return tok.encode(text, tok.add_bos_default() && tok.bos_id() >= 0, true);
}

json usage_of(const GenerationResult& r) {
  const size_t p = r.prompt.size(), c = r.generated.size();
  return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c}};
}

}  // namespace

CompletionRequest parse_request(Endpoint endpoint, const std::string& body_text,
                                const Tokenizer& tok, const ChatTemplate& tmpl, int64_t n_ctx,
                                uint64_t fresh_seed) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  const bool chat = endpoint == Endpoint::chat;
  static const std::set<std::string> known = {"model",
                                              "max_tokens",
                                              "temperature",
                                              "top_p",
                                              "top_k",
                                              "stop",
                                              "seed",
                                              "n",
                                              "stream",
                                              "return_token_ids",
                                              "stream_options",
                                              "repetition_penalty",
                                              "user",
                                              "presence_penalty",
                                              "frequency_penalty"};
  for (const auto& [key, value] : body.items())
    if (!known.count(key) && key != (chat ? "messages" : "prompt") &&
        !(chat && key == "max_completion_tokens"))
      invalid(key, "is not a field Kiln takes");
  CompletionRequest r;
  r.prompt = chat ? chat_tokens(body, tok, tmpl) : prompt_tokens(body, tok);
  const char* input = chat ? "messages" : "prompt";
  if (static_cast<int64_t>(r.prompt.size()) >= n_ctx)
    invalid(input, "take " + std::to_string(r.prompt.size()) + " tokens; the context holds " +
                       std::to_string(n_ctx) + " with room for one generated");
  for (const char* key : {"model", "user"})
    if (auto m = body.find(key); m != body.end() && !m->is_null() && !m->is_string())
      invalid(key, "must be a string");
  GenerationOptions& o = r.options;
  o.n_predict = integer_in(body, "max_tokens", chat ? n_ctx : 16, 0, n_ctx);
  if (chat) o.n_predict = integer_in(body, "max_completion_tokens", o.n_predict, 0, n_ctx);
  o.sampler.temperature = number_in(body, "temperature", 1.0, 0, 2, false);
  o.sampler.top_p = number_in(body, "top_p", 1.0, 0, 1, true);
  o.sampler.top_k = integer_in(body, "top_k", 0, 0, tok.vocab_size());
  o.sampler.repeat_penalty = number_in(body, "repetition_penalty", 1.0, 0, 10, true);
  o.sampler.presence_penalty = number_in(body, "presence_penalty", 0, -2, 2, false);
  o.sampler.frequency_penalty = number_in(body, "frequency_penalty", 0, -2, 2, false);
  o.sampler.seed = body.contains("seed") && !body["seed"].is_null()
                       ? static_cast<uint64_t>(integer_in(body, "seed", 0, 0, INT64_MAX))
                       : fresh_seed;
  if (integer_in(body, "n", 1, 1, 1) != 1) invalid("n", "must be 1");
  o.stop = stop_strings(body);
  for (auto [key, flag] :
       {std::pair{"stream", &r.stream}, std::pair{"return_token_ids", &r.return_token_ids}})
    if (auto f = body.find(key); f != body.end() && !f->is_null()) {
      if (!f->is_boolean()) invalid(key, "must be true or false");
      *flag = f->get<bool>();
    }
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!r.stream) invalid("stream_options", "is taken only with stream: true");
    if (!so->is_object()) invalid("stream_options", "must be an object");
    for (const auto& [key, value] : so->items()) {
      if (key != "include_usage") invalid("stream_options." + key, "is not a field Kiln takes");
      if (!value.is_boolean()) invalid("stream_options.include_usage", "must be true or false");
      r.include_usage = value.get<bool>();
    }
  }
  return r;
}

std::string finish_reason(const GenerationResult& r) {
  return r.stop_reason == "length" ? "length" : "stop";
}

std::string completion_body(Endpoint endpoint, const std::string& id, int64_t created,
                            const std::string& model, const GenerationResult& r, bool token_ids) {
  const bool chat = endpoint == Endpoint::chat;
  json choice = {{"index", 0}, {"finish_reason", finish_reason(r)}, {"logprobs", nullptr}};
  if (chat)
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else
    choice["text"] = r.text;
  if (token_ids) choice["token_ids"] = r.generated;
  json body = {{"id", id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", json::array({choice})},
               {"usage", usage_of(r)}};
  if (token_ids) body["prompt_token_ids"] = r.prompt;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// What every stream chunk of a request carries.
json chunk_envelope(Endpoint endpoint, const std::string& id, int64_t created,
                    const std::string& model) {
  return {{"id", id},
          {"object", endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model}};
}

}  // namespace

std::string chunk_body(Endpoint endpoint, const std::string& id, int64_t created,
                       const std::string& model, const std::string& text, bool first,
                       const std::string& finish, const GenerationResult* usage) {
  const bool chat = endpoint == Endpoint::chat;
  json choice = {{"index", 0},
                 {"finish_reason", finish.empty() ? json(nullptr) : json(finish)},
                 {"logprobs", nullptr}};
  if (!chat) {
    choice["text"] = text;
  } else {
    choice["delta"] = json::object();
    if (first) choice["delta"]["role"] = "assistant";
    if (!text.empty() || finish.empty()) choice["delta"]["content"] = text;
  }
  json chunk = chunk_envelope(endpoint, id, created, model);
  chunk["choices"] = json::array({choice});
  if (usage) chunk["usage"] = usage_of(*usage);
  // A piece may end inside a UTF-8 sequence: replaced, never a throw.
  return chunk.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string usage_chunk_body(Endpoint endpoint, const std::string& id, int64_t created,
                             const std::string& model, const GenerationResult& r) {
  json chunk = chunk_envelope(endpoint, id, created, model);
  chunk["choices"] = json::array();
  chunk["usage"] = usage_of(r);
  return chunk.dump();
}

size_t complete_utf8_prefix(const std::string& s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto b = static_cast<uint8_t>(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    return b >= 0xC0 && utf8_sequence_length(b) > back ? s.size() - back : s.size();
  }
  return s.size();
}

std::string error_body(const ApiError& e) {
  const char* type = e.status == 503   ? "server_busy"
                     : e.status >= 500 ? "server_error"
                                       : "invalid_request_error";
  return json{{"error",
               {{"message", e.what()},
                {"type", type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.status}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kiln
