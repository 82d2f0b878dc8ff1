// A tokenizer's data as GGUF stores it: token texts, scores, types, merges
// and the special token ids.
//
// The GGUF metadata (tokenizer.ggml.*) is read once into this plain struct,
// checked for consistency (array lengths, ids in range, duplicate texts), and
// then handed to the tokenizer that the `model` names. Tests build small
// vocabularies by hand with the same struct.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/string_map.h"

namespace kiln {

class GgufFile;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

struct Vocab {
  std::string model;  // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;    // tokenizer.ggml.pre; "" when absent
  std::vector<std::string> tokens;
  std::vector<float> scores;                       // per token; 0 when the file has none
  std::vector<TokenType> types;                    // per token; normal when the file has none
  std::vector<std::string> merges;                 // BPE: "left right", highest priority first
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;  // -1: none
  // End of turn and of message, fill-in-the-middle pad, repo and file
  // separator, as the metadata names them (-1: not named).
  int32_t eot = -1, eom = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  // The ids that end a generation (models/end_of_generation.h), sorted; set
  // by finish().
  std::vector<int32_t> eog;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SentencePiece's dummy prefix

  // Reads tokenizer.ggml.* with llama.cpp's defaults. Throws kiln::Error
  // naming the file and key for missing or inconsistent data.
  static Vocab from_gguf(const GgufFile& file);

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  int32_t find(std::string_view text) const;  // -1 when no token has this text
  bool is_eog(int32_t id) const;
  // Fills the missing scores/types and the text index; call after filling
  // `tokens` by hand. Throws on duplicate texts. `source` names the origin in messages.
  void finish(const std::string& source);

 private:
  StringMap<int32_t> ids_;
};

}  // namespace kiln
