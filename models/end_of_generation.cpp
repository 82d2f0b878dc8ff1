#include "models/end_of_generation.h"

#include <algorithm>
#include <string_view>

#include "models/vocab.h"

namespace kiln {

namespace {

bool one_of(std::string_view text, std::initializer_list<std::string_view> texts) {
  return std::find(texts.begin(), texts.end(), text) != texts.end();
}

// Texts of tokens that end a generation wherever they appear.
bool is_end_marker(std::string_view t) {
  return one_of(t, {"<|eot_id|>",
                    "<|im_end|>",
                    "<|end|>",
                    "<|return|>",
                    "<|call|>",
                    "<|flush|>",
                    "<|calls|>",
                    "<end_of_turn>",
                    "<|endoftext|>",
                    "</s>",
                    "<|eom_id|>",
                    "<EOT>",
                    "_<EOT>",
                    "[EOT]",
                    "[EOS]",
                    "<|end_of_text|>",
                    "<end_of_utterance>",
                    "<eos>",
                    "<turn|>",
                    "<|tool_response>",
                    "<｜end▁of▁sentence｜>",
                    "[e~["});
}

// A role's id from the metadata, else the first token (in id order) whose
// text is one of `texts`.
int32_t by_text(const Vocab& v, int32_t from_metadata,
                std::initializer_list<std::string_view> texts) {
  if (from_metadata >= 0) return from_metadata;
  for (int32_t id = 0; id < v.size(); ++id)
    if (one_of(v.tokens[static_cast<size_t>(id)], texts)) return id;
  return -1;
}

}  // namespace

std::vector<int32_t> end_of_generation_ids(const Vocab& v) {
  std::vector<int32_t> ids;
  // The end-of-turn and end-of-message texts are end markers too: their ids
  // count only as the metadata gives them; the FIM roles are also found by
  // their texts.
  for (int32_t id :
       {by_text(v, v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}),
        by_text(v, v.fim_rep,
                {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}),
        by_text(v, v.fim_sep, {"<|file_sep|>"}), v.eos, v.eot, v.eom})
    if (id >= 0) ids.push_back(id);
  for (int32_t id = 0; id < v.size(); ++id)
    if (is_end_marker(v.tokens[static_cast<size_t>(id)])) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  auto with_text = [&](std::string_view t) {
    return std::find_if(ids.begin(), ids.end(), [&](int32_t id) { return v.tokens[id] == t; });
  };
  auto drop = [&](std::vector<int32_t>::iterator it) {
    if (it != ids.end()) ids.erase(it);
  };
  // GPT-OSS (and Solar Open): <|end|> closes a message between channels.
  const bool has_call = with_text("<|call|>") != ids.end() || with_text("<|calls|>") != ids.end();
  if (has_call && (with_text("<|return|>") != ids.end() || with_text("<|flush|>") != ids.end()))
    drop(with_text("<|end|>"));
  // Gemma 4 and PLaMo use </s> as a normal token.
  if (with_text("<|tool_response>") != ids.end() || with_text("<|plamo:eos|>") != ids.end())
    drop(with_text("</s>"));
  return ids;
}

}  // namespace kiln
