// The pre-tokenizers of byte-level BPE: text to words before merging.
//
// A BPE vocabulary is trained on words cut by a regex, and merges never
// cross a word boundary, so encoding must cut exactly the same words or the
// ids differ. `tokenizer.ggml.pre` names the regex set; these are llama.cpp's
// definitions of them, hand-written over Unicode categories (no regex
// engine): each regex of a set splits every piece left by the previous ones
// into its matches and the gaps between them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class BpePreTokenizer {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  gpt2,
  // [\p{P}\$\+<=>\^~\|]+, then gpt2, then \p{N}+, then [0-9][0-9][0-9]
  llama_default,
  // [\r\n], \s?\p{L}+, \s?\p{P}+, [一-龥ࠀ-一가-퟿]+, \p{N}
  deepseek_coder,
  // [\r\n], \s?[its listed cased scripts]+, \s?[ASCII and fullwidth
  // punctuation]+, \s+$, [一-龥ࠀ-一가-퟿]+, \p{N}+
  deepseek_llm,
  // [\p{P}\$\+<=>\^~\|`]+, then gpt2, then [0-9][0-9][0-9]
  falcon,
  // \p{N} (one digit at a time), then gpt2 (starcoder, refact, command-r, smollm)
  starcoder,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  llama3,
  // the same with \p{N} (one digit at a time)
  qwen2,
  // OpenAI's o200k (GPT-4o, GPT-OSS): llama3's with words cut at a change
  // from lower to upper case ("HelloWorld" -> "Hello", "World")
  o200k,
};

// The pre-tokenizer for a tokenizer.ggml.pre value ("" means llama.cpp's
// default). Throws kiln::Error listing the supported names otherwise.
BpePreTokenizer find_bpe_pre_tokenizer(std::string_view name);

// Words of `text` in order; their concatenation is the text, except that
// invalid UTF-8 bytes come back as U+FFFD (as in llama.cpp).
std::vector<std::string> pre_tokenize(BpePreTokenizer kind, std::string_view text);

}  // namespace kiln
