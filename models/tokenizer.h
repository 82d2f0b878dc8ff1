// Text to token ids and back, for the vocabularies GGUF files carry.
//
// Token ids must match the ones a model was trained with, so encoding
// follows llama.cpp exactly (its test vectors are Kiln's tests):
// SentencePiece (`tokenizer.ggml.model` = llama) merges the highest-scoring
// pairs with byte fallback; byte-level BPE (gpt2) cuts words with the
// vocabulary's pre-tokenizer and merges by rank. Both first cut the text at
// user-defined tokens, which always encode as themselves; control tokens
// (BOS, EOS, ...) in the text are plain text. Decoding is the exact inverse
// for both (no clean-up of spaces), skipping control tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/vocab.h"

namespace kiln {

class GgufFile;

class Tokenizer {
 public:
  virtual ~Tokenizer();

  // The tokenizer `tokenizer.ggml.model` names. Throws kiln::Error naming
  // the file for missing or malformed metadata and unsupported models.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  static std::unique_ptr<Tokenizer> create(Vocab vocab);

  // add_bos prepends the BOS token (an error when the vocabulary has none).
  // parse_special: control tokens' texts in `text` are those tokens (as
  // llama.cpp's parse_special: a chat template's layout), not plain text.
  std::vector<int32_t> encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const;
  // The concatenated pieces of the ids, without control tokens. A
  // SentencePiece vocabulary's dummy space prefix is removed from the first
  // piece, so decode(encode(s)) == s for any s the vocabulary covers.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes one token stands for. Control and unknown tokens give "" unless
  // `special`, which gives their text. Throws for ids out of range.
  std::string token_to_piece(int32_t id, bool special = false) const;

  int32_t vocab_size() const { return vocab_.size(); }
  int32_t bos_id() const { return vocab_.bos; }  // -1 when none
  int32_t eos_id() const { return vocab_.eos; }
  // Whether `id` ends a generation: EOS, or another end-of-turn token
  // (models/end_of_generation.h).
  bool is_eog(int32_t id) const { return vocab_.is_eog(id); }
  int32_t unk_id() const { return vocab_.unk; }
  // Whether the model expects BOS (tokenizer.ggml.add_bos_token).
  bool add_bos_default() const { return vocab_.add_bos; }
  const Vocab& vocab() const { return vocab_; }

 protected:
  explicit Tokenizer(Vocab vocab);
  // Encodes text that holds no user-defined token. `after_special`: the text
  // starts the input or follows a token matched as itself.
  virtual void encode_text(std::string_view text, bool after_special,
                           std::vector<int32_t>* out) const = 0;
  // The bytes of a normal token.
  virtual std::string normal_piece(int32_t id) const = 0;
  virtual bool strips_leading_space() const { return false; }

  Vocab vocab_;

 private:
  std::vector<int32_t> user_defined_;  // longest text first
  std::vector<int32_t> special_;       // user-defined, control and unknown: longest first
};

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);
// Throws kiln::Error for a pre-tokenizer (vocab.pre) Kiln does not implement.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab);

}  // namespace kiln
