#include "tools/grammar_cache.h"

#include "models/grammar/gbnf.h"

namespace kiln {

GrammarCache::GrammarCache(const Tokenizer& tok, size_t capacity)
    : vocab_(TokenVocabulary::from_tokenizer(tok)), capacity_(capacity) {}

std::shared_ptr<const CompiledGrammar> GrammarCache::compile(const std::string& text) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = grammars_.find(text); it != grammars_.end()) {
      order_.splice(order_.begin(), order_, it->second.second);
      return it->second.first;
    }
  }
  // Outside the lock: another request's compile need not wait for this one.
  std::shared_ptr<const CompiledGrammar> g = CompiledGrammar::compile(parse_gbnf(text), vocab_);
  std::lock_guard<std::mutex> lk(mu_);
  if (grammars_.count(text)) return g;
  order_.push_front(text);
  grammars_[text] = {g, order_.begin()};
  if (grammars_.size() > capacity_) {
    grammars_.erase(order_.back());
    order_.pop_back();
  }
  return g;
}

}  // namespace kiln
