// A conversation laid out as the model's chat template lays it out, for
// `kiln serve`'s /v1/chat/completions.
//
// A model's tokenizer.chat_template is Jinja. Kiln does not run Jinja;
// like llama.cpp's llama_chat_apply_template, it recognises the template
// family by marks in its text (or by name: "chatml", "llama3", ...) and
// writes that family's layout itself, byte for byte as llama.cpp does
// (tests/models/chat_template_llamacpp.py checks each family against it).
// A template no family matches is an error naming the families.
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct ChatMessage {
  std::string role;  // system, user, assistant (others as the family allows)
  std::string content;
};

// The family of `tmpl` (a template's text, or a family's name): "chatml",
// "llama3", ...; throws kiln::Error for one Kiln does not know.
std::string chat_template_family(const std::string& tmpl);

// The messages in `family`'s layout; with add_assistant, the assistant's
// turn opened after them.
std::string apply_chat_template(const std::string& family, const std::vector<ChatMessage>& messages,
                                bool add_assistant);

// The family names Kiln knows, for messages and tests.
const std::vector<std::string>& chat_template_families();

// What a --chat-template / --template option names: a family's name as it
// is, else the text of the template file at that path.
std::string chat_template_option(const std::string& name_or_path);

}  // namespace kiln
