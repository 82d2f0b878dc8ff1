#include "models/jinja/template.h"

#include "models/jinja/interpreter.h"
#include "models/jinja/parser.h"
#include "models/jinja/value.h"

namespace kiln {

JinjaTemplate::JinjaTemplate(std::string text)
    : text_(std::move(text)), program_(jinja::parse(text_)) {}
JinjaTemplate::~JinjaTemplate() = default;
JinjaTemplate::JinjaTemplate(JinjaTemplate&&) noexcept = default;
JinjaTemplate& JinjaTemplate::operator=(JinjaTemplate&&) noexcept = default;

std::string JinjaTemplate::render(const nlohmann::ordered_json& context,
                                  const JinjaRenderOptions& options) const {
  if (!context.is_object()) throw Error("chat template context must be a JSON object");
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  jinja::RenderLimits limits;
  limits.max_output = options.max_output;
  limits.max_steps = options.max_steps;
  jinja::Interpreter in(*program_, now, limits);
  try {
    return in.render(jinja::from_json(context));
  } catch (const jinja::RuntimeError& e) {
    // Raised outside any statement (cannot happen for a parsed template,
    // but never let the internal type escape).
    throw Error(std::string("chat template: ") + e.what());
  }
}

}  // namespace kiln
