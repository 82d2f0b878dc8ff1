// Kiln's Jinja interpreter against Python's jinja2: every construct chat
// templates use (whitespace control, statements, expressions, filters,
// tests, str/dict/list methods, globals, tojson, Undefined) rendered from a
// snippet, compared with the text jinja2 renders under transformers' setup
// (cases.inc, written by make_cases.py from Python, never from Kiln). Cases
// Python refuses must fail in Kiln with Python's message; raise_exception's
// as JinjaRaised with the message exactly.
#include <catch2/catch.hpp>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "ir/error.h"
#include "models/jinja/template.h"

namespace {

struct JinjaCase {
  const char* tmpl;
  const char* context;  // the variables, a JSON object
  const char* want;     // the text, or Python's error message
  bool renders;
};

#include "cases.inc"  // kJinjaCases_<topic>[]: the cases and what Python renders

// make_cases.py's strftime_now clock: 2024-07-26 10:30:00 (a Friday).
kiln::JinjaRenderOptions fixed_clock() {
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 10;
  tm.tm_min = 30;
  std::tm copy = tm;
  timegm(&copy);
  tm.tm_wday = copy.tm_wday;
  tm.tm_yday = copy.tm_yday;
  kiln::JinjaRenderOptions o;
  o.now = tm;
  return o;
}

template <size_t N>
void check(const JinjaCase (&cases)[N]) {
  for (const JinjaCase& c : cases) {
    INFO("template: " << c.tmpl << "\nvariables: " << c.context);
    const auto context = nlohmann::ordered_json::parse(c.context);
    if (c.renders) {
      CHECK(kiln::JinjaTemplate(c.tmpl).render(context, fixed_clock()) == c.want);
    } else if (std::string(c.tmpl).find("raise_exception") != std::string::npos) {
      try {
        kiln::JinjaTemplate(c.tmpl).render(context, fixed_clock());
        FAIL("rendered, but Python refuses: " << c.want);
      } catch (const kiln::JinjaRaised& e) {
        CHECK(std::string(e.what()) == c.want);
      }
    } else {
      CHECK_THROWS_WITH(kiln::JinjaTemplate(c.tmpl).render(context, fixed_clock()),
                        Catch::Contains(c.want));
    }
  }
}

}  // namespace

TEST_CASE("Jinja: whitespace control as trim_blocks and lstrip_blocks", "[models][jinja]") {
  check(kJinjaCases_whitespace);
}

TEST_CASE("Jinja: if, for, set, namespace, macro, call, filter, with, generation",
          "[models][jinja]") {
  check(kJinjaCases_statements);
}

TEST_CASE("Jinja: expressions, literals and Python's printing of values", "[models][jinja]") {
  check(kJinjaCases_expressions);
}

TEST_CASE("Jinja: filters", "[models][jinja]") { check(kJinjaCases_filters); }

TEST_CASE("Jinja: tojson is transformers' json.dumps", "[models][jinja]") {
  check(kJinjaCases_tojson);
}

TEST_CASE("Jinja: tests", "[models][jinja]") { check(kJinjaCases_tests); }

TEST_CASE("Jinja: str, dict and list methods", "[models][jinja]") { check(kJinjaCases_methods); }

TEST_CASE("Jinja: printf-style % and the format filter; jinja2's quirks", "[models][jinja]") {
  check(kJinjaCases_formatting);
}

TEST_CASE("Jinja: globals (range, dict, namespace, strftime_now, joiner)", "[models][jinja]") {
  check(kJinjaCases_globals);
}

TEST_CASE("Jinja: Undefined as jinja2's default Undefined", "[models][jinja]") {
  check(kJinjaCases_undefined);
}

TEST_CASE("Jinja: errors carry Python's message", "[models][jinja]") { check(kJinjaCases_errors); }
