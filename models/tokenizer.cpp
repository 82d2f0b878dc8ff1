#include "models/tokenizer.h"

#include <algorithm>

#include "ir/error.h"
#include "models/gguf.h"

namespace kiln {

namespace {

// A stretch of the input: plain text, or a token matched as itself.
struct Fragment {
  int32_t token;  // -1 for text
  size_t offset, length;
};

// "<0xAB>" -> 0xAB; -1 when the text is not a byte token's.
int byte_of(std::string_view text) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  for (int32_t id = 0; id < vocab_.size(); ++id) {
    const TokenType t = vocab_.types[id];
    if (t == TokenType::user_defined) user_defined_.push_back(id);
    if ((t == TokenType::user_defined || t == TokenType::control || t == TokenType::unknown) &&
        !vocab_.tokens[id].empty())
      special_.push_back(id);
  }
  // Longer tokens first, so one that contains another wins (as in llama.cpp).
  for (auto* list : {&user_defined_, &special_})
    std::stable_sort(list->begin(), list->end(), [&](int32_t a, int32_t b) {
      return vocab_.tokens[a].size() > vocab_.tokens[b].size();
    });
}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  Vocab v = Vocab::from_gguf(file);
  if (v.model == "gpt2" && !file.has("tokenizer.ggml.merges"))
    file.fail("missing metadata key 'tokenizer.ggml.merges' (a gpt2 tokenizer needs its merges)");
  try {
    return create(std::move(v));
  } catch (const Error& e) {
    file.fail(e.what());
  }
}

std::unique_ptr<Tokenizer> Tokenizer::create(Vocab vocab) {
  if (vocab.model == "llama") return make_spm_tokenizer(std::move(vocab));
  if (vocab.model == "gpt2") return make_bpe_tokenizer(std::move(vocab));
  throw Error("unsupported tokenizer model '" + vocab.model +
              "' (Kiln reads llama = SentencePiece and gpt2 = byte-level BPE)");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos) {
    if (vocab_.bos < 0) throw Error("cannot add BOS: the vocabulary has no BOS token");
    out.push_back(vocab_.bos);
  }
  if (text.empty()) return out;
  // Cut the text at every user-defined token (and control token, parsing
  // special ones), longest tokens first, each one splitting what the longer
  // ones left as text.
  std::vector<Fragment> frags = {{-1, 0, text.size()}}, next;
  for (int32_t id : parse_special ? special_ : user_defined_) {
    const std::string& tok = vocab_.tokens[id];
    if (text.find(tok) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.offset, end = f.offset + f.length;
      while (true) {
        size_t hit = text.substr(0, end).find(tok, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, pos, hit - pos});
        next.push_back({id, hit, tok.size()});
        pos = hit + tok.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags.swap(next);
  }
  bool after_special = true;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_text(text.substr(f.offset, f.length), after_special, &out);
      after_special = false;
    }
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  if (id < 0 || id >= vocab_.size())
    throw Error("token id " + std::to_string(id) + " is out of range (the vocabulary has " +
                std::to_string(vocab_.size()) + " tokens)");
  const std::string& text = vocab_.tokens[id];
  switch (vocab_.types[id]) {
    case TokenType::normal: return normal_piece(id);
    case TokenType::user_defined: return text;
    case TokenType::control:
    case TokenType::unknown: return special ? text : std::string();
    case TokenType::byte: {
      int b = byte_of(text);
      return b < 0 ? std::string() : std::string(1, static_cast<char>(b));
    }
    default: return std::string();  // unused and undefined tokens stand for nothing
  }
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id);
    TokenType t = vocab_.types[id];
    if (first && (t == TokenType::control || t == TokenType::unknown)) continue;
    if (first && strips_leading_space() && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    first = false;
    out += piece;
  }
  return out;
}

}  // namespace kiln
