#include "tools/serve_api.h"

#include <bit>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "models/grammar/json_schema.h"
#include "models/unicode.h"

namespace kiln {

namespace {

// Bodies are read and written in order: a schema's properties, a tool's
// fields and a response's keys keep the order they were given.
using json = nlohmann::ordered_json;

[[noreturn]] void invalid(const std::string& param, const std::string& why) {
  invalid_field(param, why);
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

// One prompt (the field `key`): a string, or a list of token ids.
std::vector<int32_t> one_prompt(const json& p, const Tokenizer& tok, const std::string& key) {
  if (p.is_string()) {
    const std::string& text = p.get_ref<const std::string&>();
    if (!valid_utf8(text)) throw ApiError(400, "'" + key + "' is not valid UTF-8", key);
    std::vector<int32_t> ids = tok.encode(text, tok.add_bos_default() && tok.bos_id() >= 0);
    if (ids.empty()) invalid(key, "encodes to no tokens");
    return ids;
  }
  if (!p.is_array() || p.empty())
    invalid(key, "must be a string, a non-empty list of token ids, or a list of those");
  std::vector<int32_t> ids;
  for (const json& v : p) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tok.vocab_size())
      invalid(key, "token ids must be integers in [0, " + std::to_string(tok.vocab_size()) + ")");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

// The field `key`: a string, a list of ids (one prompt), or a list of up
// to `most` strings or id lists (several prompts).
std::vector<std::vector<int32_t>> prompt_tokens(const json& body, const Tokenizer& tok,
                                                const std::string& key, int most) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) throw ApiError(400, "'" + key + "' is required", key);
  const json& p = *it;
  const bool many = p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
  if (!many) return {one_prompt(p, tok, key)};
  if (p.size() > static_cast<size_t>(most))
    invalid(key, "lists " + std::to_string(p.size()) + " prompts; at most " + std::to_string(most) +
                     " are taken");
  std::vector<std::vector<int32_t>> out;
  for (const json& one : p) {
    if (!one.is_string() && !one.is_array())
      invalid(key, "a list of prompts must hold strings or lists of token ids");
    out.push_back(one_prompt(one, tok, key));
  }
  return out;
}

// /v1/embeddings: the inputs, and how their vectors are written.
CompletionRequest embeddings_request(const json& body, const Tokenizer& tok, int64_t n_ctx) {
  for (const auto& [key, value] : body.items()) {
    if (key == "dimensions")
      invalid(key, "is not supported (an embedding has the model's n_embd dimensions)");
    if (key != "model" && key != "input" && key != "encoding_format" && key != "user")
      invalid(key, "is not a field Kiln takes");
  }
  CompletionRequest r;
  r.prompts = prompt_tokens(body, tok, "input", kMaxEmbeddingInputs);
  for (const std::vector<int32_t>& p : r.prompts)
    if (static_cast<int64_t>(p.size()) > n_ctx)
      invalid("input", "takes " + std::to_string(p.size()) + " tokens; the context holds " +
                           std::to_string(n_ctx));
  for (const char* key : {"model", "user"})
    if (auto m = body.find(key); m != body.end() && !m->is_null() && !m->is_string())
      invalid(key, "must be a string");
  if (auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64"))
      invalid("encoding_format", "must be \"float\" or \"base64\"");
    r.base64 = *f == "base64";
  }
  r.options.embed = true;
  r.options.n_predict = 0;
  return r;
}

bool flag_in(const json& body, const std::string& key, bool def) {
  auto f = body.find(key);
  if (f == body.end() || f->is_null()) return def;
  if (!f->is_boolean()) invalid(key, "must be true or false");
  return f->get<bool>();
}

// The grammar a reply is held to: a forced or strict tool call, else
// response_format (json_object, json_schema) or llama-server's `grammar`.
void constrain(const json& body, CompletionRequest& r, GrammarCache* grammars) {
  std::string gbnf, field;
  if (auto f = body.find("response_format"); f != body.end() && !f->is_null()) {
    const std::string type = f->is_object() ? f->value("type", "") : "";
    if (type == "json_object") {
      gbnf = json_object_gbnf();
    } else if (type == "json_schema") {
      const json spec = f->value("json_schema", json());
      if (!spec.is_object() || !spec.value("schema", json()).is_object())
        invalid("response_format", "json_schema needs {\"name\", \"schema\": {...}, \"strict\"}");
      if (auto st = spec.find("strict"); st != spec.end() && !st->is_null() && !st->is_boolean())
        invalid("response_format", "json_schema.strict must be true or false");
      try {
        gbnf = json_schema_to_gbnf(spec["schema"]);
      } catch (const Error& e) {
        invalid("response_format", std::string("json_schema: ") + e.what());
      }
    } else if (type != "text") {
      invalid("response_format", "type must be \"text\", \"json_object\" or \"json_schema\"");
    }
    field = "response_format";
  }
  if (auto g = body.find("grammar"); g != body.end() && !g->is_null()) {
    if (!g->is_string()) invalid("grammar", "must be a GBNF text");
    if (!gbnf.empty()) invalid("grammar", "and response_format cannot both constrain a reply");
    gbnf = g->get<std::string>();
    field = "grammar";
  }
  const ToolGrammar tools = tool_grammar(r.tools);
  if (!tools.gbnf.empty()) {
    if (!gbnf.empty())
      invalid(field, "cannot constrain a reply that must call a tool (tool_choice, strict tools)");
    gbnf = tools.gbnf;
    field = "tools";
    r.options.grammar_trigger = tools.trigger;
  }
  if (gbnf.empty()) return;
  if (!grammars) invalid(field, "is not served here (no vocabulary for grammars)");
  try {
    r.options.grammar = grammars->compile(gbnf);
  } catch (const Error& e) {
    invalid(field, e.what());
  }
}

}  // namespace

CompletionRequest parse_request(Endpoint endpoint, const std::string& body_text,
                                const Tokenizer& tok, const ChatTemplate& tmpl, int64_t n_ctx,
                                uint64_t fresh_seed, int64_t max_n, GrammarCache* grammars) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  if (endpoint == Endpoint::embeddings) return embeddings_request(body, tok, n_ctx);
  const bool chat = endpoint == Endpoint::chat;
  static const std::set<std::string> known = {"response_format",
                                              "grammar",
                                              "model",
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
                                              "frequency_penalty",
                                              "logprobs"};
  static const std::set<std::string> chat_only = {
      "messages",    "max_completion_tokens", "top_logprobs",        "tools",
      "tool_choice", "parallel_tool_calls",   "chat_template_kwargs"};
  static const std::set<std::string> completions_only = {"prompt", "echo"};
  for (const auto& [key, value] : body.items()) {
    if (key == "best_of" || key == "suffix")
      invalid(key,
              "is not supported (Kiln samples n choices; it neither ranks extra ones nor "
              "fills in before a suffix)");
    if (!known.count(key) && !(chat ? chat_only : completions_only).count(key))
      invalid(key, "is not a field Kiln takes");
  }
  CompletionRequest r;
  if (chat) {
    ChatPrompt p = chat_prompt(body, tok, tmpl);
    r.prompts = {std::move(p.tokens)};
    r.tools = std::move(p.tools);
    // A reply is read for tool calls when tools may be called, and a
    // GPT-OSS reply always for its channels (final content, analysis
    // reasoning).
    r.reply = r.tools.syntax != ToolSyntax::none  ? r.tools.syntax
              : tmpl.tools == ToolSyntax::gpt_oss ? ToolSyntax::gpt_oss
                                                  : ToolSyntax::none;
  } else {
    r.prompts = prompt_tokens(body, tok, "prompt", kMaxPrompts);
  }
  const char* input = chat ? "messages" : "prompt";
  for (const std::vector<int32_t>& p : r.prompts)
    if (static_cast<int64_t>(p.size()) >= n_ctx)
      invalid(input, "take " + std::to_string(p.size()) + " tokens; the context holds " +
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
  const int64_t prompts = static_cast<int64_t>(r.prompts.size());
  r.n = integer_in(body, "n", 1, 1, INT32_MAX);
  if (r.n * prompts > max_n)
    invalid(r.n > 1 ? "n" : "prompt", "asks for " + std::to_string(r.n * prompts) +
                                          " choices; this server runs at most " +
                                          std::to_string(max_n) + " for one request (--max-n)");
  if (chat) {
    // logprobs: true, with top_logprobs alternatives.
    const bool on = flag_in(body, "logprobs", false);
    const int64_t top = integer_in(body, "top_logprobs", 0, 0, kMaxTopLogprobs);
    if (body.contains("top_logprobs") && !body["top_logprobs"].is_null() && !on)
      invalid("top_logprobs", "is taken only with logprobs: true");
    o.logprobs = on ? top : -1;
  } else {
    // logprobs: the alternatives per token (0: the chosen token's alone).
    o.logprobs = integer_in(body, "logprobs", -1, 0, kMaxTopLogprobs);
    r.echo = flag_in(body, "echo", false);
    o.prompt_logprobs = r.echo && o.logprobs >= 0;
  }
  o.stop = stop_strings(body);
  constrain(body, r, grammars);
  r.stream = flag_in(body, "stream", false);
  r.return_token_ids = flag_in(body, "return_token_ids", false);
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

namespace {

json usage_of(const CompletionRequest& req, const std::vector<GenerationResult>& choices) {
  size_t p = 0, c = 0;
  for (const auto& prompt : req.prompts) p += prompt.size();
  for (const GenerationResult& r : choices) c += r.generated.size();
  return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c}};
}

// Logprobs in the two shapes OpenAI gives them: completions' object of
// parallel lists (tokens, token_logprobs, top_logprobs, text_offset; the
// prompt's first token null), and chat's list of {token, logprob, bytes,
// top_logprobs}. Token texts are their pieces, control tokens' text
// included; a piece that is part of a UTF-8 sequence is written replaced
// (chat's `bytes` keep it exact).
class LogprobsOut {
 public:
  LogprobsOut(Endpoint e, const Tokenizer& tok, int64_t offset)
      : chat_(e == Endpoint::chat), tok_(tok), offset_(offset) {
    if (chat_)
      out_ = {{"content", json::array()}, {"refusal", nullptr}};
    else
      out_ = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  }
  // A token and its score (null: the prompt's first token, unscored).
  void add(int32_t token, const TokenLogprob* lp) {
    const std::string piece = tok_.token_to_piece(token, true);
    if (chat_) {
      json top = json::array();
      for (const auto& [t, l] : lp->top) {
        const std::string p = tok_.token_to_piece(t, true);
        top.push_back({{"token", p}, {"logprob", l}, {"bytes", bytes(p)}});
      }
      out_["content"].push_back({{"token", piece},
                                 {"logprob", lp->logprob},
                                 {"bytes", bytes(piece)},
                                 {"top_logprobs", top}});
      return;
    }
    out_["tokens"].push_back(piece);
    out_["text_offset"].push_back(offset_);
    offset_ += code_points(tok_.token_to_piece(token));  // as the text shows it
    if (!lp) {
      out_["token_logprobs"].push_back(nullptr);
      out_["top_logprobs"].push_back(nullptr);
      return;
    }
    out_["token_logprobs"].push_back(lp->logprob);
    json top = json::object();
    for (const auto& [t, l] : lp->top) top[tok_.token_to_piece(t, true)] = l;
    out_["top_logprobs"].push_back(top);
  }
  int64_t offset() const { return offset_; }
  json take() { return std::move(out_); }

 private:
  static json bytes(const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(c);
    return b;
  }
  // Characters as a client counts them: bytes that begin one.
  static int64_t code_points(const std::string& s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }
  bool chat_;
  const Tokenizer& tok_;
  int64_t offset_;
  json out_;
};

// The prompt of choice `index`, and whether its text and logprobs lead.
const std::vector<int32_t>& prompt_of(const CompletionRequest& req, int64_t index) {
  return req.prompts[static_cast<size_t>(index / req.n)];
}

// Choice `index`'s logprobs from generated token `from` on (with the
// prompt's first when `prompt`), or null when not asked.
json logprobs_of(const ResponseHead& h, const CompletionRequest& req, const Tokenizer& tok,
                 int64_t index, const GenerationResult& r, size_t from, bool prompt,
                 int64_t* offset) {
  if (req.options.logprobs < 0) return nullptr;
  LogprobsOut out(h.endpoint, tok, *offset);
  if (prompt) {
    const std::vector<int32_t>& p = prompt_of(req, index);
    for (size_t i = 0; i < p.size(); ++i)
      out.add(p[i], i == 0 || i > r.prompt_logprobs.size() ? nullptr : &r.prompt_logprobs[i - 1]);
  }
  for (size_t i = from; i < r.logprobs.size() && i < r.generated.size(); ++i)
    out.add(r.generated[i], &r.logprobs[i]);
  *offset = out.offset();
  return out.take();
}

json choice_envelope(int64_t index, const std::string& finish) {
  return {{"index", index},
          {"finish_reason", finish.empty() ? json(nullptr) : json(finish)},
          {"logprobs", nullptr}};
}

std::string dump(const json& j) {
  // A piece may end inside a UTF-8 sequence: replaced, never a throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string reply_text(const Tokenizer& tok, const GenerationResult& r,
                       const std::vector<std::string>& stop) {
  std::string text;
  for (int32_t t : r.generated) text += tok.token_to_piece(t, true);
  if (r.stop_reason == "stop string") {
    size_t cut = text.size();
    for (const std::string& s : stop) cut = std::min(cut, text.find(s));
    text.resize(cut);
  }
  return text;
}

uint64_t tool_call_seed(const ResponseHead& h, int64_t index) {
  return std::hash<std::string>{}(h.id) + static_cast<uint64_t>(index) * 0x100000001B3ull;
}

std::string completion_body(const ResponseHead& h, const CompletionRequest& req,
                            const std::vector<GenerationResult>& choices, const Tokenizer& tok) {
  const bool chat = h.endpoint == Endpoint::chat;
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const GenerationResult& r = choices[i];
    const int64_t index = static_cast<int64_t>(i);
    json choice = choice_envelope(index, finish_reason(r));
    const std::string prompt_text = req.echo ? tok.decode(prompt_of(req, index)) : "";
    int64_t offset = 0;
    choice["logprobs"] = logprobs_of(h, req, tok, index, r, 0, req.echo, &offset);
    if (chat && req.reply != ToolSyntax::none) {
      const ReplyParse reply = parse_reply(req.reply, reply_text(tok, r, req.options.stop), true);
      choice["message"] = chat_message(reply, tool_call_seed(h, index));
      if (!reply.calls.empty() && r.stop_reason != "length") choice["finish_reason"] = "tool_calls";
    } else if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    } else
      choice["text"] = prompt_text + r.text;
    if (req.return_token_ids) {
      choice["token_ids"] = r.generated;
      choice["prompt_token_ids"] = prompt_of(req, index);
    }
    list.push_back(std::move(choice));
  }
  json body = {{"id", h.id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", h.created},
               {"model", h.model},
               {"choices", std::move(list)},
               {"usage", usage_of(req, choices)}};
  if (req.return_token_ids && req.prompts.size() == 1) body["prompt_token_ids"] = req.prompts[0];
  return dump(body);
}

namespace {

// What every stream chunk of a request carries.
json chunk_envelope(const ResponseHead& h) {
  return {{"id", h.id},
          {"object", h.endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
          {"created", h.created},
          {"model", h.model}};
}

}  // namespace

std::string chunk_body(const ResponseHead& h, const CompletionRequest& req, const Tokenizer& tok,
                       int64_t index, const std::string& text, const GenerationResult& so_far,
                       StreamedChoice& sent, const std::string& finish,
                       const std::vector<GenerationResult>* all, const json& delta_extra) {
  const bool chat = h.endpoint == Endpoint::chat, first = !sent.opened;
  json choice = choice_envelope(index, finish);
  const bool echo = req.echo && first;
  choice["logprobs"] =
      logprobs_of(h, req, tok, index, so_far, sent.tokens, echo, &sent.text_offset);
  sent.tokens = so_far.generated.size();
  sent.opened = true;
  if (!chat) {
    choice["text"] = (echo ? tok.decode(prompt_of(req, index)) : "") + text;
  } else {
    choice["delta"] = json::object();
    if (first) choice["delta"]["role"] = "assistant";
    if (!text.empty() || (finish.empty() && delta_extra.is_null()))
      choice["delta"]["content"] = text;
    if (delta_extra.is_object()) choice["delta"].update(delta_extra);
  }
  json chunk = chunk_envelope(h);
  chunk["choices"] = json::array({choice});
  if (all) chunk["usage"] = usage_of(req, *all);
  return dump(chunk);
}

namespace {

// Base64 (RFC 4648, padded) of bytes.
std::string base64_of(const uint8_t* p, size_t n) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (i + 1 < n ? uint32_t{p[i + 1]} << 8 : 0) |
                       (i + 2 < n ? uint32_t{p[i + 2]} : 0);
    out += abc[v >> 18];
    out += abc[(v >> 12) & 63];
    out += i + 1 < n ? abc[(v >> 6) & 63] : '=';
    out += i + 2 < n ? abc[v & 63] : '=';
  }
  return out;
}

}  // namespace

std::string embeddings_body(const ResponseHead& h, const CompletionRequest& req,
                            const std::vector<GenerationResult>& inputs) {
  json data = json::array();
  size_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<float> v = inputs[i].embedding;
    double norm = 0;
    for (float x : v) norm += static_cast<double>(x) * x;
    norm = std::sqrt(norm);
    for (float& x : v) x = norm > 0 ? static_cast<float>(x / norm) : 0.f;
    json e = {{"object", "embedding"}, {"index", i}};
    if (req.base64) {
      static_assert(std::endian::native == std::endian::little, "base64 embeddings are LE float32");
      e["embedding"] = base64_of(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
    } else {
      e["embedding"] = v;
    }
    data.push_back(std::move(e));
    tokens += req.prompts[i].size();
  }
  return dump({{"object", "list"},
               {"data", std::move(data)},
               {"model", h.model},
               {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

std::string usage_chunk_body(const ResponseHead& h, const CompletionRequest& req,
                             const std::vector<GenerationResult>& choices) {
  json chunk = chunk_envelope(h);
  chunk["choices"] = json::array();
  chunk["usage"] = usage_of(req, choices);
  return dump(chunk);
}

std::pair<std::string, json> ReplyChunker::take(const Tokenizer& tok,
                                                const GenerationResult& so_far, bool end) {
  std::vector<ReplyDelta> deltas;
  for (; fed_ < so_far.generated.size(); ++fed_)
    for (ReplyDelta& d : stream_.push(tok.token_to_piece(so_far.generated[fed_], true)))
      deltas.push_back(std::move(d));
  if (end)
    for (ReplyDelta& d : stream_.finish()) deltas.push_back(std::move(d));
  std::string reasoning;
  json calls = json::array();
  // A piece of `held` up to its last whole UTF-8 sequence (all at the end).
  auto release = [end](std::string& held) {
    const size_t whole = end ? held.size() : complete_utf8_prefix(held);
    std::string out = held.substr(0, whole);
    held.erase(0, whole);
    return out;
  };
  for (ReplyDelta& d : deltas) {
    held_ += d.content;
    reasoning += d.reasoning;
    if (d.index < 0) continue;
    const size_t i = static_cast<size_t>(d.index);
    if (args_.size() <= i) args_.resize(i + 1);
    args_[i] += d.arguments;
    json call = {{"index", d.index}};
    if (!d.name.empty()) {
      call["id"] = tool_call_id(seed_, i);
      call["type"] = "function";
      call["function"] = {{"name", d.name}, {"arguments", release(args_[i])}};
      ++calls_;
    } else {
      call["function"] = {{"arguments", release(args_[i])}};
    }
    calls.push_back(std::move(call));
  }
  if (end)  // what the last pieces held back
    for (size_t i = 0; i < args_.size(); ++i)
      if (!args_[i].empty())
        calls.push_back({{"index", i}, {"function", {{"arguments", release(args_[i])}}}});
  std::string content = release(held_);
  json extra = nullptr;
  if (!reasoning.empty()) extra["reasoning_content"] = reasoning;
  if (!calls.empty()) extra["tool_calls"] = std::move(calls);
  return {std::move(content), std::move(extra)};
}

void invalid_field(const std::string& param, const std::string& why) {
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
