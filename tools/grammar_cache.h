// The grammars `kiln serve` constrains replies with (response_format's JSON
// schemas, `grammar`'s GBNF, forced tool calls), compiled against the
// model's vocabulary (models/grammar/matcher.h) and kept by their text.
//
// Why: a compile walks the vocabulary's trie for every grammar position
// (milliseconds to tens of them), and clients send the same schema with
// every request; the vocabulary's own preprocessing is per model. Compiles
// run on the HTTP threads, never the engine's, and the least recently used
// grammar is dropped past `capacity`.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "models/grammar/matcher.h"
#include "models/tokenizer.h"

namespace kiln {

class GrammarCache {
 public:
  GrammarCache(const Tokenizer& tok, size_t capacity = 32);
  // The compiled grammar of GBNF `text`; throws kiln::Error naming what is
  // wrong with it (its line and column for a syntax error).
  std::shared_ptr<const CompiledGrammar> compile(const std::string& text);

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  size_t capacity_;
  std::mutex mu_;
  std::list<std::string> order_;  // most recently used first
  std::map<std::string,
           std::pair<std::shared_ptr<const CompiledGrammar>, std::list<std::string>::iterator>>
      grammars_;
};

}  // namespace kiln
