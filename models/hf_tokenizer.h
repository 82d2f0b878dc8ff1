// A Hugging Face tokenizer (tokenizer.model or tokenizer.json, with
// tokenizer_config.json) as the tokenizer.ggml.* metadata llama.cpp's
// converter writes, so the folder's tokenizer is built by the same code as
// a GGUF file's (models/tokenizer.h).
//
// As in the converter, a SentencePiece tokenizer.model comes first where
// there is one (Llama 2, Mistral, TinyLlama: models/sentencepiece_model.h).
// From tokenizer.json, byte-level BPE vocabularies are read: model.vocab, model.merges (either
// spelling), added_tokens (special ones become control tokens), and the
// pre-tokenizer, recognised by its regexes as one of the named sets of
// models/bpe_pretokenizer.h. BOS/EOS come from config.json's ids when it
// has them, else from tokenizer_config.json's token texts. With a
// tokenizer.model, tokenizer_config.json's added_tokens_decoder names its
// slots' control and user-defined tokens. The chat templates (also from
// chat_template.json or chat_template.jinja, one or a named list) are kept
// as tokenizer.chat_template[.<name>].
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "models/gguf_writer.h"

namespace kiln {

// Adds the tokenizer.* keys for the folder `dir` to w; n_vocab (the
// embedding's rows) pads the vocabulary as llama.cpp does. Throws
// kiln::Error naming the file and what it cannot read.
void add_hf_tokenizer(const std::string& dir, std::optional<int64_t> bos,
                      std::optional<int64_t> eos, int64_t n_vocab, GgufWriter& w);

}  // namespace kiln
