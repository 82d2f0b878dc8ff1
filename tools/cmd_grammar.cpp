// `kiln grammar`: a grammar (GBNF, a JSON schema or the json_object mode)
// compiled against a model's vocabulary, then either sampled by random
// walks over the allowed tokens (the test of tests/models/grammar_schemas.py:
// every walk must parse and validate) or timed (--bench: compile time and
// the per-token cost of the mask, the numbers the sampler pays).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "ir/error.h"
#include "models/grammar/gbnf.h"
#include "models/grammar/json_schema.h"
#include "models/grammar/matcher.h"
#include "models/hf_checkpoint.h"
#include "models/read_file.h"
#include "models/tokenizer.h"
#include "tools/cli.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// Where a JSON text stands, for sorting mask times: inside a string value,
// at or inside an object key, inside a number, or elsewhere.
class JsonPosition {
 public:
  void feed(std::string_view bytes) {
    for (char c : bytes) step(c);
  }
  const char* kind() const {
    if (in_string_) return key_ ? "key" : "string";
    if (in_number_) return "number";
    if (!stack_.empty() && stack_.back() == '{' && expect_key_) return "key";
    return "other";
  }

 private:
  void step(char c) {
    if (in_string_) {
      if (escaped_)
        escaped_ = false;
      else if (c == '\\')
        escaped_ = true;
      else if (c == '"')
        in_string_ = false;
      return;
    }
    in_number_ = (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
    if (c == '"') {
      in_string_ = true;
      key_ = !stack_.empty() && stack_.back() == '{' && expect_key_;
      expect_key_ = false;
    } else if (c == '{' || c == '[') {
      stack_.push_back(c);
      expect_key_ = c == '{';
    } else if ((c == '}' || c == ']') && !stack_.empty()) {
      stack_.pop_back();
      expect_key_ = false;
    } else if (c == ',') {
      expect_key_ = !stack_.empty() && stack_.back() == '{';
    }
  }
  std::string stack_;
  bool in_string_ = false, escaped_ = false, key_ = false, in_number_ = false, expect_key_ = false;
};

struct Walk {
  std::string text;
  int tokens = 0;
  bool ended = false;
};

// One random walk. Each step either takes any allowed token, uniformly (for
// variety), or, among a few random short ones, the one that leaves the
// fewest bytes to the end (so strings close and lists stop), and takes an
// end token often once one is allowed.
Walk random_walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng,
                 int max_tokens, std::vector<double>* mask_us,
                 std::vector<std::string>* mask_kinds) {
  const TokenVocabulary& v = g->vocab();
  GrammarMatcher m(g);
  JsonPosition where;
  std::vector<uint32_t> mask;
  std::vector<int32_t> allowed, shorts;
  Walk w;
  for (; w.tokens < max_tokens; ++w.tokens) {
    const auto t0 = Clock::now();
    m.fill_mask(&mask);
    if (mask_us) mask_us->push_back(us_since(t0));
    if (mask_kinds) mask_kinds->push_back(where.kind());
    if (m.can_end() && (m.is_done() || rng() % 3 == 0)) {
      m.accept(v.end_tokens()[0]);
      w.ended = true;
      return w;
    }
    allowed.clear();
    shorts.clear();
    for (size_t i = 0; i < mask.size(); ++i)
      for (uint32_t bits = mask[i]; bits; bits &= bits - 1) {
        const int32_t t = static_cast<int32_t>(i * 32 + static_cast<size_t>(__builtin_ctz(bits)));
        if (v.is_end(t)) continue;
        allowed.push_back(t);
        if (v.piece(t).size() <= 2) shorts.push_back(t);
      }
    if (allowed.empty()) throw Error("grammar walk: no token is allowed after '" + w.text + "'");
    int32_t pick = allowed[rng() % allowed.size()];
    if (rng() % 5 < 3) {
      const std::vector<int32_t>& pool = shorts.empty() ? allowed : shorts;
      size_t best = SIZE_MAX;
      for (int i = 0; i < 8; ++i) {
        const int32_t t = pool[rng() % pool.size()];
        GrammarMatcher probe = m;
        probe.accept(t);
        const size_t left = probe.min_bytes_to_end();
        if (left < best) best = left, pick = t;
      }
    }
    if (!m.accept(pick)) throw Error("grammar walk: an allowed token was refused");
    w.text += v.piece(pick);
    where.feed(v.piece(pick));
  }
  return w;
}

std::string quantiles(std::vector<double> t) {
  if (t.empty()) return "null";
  std::sort(t.begin(), t.end());
  auto q = [&](double f) { return t[std::min(t.size() - 1, static_cast<size_t>(f * t.size()))]; };
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"steps\": %zu, \"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}", t.size(),
                q(0.5), q(0.99), t.back());
  return buf;
}

}  // namespace

int cmd_grammar(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "json-object", "bench", "print"});
  a.allow_only({"help", "model", "schema", "gbnf", "json-object", "sample", "seed", "max-tokens",
                "bench", "print"});
  const int sources = a.has("schema") + a.has("gbnf") + a.flag("json-object");
  if (a.flag("help") || sources != 1 || (!a.has("model") && !a.flag("print"))) {
    std::puts(
        "usage: kiln grammar -m MODEL (--schema FILE.json | --gbnf FILE | --json-object)\n"
        "                    [--sample N] [--seed S] [--max-tokens T] [--bench] [--print]\n"
        "Compiles the grammar (GBNF, a JSON schema, or any JSON object) against the model's\n"
        "vocabulary (a GGUF file, a vocabulary-only one will do). --sample prints N random\n"
        "walks over the allowed tokens as JSON strings, one a line, each ending when it picks\n"
        "the end token (walks that reach --max-tokens, default 1000, are printed too and\n"
        "named on stderr). --bench prints one JSON line: the compile time (median of five)\n"
        "and the per-token mask time (p50, p99) over N walks (default 20), overall and by\n"
        "where a JSON text stands (in a string, a key, a number). --print writes the\n"
        "grammar as GBNF (no model needed).");
    return a.flag("help") ? 0 : 2;
  }
  const auto t0 = Clock::now();
  std::string gbnf;
  if (a.has("gbnf")) {
    gbnf = read_file(a.get("gbnf"), "grammar file");
  } else if (a.has("schema")) {
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(read_file(a.get("schema"), "schema file"));
    } catch (const nlohmann::ordered_json::exception& e) {
      throw Error("schema file '" + a.get("schema") + "': " + e.what());
    }
    gbnf = json_schema_to_gbnf(schema);
  } else {
    gbnf = json_object_gbnf();
  }
  const Grammar grammar = parse_gbnf(gbnf);
  const double parse_us = us_since(t0);
  if (a.flag("print")) {
    std::fputs(grammar.to_gbnf().c_str(), stdout);
    if (!a.has("model")) return 0;
  }
  GgufFile f = open_model_file(a.get("model"));
  std::shared_ptr<const TokenVocabulary> vocab =
      TokenVocabulary::from_tokenizer(*Tokenizer::from_gguf(f));
  if (vocab->end_tokens().empty()) throw Error("model '" + a.get("model") + "' has no EOS token");
  // Timed over five compiles under --bench (the median is the number).
  std::vector<double> compile_us;
  std::shared_ptr<const CompiledGrammar> g;
  for (int i = 0; i < (a.flag("bench") ? 5 : 1); ++i) {
    const auto t1 = Clock::now();
    g = CompiledGrammar::compile(grammar, vocab);
    compile_us.push_back(us_since(t1));
  }
  std::sort(compile_us.begin(), compile_us.end());
  std::mt19937_64 rng(static_cast<uint64_t>(a.get_int("seed", 0)));
  const int max_tokens = static_cast<int>(a.get_int("max-tokens", 1000));
  if (a.flag("bench")) {
    std::vector<double> us;
    std::vector<std::string> kinds;
    const int64_t walks = a.get_int("sample", 20);
    for (int64_t i = 0; i < walks; ++i) random_walk(g, rng, max_tokens, &us, &kinds);
    std::string by_kind;
    for (const char* k : {"string", "key", "number", "other"}) {
      std::vector<double> sel;
      for (size_t i = 0; i < us.size(); ++i)
        if (kinds[i] == k) sel.push_back(us[i]);
      by_kind += std::string(by_kind.empty() ? "" : ", ") + "\"" + k + "\": " + quantiles(sel);
    }
    const CompiledGrammar::Stats& s = g->stats();
    std::printf(
        "{\"vocab\": %d, \"parse_ms\": %.2f, \"compile_ms\": %.2f, \"compile_ms_min\": %.2f, "
        "\"positions\": %zu, \"uncertain\": %zu, \"mask\": %s, \"by_state\": {%s}}\n",
        vocab->size(), parse_us / 1000, compile_us[compile_us.size() / 2] / 1000,
        compile_us[0] / 1000, s.positions, s.uncertain, quantiles(us).c_str(), by_kind.c_str());
    return 0;
  }
  const int64_t n = a.get_int("sample", a.flag("print") ? 0 : 1);
  for (int64_t i = 0; i < n; ++i) {
    Walk w = random_walk(g, rng, max_tokens, nullptr, nullptr);
    std::printf("%s\n", nlohmann::json(w.text)
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
    if (!w.ended)
      std::fprintf(stderr, "kiln grammar: sample %lld reached --max-tokens %d before the end\n",
                   static_cast<long long>(i), max_tokens);
  }
  return 0;
}

}  // namespace kiln
