// A SentencePiece model file (tokenizer.model), the tokenizer of Llama 2,
// Mistral, TinyLlama and Gemma checkpoints.
//
// The file is a protobuf ModelProto; Kiln reads the few fields llama.cpp's
// converter takes from it (every piece's text, score and type; the model
// type, byte fallback and the ids of the special pieces; whether a space is
// prefixed) with a small wire-format reader, so no protobuf library is
// needed. Every length and offset is checked against the bytes that remain:
// a damaged file is an error naming it, never a read out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct SentencePieceModel {
  struct Piece {
    std::string text;
    float score = 0;
    int32_t type = 1;  // NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6
  };
  std::vector<Piece> pieces;
  int32_t model_type = 1;  // UNIGRAM 1, BPE 2, WORD 3, CHAR 4
  bool byte_fallback = false;
  bool add_dummy_prefix = true;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2;

  // Throws kiln::Error naming `name` (the path) and what is wrong.
  static SentencePieceModel parse(std::string_view bytes, const std::string& name);
  static SentencePieceModel read(const std::string& path);
};

}  // namespace kiln
