// Small vocabularies and checks for the grammar tests: the 256 single bytes
// (any text can be spelled, so a grammar's language can be probed string by
// string), a mixed vocabulary of words, punctuation runs and split UTF-8
// sequences (so masks meet tokens that cross rule ends), and a brute-force
// mask: a token is allowed when a fork of the matcher accepts its bytes,
// which steps the parse stacks and never consults the mask cache.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "models/grammar/gbnf.h"
#include "models/grammar/matcher.h"

namespace kiln::test {

// Ids 0-255: the bytes; 256: the end token; 257: a control token ("").
inline std::shared_ptr<const TokenVocabulary> byte_vocab() {
  static const std::shared_ptr<const TokenVocabulary> v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    pieces.push_back("</s>");
    pieces.push_back("");
    return std::make_shared<const TokenVocabulary>(pieces, std::vector<int32_t>{256});
  }();
  return v;
}

// The bytes, then multi-byte tokens of the kinds real vocabularies have;
// the end token is the last id.
inline std::shared_ptr<const TokenVocabulary> mixed_vocab() {
  static const std::shared_ptr<const TokenVocabulary> v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    for (const char* p : {"\"",
                          "\",",
                          "\":",
                          "\"}",
                          "\"]",
                          "\":\"",
                          "\", \"",
                          "{\"",
                          "[\"",
                          "[{",
                          "}]",
                          "},",
                          " \"",
                          "\n",
                          "\n\n",
                          "  ",
                          "    ",
                          "\t\t",
                          "\n  ",
                          " {",
                          "{\n",
                          "true",
                          "false",
                          "null",
                          "nul",
                          "tr",
                          "ue",
                          "name",
                          " name",
                          "age",
                          "12",
                          "345",
                          "0.",
                          ".5",
                          "-1",
                          "e+",
                          "1e",
                          "abc",
                          "the",
                          " the",
                          "\\\"",
                          "\\n",
                          "\\u00",
                          "\xC3\xA9",
                          "\xC3",
                          "\xA9",
                          "\xE4\xB8\x96",
                          "\xE4",
                          "\xB8\x96",
                          "\xE4\xB8",
                          "\x96\"",
                          "\xF0\x9F\x98\x80",
                          "\xF0\x9F",
                          "\x98\x80",
                          "\xED\xA0\x80",
                          "\xC0\x80",
                          "a\xC3",
                          "\xA9z",
                          "\":1",
                          ",\"",
                          "\"a",
                          "a\"",
                          "id\":",
                          "foo",
                          "bar",
                          "baz",
                          "-",
                          "--",
                          "()",
                          "((",
                          "))",
                          "+",
                          "ab",
                          "bc",
                          "xyz"})
      pieces.push_back(p);
    pieces.push_back("");  // a control token
    pieces.push_back("<eos>");
    const int32_t eos = static_cast<int32_t>(pieces.size()) - 1;
    return std::make_shared<const TokenVocabulary>(pieces, std::vector<int32_t>{eos});
  }();
  return v;
}

inline std::shared_ptr<const CompiledGrammar> compile_gbnf(
    const std::string& gbnf, std::shared_ptr<const TokenVocabulary> v = byte_vocab()) {
  return CompiledGrammar::compile(parse_gbnf(gbnf), std::move(v));
}

// Whether the grammar's language holds `text` (all of it).
inline bool matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

inline bool allowed(const std::vector<uint32_t>& mask, int32_t t) {
  return (mask[static_cast<size_t>(t) >> 5] >> (t & 31)) & 1;
}

// Compares m's mask with the brute-force one; returns the first difference
// ("" when none).
inline std::string mask_vs_brute_force(GrammarMatcher& m) {
  std::vector<uint32_t> mask;
  m.fill_mask(&mask);
  const TokenVocabulary& v = m.grammar().vocab();
  for (int32_t t = 0; t < v.size(); ++t) {
    GrammarMatcher probe = m.fork();
    const bool ok = probe.accept(t);
    if (ok != allowed(mask, t))
      return "token " + std::to_string(t) + " '" + std::string(v.piece(t)) + "': mask " +
             (allowed(mask, t) ? "allows" : "refuses") + " it, its bytes " +
             (ok ? "continue" : "do not continue") + " the parse";
  }
  return "";
}

}  // namespace kiln::test
