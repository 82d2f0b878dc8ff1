// Kiln's public entry to chat templates written in Jinja: a model's
// tokenizer.chat_template (from a GGUF, or a Hugging Face
// tokenizer_config.json) parsed once and rendered for each conversation,
// byte for byte as Hugging Face transformers renders it with Python's
// jinja2 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, its tojson, raise_exception and strftime_now, the
// {% generation %} tag). Everything behind this header lives in
// kiln::jinja; callers need only this class.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ir/error.h"

namespace kiln {

namespace jinja {
struct Program;
}

// What raise_exception(msg) in a template throws: what() is msg exactly, so
// a server can hand the template's own refusal to the client (a bad
// request, not a server fault).
class JinjaRaised : public Error {
 public:
  explicit JinjaRaised(const std::string& message) : Error(message) {}
};

struct JinjaRenderOptions {
  // The time strftime_now() formats; unset: the local time at render.
  std::optional<std::tm> now;
  size_t max_output = 64u << 20;    // bytes of rendered text before refusing
  uint64_t max_steps = 50'000'000;  // statements and expressions evaluated
};

class JinjaTemplate {
 public:
  // Parses `text`; throws kiln::Error naming the line of a syntax error or
  // of a construct Kiln does not run.
  explicit JinjaTemplate(std::string text);
  ~JinjaTemplate();
  JinjaTemplate(JinjaTemplate&&) noexcept;
  JinjaTemplate& operator=(JinjaTemplate&&) noexcept;

  // Renders with the keys of `context` (an object) as the template's
  // variables. Throws JinjaRaised for raise_exception(), kiln::Error
  // ("chat template line N: ...") for any other failure.
  std::string render(const nlohmann::ordered_json& context,
                     const JinjaRenderOptions& options = {}) const;

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::unique_ptr<jinja::Program> program_;
};

}  // namespace kiln
