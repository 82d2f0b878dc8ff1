#include "models/vocab.h"

#include <algorithm>

#include "ir/error.h"
#include "models/end_of_generation.h"
#include "models/gguf.h"

namespace kiln {

int32_t Vocab::find(std::string_view text) const {
  auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

bool Vocab::is_eog(int32_t id) const { return std::binary_search(eog.begin(), eog.end(), id); }

void Vocab::finish(const std::string& source) {
  scores.resize(tokens.size(), 0.0f);
  types.resize(tokens.size(), TokenType::normal);
  ids_.clear();
  ids_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    // An empty text could never be matched and would stall the search for
    // user-defined tokens; llama.cpp renames them the same way.
    if (tokens[i].empty()) tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
    auto [it, fresh] = ids_.emplace(tokens[i], static_cast<int32_t>(i));
    if (!fresh)
      throw Error(source + ": duplicate token text '" + tokens[i] + "' (ids " +
                  std::to_string(it->second) + " and " + std::to_string(i) + ")");
  }
  eog = end_of_generation_ids(*this);
}

Vocab Vocab::from_gguf(const GgufFile& file) {
  Vocab v;
  v.model = std::string(file.get_string("tokenizer.ggml.model"));
  v.pre = std::string(file.find_string("tokenizer.ggml.pre").value_or(""));
  for (std::string_view t : file.get_string_array("tokenizer.ggml.tokens"))
    v.tokens.emplace_back(t);
  size_t n = v.tokens.size();
  auto check_length = [&](const char* key, size_t got) {
    if (got < n)
      file.fail("metadata key '" + std::string(key) + "' has " + std::to_string(got) +
                " entries for " + std::to_string(n) + " tokens");
  };
  if (auto scores = file.find_f32_array("tokenizer.ggml.scores")) {
    check_length("tokenizer.ggml.scores", scores->size());
    v.scores.assign(scores->begin(), scores->begin() + n);
  }
  if (auto types = file.find_i32_array("tokenizer.ggml.token_type")) {
    check_length("tokenizer.ggml.token_type", types->size());
    for (size_t i = 0; i < n; ++i) {
      int32_t t = (*types)[i];
      v.types.push_back(t >= 0 && t <= 6 ? static_cast<TokenType>(t) : TokenType::undefined);
    }
  }
  if (auto merges = file.find_string_array("tokenizer.ggml.merges"))
    for (std::string_view m : *merges) v.merges.emplace_back(m);

  // llama.cpp's defaults per model, then whatever the file says.
  if (v.model == "llama") {
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  }
  auto id = [&](const char* key, int32_t* out, bool required_in_range) {
    auto val = file.find_i64(key);
    if (!val) {
      if (*out >= static_cast<int64_t>(n)) *out = -1;  // a default the vocabulary lacks
      return;
    }
    if (*val < 0) {
      *out = -1;  // the usual spelling of "none"
    } else if (*val < static_cast<int64_t>(n)) {
      *out = static_cast<int32_t>(*val);
    } else if (required_in_range) {
      file.fail("metadata key '" + std::string(key) + "' = " + std::to_string(*val) +
                " is not a token id (the vocabulary has " + std::to_string(n) + " tokens)");
    }
  };
  id("tokenizer.ggml.bos_token_id", &v.bos, true);
  id("tokenizer.ggml.eos_token_id", &v.eos, true);
  id("tokenizer.ggml.unknown_token_id", &v.unk, true);
  // Some converters write a padding id one past the vocabulary; it is never
  // encoded, so it is dropped rather than refused.
  id("tokenizer.ggml.padding_token_id", &v.pad, false);
  id("tokenizer.ggml.eot_token_id", &v.eot, false);
  id("tokenizer.ggml.eom_token_id", &v.eom, false);
  id("tokenizer.ggml.fim_pad_token_id", &v.fim_pad, false);
  id("tokenizer.ggml.fim_rep_token_id", &v.fim_rep, false);
  id("tokenizer.ggml.fim_sep_token_id", &v.fim_sep, false);
  v.add_bos = file.find_bool("tokenizer.ggml.add_bos_token").value_or(v.add_bos);
  v.add_eos = file.find_bool("tokenizer.ggml.add_eos_token").value_or(v.add_eos);
  v.add_space_prefix =
      file.find_bool("tokenizer.ggml.add_space_prefix").value_or(v.add_space_prefix);
  v.finish("GGUF file '" + file.path() + "'");
  return v;
}

}  // namespace kiln
