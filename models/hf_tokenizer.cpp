#include "models/hf_tokenizer.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "ir/error.h"
#include "models/read_file.h"
#include "models/sentencepiece_model.h"
#include "models/vocab.h"

namespace kiln {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The regexes of the pre-tokenizers llama.cpp names, as tokenizer.json
// spells them (one Split each, or ByteLevel's built-in regex).
const std::string kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const std::string kGpt2Llamacpp =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

const std::vector<std::pair<std::string, std::vector<std::string>>>& known_pre_tokenizers() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"gpt-2", {kGpt2}},
      {"gpt-2", {kGpt2Llamacpp}},
      {"default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Llamacpp, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {"llama-bpe",
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {"qwen2",
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {"gpt-4o",
       {R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
  };
  return table;
}

json tokenizer_config(const std::string& dir) {
  const fs::path p = fs::path(dir) / "tokenizer_config.json";
  return fs::exists(p) ? read_json_object(p.string()) : json::object();
}

// The chat template(s), as llama.cpp's converter keeps them: from
// tokenizer_config.json, else chat_template.json, else the plain
// chat_template.jinja newer folders carry. A list of {name, template}
// becomes tokenizer.chat_template (its "default") and
// tokenizer.chat_template.<name> for the others, listed in
// tokenizer.chat_templates.
void add_chat_template(const std::string& dir, const json& tc, GgufWriter& w) {
  json t = tc.value("chat_template", json());
  std::string from = (fs::path(dir) / "tokenizer_config.json").string();
  if (t.is_null() && fs::exists(fs::path(dir) / "chat_template.json")) {
    from = (fs::path(dir) / "chat_template.json").string();
    t = read_json_object(from).value("chat_template", json());
  }
  if (t.is_null() && fs::exists(fs::path(dir) / "chat_template.jinja"))
    t = read_file((fs::path(dir) / "chat_template.jinja").string(), "chat template");
  if (t.is_null()) return;
  if (t.is_string()) {
    w.add("tokenizer.chat_template", GgufWriter::str(t.get<std::string>()));
    return;
  }
  auto bad = [&] {
    throw Error("'" + from + "': chat_template is neither a string nor a list of {name, template}");
  };
  if (!t.is_array()) bad();
  std::vector<std::string> names;
  for (const json& c : t) {
    if (!c.is_object() || !c.value("template", json()).is_string()) bad();
    std::string name = c.value("name", std::string());
    for (char& ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    const std::string text = c["template"].get<std::string>();
    if (name == "default") {
      w.add("tokenizer.chat_template", GgufWriter::str(text));
    } else if (!name.empty()) {
      w.add("tokenizer.chat_template." + name, GgufWriter::str(text));
      names.push_back(name);
    }
  }
  if (!names.empty()) w.add("tokenizer.chat_templates", GgufWriter::string_array(names));
}

// Whether an added token's text looks like a control token, as the
// converter judges tokens tokenizer_config.json does not mark special.
bool looks_special(const std::string& t) {
  auto wrapped = [&](const std::string& a, const std::string& b) {
    return t.size() >= a.size() + b.size() && t.compare(0, a.size(), a) == 0 &&
           t.compare(t.size() - b.size(), b.size(), b) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>") || wrapped("<unused", ">");
}

class Reader {
 public:
  explicit Reader(const fs::path& path)
      : path_(path.string()), j_(read_json_object(path.string())) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("tokenizer.json '" + path_ + "': " + what);
  }

  // The regexes a pre-tokenizer cuts with, in order; byte_level is set when
  // a ByteLevel step maps bytes to the GPT-2 alphabet.
  void collect(const json& p, std::vector<std::string>* regexes, bool* byte_level) const {
    if (p.is_null()) return;
    const std::string type = p.value("type", "");
    if (type == "Sequence") {
      for (const json& q : p.value("pretokenizers", json::array())) collect(q, regexes, byte_level);
    } else if (type == "ByteLevel") {
      *byte_level = true;
      if (p.value("use_regex", true)) regexes->push_back(kGpt2);
    } else if (type == "Split") {
      const json& pat = p.value("pattern", json::object());
      if (!pat.contains("Regex") || !pat["Regex"].is_string())
        fail("a Split pre-tokenizer without a Regex pattern is not supported");
      if (p.value("behavior", "") != "Isolated" || p.value("invert", false))
        fail("a Split pre-tokenizer that does not isolate its matches is not supported");
      regexes->push_back(pat["Regex"].get<std::string>());
    } else if (type == "Digits") {
      regexes->push_back(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    } else {
      fail("pre-tokenizer '" + type + "' is not supported (Kiln reads byte-level BPE)");
    }
  }

  std::string pre_name(const std::vector<std::string>& regexes) const {
    for (const auto& [name, res] : known_pre_tokenizers())
      if (res == regexes) return name;
    std::string list;
    for (const std::string& r : regexes) list += "\n  " + r;
    fail("its pre-tokenizer regexes match none Kiln knows:" + list);
  }

  void add(const std::string& dir, std::optional<int64_t> bos, std::optional<int64_t> eos,
           int64_t n_vocab, GgufWriter& w) const {
    const json& model = j_.value("model", json::object());
    if (model.value("type", "") != "BPE")
      fail("model type '" + model.value("type", std::string("?")) +
           "' is not supported (Kiln reads byte-level BPE)");
    const bool spm = model.value("byte_fallback", false);
    std::vector<std::string> regexes;
    bool byte_level = false, space_prefix = false;
    if (spm)
      space_prefix = sentencepiece_style();
    else
      collect(j_.value("pre_tokenizer", json()), &regexes, &byte_level);
    if (!spm && !byte_level)
      fail("no ByteLevel pre-tokenizer: Kiln reads byte-level BPE and SentencePiece-style BPE");

    const json& vocab = model.value("vocab", json::object());
    if (!vocab.is_object() || vocab.empty()) fail("model.vocab is missing or empty");
    std::map<int64_t, std::string> by_id;
    std::map<int64_t, TokenType> types;
    auto put = [&](int64_t id, const std::string& text) {
      if (id < 0 || id > (int64_t{1} << 24))
        fail("token '" + text + "' has id " + std::to_string(id));
      auto [it, fresh] = by_id.emplace(id, text);
      if (!fresh && it->second != text)
        fail("id " + std::to_string(id) + " is both '" + it->second + "' and '" + text + "'");
    };
    for (auto& [text, id] : vocab.items()) {
      if (!id.is_number_integer()) fail("token '" + text + "' has no integer id");
      put(id.get<int64_t>(), text);
    }
    for (const json& a : j_.value("added_tokens", json::array())) {
      if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        fail("an added token without id and content: " + a.dump());
      const int64_t id = a["id"].get<int64_t>();
      put(id, a["content"].get<std::string>());
      types[id] = a.value("special", false) ? TokenType::control : TokenType::user_defined;
    }
    const int64_t n = std::max<int64_t>(n_vocab, by_id.rbegin()->first + 1);
    std::vector<std::string> tokens(static_cast<size_t>(n));
    std::vector<int32_t> type_ids(static_cast<size_t>(n), static_cast<int32_t>(TokenType::normal));
    for (int64_t i = 0; i < n; ++i) {
      auto it = by_id.find(i);
      if (it == by_id.end()) {  // as llama.cpp's converter pads a vocabulary
        tokens[i] = "[PAD" + std::to_string(i) + "]";
        type_ids[i] = static_cast<int32_t>(TokenType::unused);
      } else {
        tokens[i] = it->second;
      }
      if (types.count(i)) type_ids[i] = static_cast<int32_t>(types[i]);
    }
    std::vector<std::string> merges;
    for (const json& m : model.value("merges", json::array())) {
      if (m.is_string() && m.get<std::string>().find(' ', 1) != std::string::npos)
        merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else
        fail("a merge that is neither \"a b\" nor [\"a\", \"b\"]: " + m.dump());
    }

    // Special tokens: config.json's ids, else tokenizer_config.json's texts.
    const json tc = tokenizer_config(dir);
    auto special = [&](const char* key, std::optional<int64_t> id) -> int64_t {
      if (id) return *id;
      const json& v = tc.value(key, json());
      const std::string text = v.is_string() ? v.get<std::string>()
                               : v.is_object() && v.contains("content")
                                   ? v["content"].get<std::string>()
                                   : "";
      for (int64_t i = 0; i < n && !text.empty(); ++i)
        if (tokens[i] == text) return i;
      return -1;
    };
    const int64_t bos_id = special("bos_token", bos), eos_id = special("eos_token", eos);

    if (spm) {
      sentencepiece_scores(tokens, merges, model, space_prefix, type_ids, w);
    } else {
      w.add("tokenizer.ggml.model", GgufWriter::str("gpt2"));
      w.add("tokenizer.ggml.pre", GgufWriter::str(pre_name(regexes)));
      w.add("tokenizer.ggml.tokens", GgufWriter::string_array(tokens));
      w.add("tokenizer.ggml.token_type", GgufWriter::array(type_ids));
      w.add("tokenizer.ggml.merges", GgufWriter::string_array(merges));
    }
    if (bos_id >= 0)
      w.add("tokenizer.ggml.bos_token_id", GgufWriter::u32(static_cast<uint32_t>(bos_id)));
    if (eos_id >= 0)
      w.add("tokenizer.ggml.eos_token_id", GgufWriter::u32(static_cast<uint32_t>(eos_id)));
    w.add("tokenizer.ggml.add_bos_token", GgufWriter::boolean(tc.value("add_bos_token", spm)));
    w.add("tokenizer.ggml.add_eos_token", GgufWriter::boolean(tc.value("add_eos_token", false)));
    add_chat_template(dir, tc, w);
  }

 private:
  // A SentencePiece model converted to tokenizer.json (BPE with byte
  // fallback, spaces written U+2581): the spaces must become U+2581 by the
  // normalizer (Replace, as older conversions do) or by a Metaspace
  // pre-tokenizer that does not split on them; returns whether a U+2581
  // is prepended (SentencePiece's dummy prefix).
  bool sentencepiece_style() const {
    const std::string space = "\xe2\x96\x81";
    bool prepend = false, replace = false;
    auto step = [&](const json& n) {
      if (n.is_null()) return;
      if (!n.is_object()) fail("a normalizer or pre-tokenizer is not an object: " + n.dump());
      const std::string type = n.value("type", "");
      if (type == "Prepend" && n.value("prepend", "") == space) {
        prepend = true;
      } else if (type == "Replace" && n.value("content", "") == space &&
                 n.value("pattern", json::object()).value("String", "") == " ") {
        replace = true;
      } else if (type == "Metaspace" && n.value("replacement", space) == space) {
        if (n.value("split", true))
          fail("a Metaspace pre-tokenizer that splits words is not supported");
        replace = true;
        prepend = n.value("prepend_scheme", std::string("always")) != "never" &&
                  n.value("add_prefix_space", true);
      } else {
        fail("SentencePiece-style BPE with a '" + type +
             "' normalizer or pre-tokenizer is not supported");
      }
    };
    for (const char* part : {"normalizer", "pre_tokenizer"}) {
      const json n = j_.value(part, json());
      if (n.is_object() && n.value("type", "") == "Sequence")
        for (const json& m :
             n.value(n.contains("normalizers") ? "normalizers" : "pretokenizers", json::array()))
          step(m);
      else
        step(n);
    }
    if (!replace) fail("SentencePiece-style BPE that does not write spaces as U+2581");
    return prepend;
  }

  // tokenizer.json keeps a SentencePiece model's merges but not its scores.
  // Hugging Face's converter ranks the merges by the merged piece's score,
  // so minus the rank of the first merge forming a piece makes
  // SentencePiece's merging (highest score first) choose as BPE's (lowest
  // rank first) does; pieces no merge forms score below every merge.
  // (llama.cpp's converter scores every piece -1000, which merges from the
  // left instead.) Byte pieces <0xXX> and the unknown piece get their types.
  void sentencepiece_scores(const std::vector<std::string>& tokens,
                            const std::vector<std::string>& merges, const json& model,
                            bool space_prefix, std::vector<int32_t>& types, GgufWriter& w) const {
    std::map<std::string, float> rank;
    for (size_t i = 0; i < merges.size(); ++i) {
      std::string piece = merges[i];
      piece.erase(piece.find(' ', 1), 1);
      rank.emplace(piece, -static_cast<float>(i));
    }
    const std::string unk = model.value("unk_token", json()).is_string()
                                ? model["unk_token"].get<std::string>()
                                : std::string();
    std::vector<float> scores(tokens.size());
    int64_t unk_id = -1;
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto it = rank.find(tokens[i]);
      scores[i] = it != rank.end() ? it->second : -1e9f;
      const std::string& t = tokens[i];
      if (t == unk) {  // often listed among the added tokens too
        types[i] = static_cast<int32_t>(TokenType::unknown);
        unk_id = static_cast<int64_t>(i);
      } else if (types[i] == static_cast<int32_t>(TokenType::normal) && t.size() == 6 &&
                 t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
                 std::isxdigit(static_cast<unsigned char>(t[3])) &&
                 std::isxdigit(static_cast<unsigned char>(t[4]))) {
        types[i] = static_cast<int32_t>(TokenType::byte);
      }
    }
    w.add("tokenizer.ggml.model", GgufWriter::str("llama"));
    w.add("tokenizer.ggml.pre", GgufWriter::str("default"));
    w.add("tokenizer.ggml.tokens", GgufWriter::string_array(tokens));
    w.add("tokenizer.ggml.scores", GgufWriter::array(scores));
    w.add("tokenizer.ggml.token_type", GgufWriter::array(types));
    if (unk_id >= 0)
      w.add("tokenizer.ggml.unknown_token_id", GgufWriter::u32(static_cast<uint32_t>(unk_id)));
    w.add("tokenizer.ggml.add_space_prefix", GgufWriter::boolean(space_prefix));
  }

  std::string path_;
  json j_;
};

// tokenizer.model, as llama.cpp's converter reads it: every piece with its
// score and type, slots past the model's pieces padded as unused.
void add_sentencepiece(const std::string& dir, std::optional<int64_t> bos,
                       std::optional<int64_t> eos, int64_t n_vocab, GgufWriter& w) {
  const std::string path = (fs::path(dir) / "tokenizer.model").string();
  SentencePieceModel m = SentencePieceModel::read(path);
  if (m.model_type != 2)
    throw Error("SentencePiece model '" + path + "': model type " + std::to_string(m.model_type) +
                " is not supported (Kiln reads BPE models, type 2)");
  const int64_t n = std::max<int64_t>(n_vocab, static_cast<int64_t>(m.pieces.size()));
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<float> scores(static_cast<size_t>(n), -10000.0f);
  std::vector<int32_t> types(static_cast<size_t>(n), static_cast<int32_t>(TokenType::unused));
  for (int64_t i = 0; i < n; ++i) {
    if (i < static_cast<int64_t>(m.pieces.size())) {
      tokens[i] = m.pieces[i].text;
      scores[i] = m.pieces[i].score;
      types[i] = m.pieces[i].type;
    } else {
      tokens[i] = "[PAD" + std::to_string(i) + "]";
    }
  }
  const json tc = tokenizer_config(dir);
  // Added tokens (tokenizer_config.json's added_tokens_decoder): a control
  // or user-defined token in its slot, the piece's or a padding one.
  const json& added = tc.value("added_tokens_decoder", json::object());
  if (!added.is_object())
    throw Error("tokenizer_config.json in '" + dir + "': added_tokens_decoder is not an object");
  for (const auto& [key, a] : added.items()) {
    char* end = nullptr;
    const long long at = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end || at < 0 || at >= n || !a.is_object() ||
        !a.value("content", json()).is_string())
      throw Error("tokenizer_config.json in '" + dir + "': added token '" + key +
                  "' is not an id below " + std::to_string(n) + " with a content string");
    std::string text = a["content"].get<std::string>();
    const bool control = a.value("special", false) || looks_special(text);
    if (!control)  // user-defined tokens are matched as text, spaces as spaces
      for (size_t p; (p = text.find("\xe2\x96\x81")) != std::string::npos;) text.replace(p, 3, " ");
    tokens[at] = text;
    scores[at] = -1000.0f;
    types[at] = static_cast<int32_t>(control ? TokenType::control : TokenType::user_defined);
  }
  auto id = [&](std::optional<int64_t> from_config, int32_t from_model) {
    const int64_t v = from_config.value_or(from_model);
    return v >= 0 && v < n ? std::optional<uint32_t>(static_cast<uint32_t>(v)) : std::nullopt;
  };
  w.add("tokenizer.ggml.model", GgufWriter::str("llama"));
  w.add("tokenizer.ggml.pre", GgufWriter::str("default"));
  w.add("tokenizer.ggml.tokens", GgufWriter::string_array(tokens));
  w.add("tokenizer.ggml.scores", GgufWriter::array(scores));
  w.add("tokenizer.ggml.token_type", GgufWriter::array(types));
  if (auto b = id(bos, m.bos_id)) w.add("tokenizer.ggml.bos_token_id", GgufWriter::u32(*b));
  if (auto e = id(eos, m.eos_id)) w.add("tokenizer.ggml.eos_token_id", GgufWriter::u32(*e));
  if (auto u = id(std::nullopt, m.unk_id))
    w.add("tokenizer.ggml.unknown_token_id", GgufWriter::u32(*u));
  w.add("tokenizer.ggml.add_bos_token", GgufWriter::boolean(tc.value("add_bos_token", true)));
  w.add("tokenizer.ggml.add_eos_token", GgufWriter::boolean(tc.value("add_eos_token", false)));
  w.add("tokenizer.ggml.add_space_prefix", GgufWriter::boolean(m.add_dummy_prefix));
  add_chat_template(dir, tc, w);
}

}  // namespace

void add_hf_tokenizer(const std::string& dir, std::optional<int64_t> bos,
                      std::optional<int64_t> eos, int64_t n_vocab, GgufWriter& w) {
  // As llama.cpp's converter: a SentencePiece model first, where there is one.
  if (fs::exists(fs::path(dir) / "tokenizer.model")) {
    try {
      return add_sentencepiece(dir, bos, eos, n_vocab, w);
    } catch (const json::exception& e) {
      throw Error("tokenizer_config.json in '" + dir + "': " + e.what());
    }
  }
  const fs::path p = fs::path(dir) / "tokenizer.json";
  if (!fs::exists(p))
    throw Error("Hugging Face folder '" + dir + "': no tokenizer.json or tokenizer.model");
  Reader r(p);
  try {
    r.add(dir, bos, eos, n_vocab, w);
  } catch (const json::exception& e) {  // a value of the wrong JSON type
    r.fail(e.what());
  }
}

}  // namespace kiln
