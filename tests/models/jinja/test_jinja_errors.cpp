// What Kiln's Jinja interpreter refuses, and how: a syntax error, an
// unknown filter, test or tag, or a tag Kiln does not run fails when the
// template is parsed, naming the construct and its line; a failure while
// rendering names the line of the statement; raise_exception's message
// reaches the caller as it is (JinjaRaised); and the guards (call depth,
// nesting, steps, output size) turn a runaway template into an error.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "ir/error.h"
#include "models/jinja/template.h"

using kiln::JinjaTemplate;
using json = nlohmann::ordered_json;

namespace {

std::string render(const std::string& tmpl, const json& ctx = json::object(),
                   kiln::JinjaRenderOptions o = {}) {
  return JinjaTemplate(tmpl).render(ctx, o);
}

}  // namespace

TEST_CASE("Jinja: parse errors name the construct and the line", "[models][jinja]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(JinjaTemplate("line 1\n{{ x | wordwrap }}"),
                    "chat template line 2: unknown filter 'wordwrap'");
  CHECK_THROWS_WITH(JinjaTemplate("a\n\n{% if x is frobnicated %}{% endif %}"),
                    "chat template line 3: unknown test 'frobnicated'");
  CHECK_THROWS_WITH(JinjaTemplate("{% frob %}"), "chat template line 1: unknown tag 'frob'");
  CHECK_THROWS_WITH(JinjaTemplate("a\n{% include 'other.jinja' %}"),
                    "chat template line 2: the 'include' tag is not supported in chat templates");
  CHECK_THROWS_WITH(JinjaTemplate("{% extends 'base' %}"),
                    Contains("'extends' tag is not supported"));
  CHECK_THROWS_WITH(JinjaTemplate("{% do xs.append(1) %}"), Contains("'do' tag is not supported"));
  CHECK_THROWS_WITH(JinjaTemplate("{% if x %}\nno end"),
                    Contains("unexpected end of template: expected 'elif' or 'else' or 'endif'"));
  CHECK_THROWS_WITH(JinjaTemplate("{% for x in xs %}{% endif %}"), Contains("unknown tag 'endif'"));
  CHECK_THROWS_WITH(JinjaTemplate("x\n{{ 'open }}"),
                    "chat template line 2: unterminated string literal");
  CHECK_THROWS_WITH(JinjaTemplate("{# never closed"), Contains("missing end of comment tag"));
  CHECK_THROWS_WITH(JinjaTemplate("{{ x "), Contains("{{ ... }} is not closed"));
  CHECK_THROWS_WITH(JinjaTemplate("{{ 1 + }}"), Contains("unexpected end of print statement"));
  CHECK_THROWS_WITH(JinjaTemplate("{{ a $ b }}"), Contains("unexpected character '$'"));
  CHECK_THROWS_WITH(JinjaTemplate("{% for x in xs recursive %}{% endfor %}"),
                    Contains("recursive for loops are not supported"));
  CHECK_THROWS_WITH(JinjaTemplate("{{ f(*xs) }}"), Contains("*args and **kwargs"));
  CHECK_THROWS_WITH(JinjaTemplate("{% set true = 1 %}"), Contains("cannot assign to 'true'"));
  CHECK_THROWS_WITH(JinjaTemplate("{{ x is defined is defined }}"),
                    Contains("cannot chain multiple tests"));
}

TEST_CASE("Jinja: render errors name the line of their statement", "[models][jinja]") {
  CHECK_THROWS_WITH(render("a\nb\n{{ 1 / 0 }}"), "chat template line 3: division by zero");
  const json ctx = {{"messages", json::array({{{"role", "user"}}})}};
  CHECK_THROWS_WITH(render("{% for m in messages %}\n{{ m.x.y }}\n{% endfor %}", ctx),
                    "chat template line 2: 'dict object' has no attribute 'x'");
  CHECK_THROWS_WITH(render("\n\n{% set a, b = 'xyz' %}"),
                    "chat template line 3: too many values to unpack (expected 2)");
  CHECK_THROWS_WITH(render("{{ 'x' ~ nope.y }}"), "chat template line 1: 'nope' is undefined");
}

TEST_CASE("Jinja: raise_exception's message reaches the caller as it is", "[models][jinja]") {
  try {
    render("\n{{ raise_exception('Conversation roles must alternate user/assistant') }}");
    FAIL("rendered");
  } catch (const kiln::JinjaRaised& e) {
    CHECK(std::string(e.what()) == "Conversation roles must alternate user/assistant");
  }
  // JinjaRaised is a kiln::Error: tools that print kiln::Error print it.
  CHECK_THROWS_AS(render("{{ raise_exception('no') }}"), kiln::Error);
}

TEST_CASE("Jinja: runaway templates fail instead of hanging or exhausting memory",
          "[models][jinja]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
                    Contains("maximum recursion depth exceeded"));
  kiln::JinjaRenderOptions few_steps;
  few_steps.max_steps = 100000;
  CHECK_THROWS_WITH(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                           "{% endfor %}",
                           json::object(), few_steps),
                    Contains("too many steps"));
  kiln::JinjaRenderOptions small;
  small.max_output = 1 << 20;
  CHECK_THROWS_WITH(
      render("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", json::object(), small),
      Contains("exceeds 1048576 bytes"));
  CHECK_THROWS_WITH(render("{{ 'x' * 1000000000000 }}"), Contains("too large"));
  CHECK_THROWS_WITH(render("{{ 2 ** 64 }}"), Contains("integer overflow"));
  CHECK_THROWS_WITH(
      JinjaTemplate("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"),
      Contains("nests too deeply"));
  CHECK_THROWS_WITH(JinjaTemplate(std::string(1000, '{') + std::string(1000, '}')),
                    Contains("nests too deeply"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  CHECK_THROWS_WITH(JinjaTemplate(ifs), Contains("nests too deeply"));
  // A namespace holding itself is freed with the render (ASan would report it).
  CHECK(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}") ==
        "True");
}

TEST_CASE("Jinja: the context must be an object and is read as JSON", "[models][jinja]") {
  CHECK_THROWS_WITH(JinjaTemplate("x").render(json::array()), Catch::Contains("JSON object"));
  CHECK(render("{{ n }} {{ f }} {{ big }} {{ s }}",
               json::parse(R"({"n": 3, "f": 2.0, "big": 18446744073709551615, "s": "\u00e9"})")) ==
        "3 2.0 1.8446744073709552e+19 \xc3\xa9");
}
