// A conversation laid out as the model's chat template lays it out, for
// `kiln serve`'s /v1/chat/completions and `kiln tokenize --chat`.
//
// A model's tokenizer.chat_template is Jinja: render_chat_template runs it
// (models/jinja/template.h) with the variables Hugging Face transformers
// gives it, so the text matches apply_chat_template's byte for byte
// (tests/models/chat_template_jinja.py checks real templates against
// Python's jinja2). Beside that, Kiln keeps llama.cpp's hand-written
// family layouts, selected by name ("chatml", "llama3", ...) for a model
// that has no template: apply_chat_template writes them byte for byte as
// llama_chat_apply_template does (tests/models/chat_template_llamacpp.py).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/jinja/template.h"

namespace kiln {

struct ChatMessage {
  std::string role;  // system, user, assistant (others as the family allows)
  std::string content;
};

// The family of `tmpl` (a family's name, or a template's text recognised by
// the marks llama.cpp detects it by): "chatml", "llama3", ...; throws
// kiln::Error for one Kiln does not know.
std::string chat_template_family(const std::string& tmpl);

// Whether `name` is one of the family names below.
bool is_chat_template_family(const std::string& name);

// The messages in `family`'s layout; with add_assistant, the assistant's
// turn opened after them.
std::string apply_chat_template(const std::string& family, const std::vector<ChatMessage>& messages,
                                bool add_assistant);

// The family names Kiln knows, for messages and tests.
const std::vector<std::string>& chat_template_families();

// What a --chat-template / --template option names: a family's name as it
// is, else the text of the template file at that path.
std::string chat_template_option(const std::string& name_or_path);

// A Jinja chat template rendered for an OpenAI-style conversation, with
// the variables transformers' apply_chat_template passes: messages (as
// given: roles, string or list contents, tool_calls, tool_call_id, ...),
// tools (the list, or None when `tools` is null), documents (None),
// add_generation_prompt, bos_token, eos_token, and then every key of
// `extra` (an object or null, e.g. {"enable_thinking": false}), which
// override the others. Throws JinjaRaised when the template calls
// raise_exception (its message as what()), kiln::Error for anything else.
std::string render_chat_template(const JinjaTemplate& tmpl, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::ordered_json& extra = nullptr,
                                 const JinjaRenderOptions& options = {});
// The same from the template's text (parsed on each call; keep a
// JinjaTemplate to render many conversations).
std::string render_chat_template(const std::string& template_text,
                                 const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::ordered_json& extra = nullptr,
                                 const JinjaRenderOptions& options = {});

}  // namespace kiln
