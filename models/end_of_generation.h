// Which tokens end a generation, as llama.cpp decides it.
//
// A vocabulary names one EOS, but chat models end their turns with other
// tokens (Llama 3's <|eot_id|>, Qwen's <|im_end|>, GPT-OSS's <|return|> and
// <|call|>), and a generation that runs past them writes the next turn
// itself. llama.cpp's answer, which every GGUF is made for, is a set of
// end-of-generation ids: EOS, the end-of-turn and end-of-message ids (from
// the metadata, else found by their texts), the fill-in-the-middle pad,
// repo and file-separator ids, and every token whose text is an end marker;
// with GPT-OSS's <|return|> and <|call|> present, <|end|> ends a message, not
// the generation. Kiln reads the same set so that a run stops where
// llama.cpp's stops (tests/models/eog_llamacpp.py compares them on llama.cpp's
// vocabularies).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

struct Vocab;

// The end-of-generation ids of `v`, sorted (its eos, eot, eom and FIM ids
// as read from the metadata, -1 where absent).
std::vector<int32_t> end_of_generation_ids(const Vocab& v);

}  // namespace kiln
