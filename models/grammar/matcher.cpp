#include "models/grammar/matcher.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>

#include "ir/error.h"

namespace kiln {

// The compile-time walk. Its stack sets are those of positions with an
// unknown stack below, and the same set recurs from many positions and at
// every character of a string, so the sets are numbered and their byte
// transitions memoized: a lazily built DFA over stack sets. Walking the
// vocabulary trie through it costs a table lookup per trie node visited.
class MaskCacheBuilder {
 public:
  MaskCacheBuilder(CompiledGrammar* out) : c_(out), stacks_(&out->bytes_) {
    states_.push_back({});  // 0: dead
    trans_.assign(256, 0);
    const size_t depth = c_->vocab_->max_piece_length() + 2;
    st_.resize(depth);
    pend_len_.resize(depth);
  }

  void build() {
    const ByteGrammar& g = c_->bytes_;
    c_->entry_of_.assign(g.elements.size(), CompiledGrammar::kNone);
    for (uint32_t p = 0; p < g.elements.size(); ++p) {
      if (g.elements[p].kind != ByteGrammar::Kind::bytes) continue;
      c_->entry_of_[p] = static_cast<uint32_t>(c_->entries_.size());
      c_->entries_.push_back(build_entry(p));
    }
    c_->stats_.positions = c_->entries_.size();
    c_->stats_.walk_states = states_.size();
  }

 private:
  struct State {
    std::vector<uint32_t> tops;  // sorted
    bool accept = false;
    std::vector<ParseStacks::Escape> escapes;
    bool alive() const { return !tops.empty() || accept || !escapes.empty(); }
  };
  struct Pending {  // an escape on the current trie path: the token's tail from byte k is uncertain
    uint32_t depth;
    uint32_t k;
  };
  struct Tail {
    uint32_t depth;
    std::string_view bytes;
    int32_t token;
  };

  uint32_t intern_state(ParseStacks::Step& s) {
    std::sort(s.tops.begin(), s.tops.end());
    key_.clear();
    key_.push_back(s.accept);
    key_.push_back(static_cast<uint32_t>(s.escapes.size()));
    for (const auto& e : s.escapes) key_.push_back(e.depth), key_.push_back(e.rule);
    key_.insert(key_.end(), s.tops.begin(), s.tops.end());
    std::string k(reinterpret_cast<const char*>(key_.data()), key_.size() * sizeof(uint32_t));
    auto [it, inserted] = ids_.emplace(std::move(k), static_cast<uint32_t>(states_.size()));
    if (inserted) {
      states_.push_back({s.tops, s.accept, s.escapes});
      trans_.resize(states_.size() * 256, kUnknown);
    }
    return it->second;
  }

  uint32_t transition(uint32_t s, uint8_t b) {
    uint32_t& t = trans_[size_t{s} * 256 + b];
    if (t != kUnknown) return t;
    uint32_t next = 0;
    if (!states_[s].tops.empty()) {
      stacks_.advance(states_[s].tops, b, &step_);
      if (!step_.tops.empty() || step_.accept || !step_.escapes.empty()) next = intern_state(step_);
    }
    trans_[size_t{s} * 256 + b] = next;  // intern_state may have moved trans_
    return next;
  }

  CompiledGrammar::Entry build_entry(uint32_t p) {
    const ByteGrammar& g = c_->bytes_;
    const TokenVocabulary& v = *c_->vocab_;
    const std::vector<TrieNode>& nodes = v.nodes();
    const std::vector<int32_t>& ids = v.token_ids();
    step_.clear();
    step_.tops.push_back(stacks_.intern(p, ParseStacks::kBottomBase + 1));
    st_[0] = intern_state(step_);
    accepted_.clear();
    tails_.clear();
    pend_.clear();
    pend_len_[0] = 0;
    for (uint32_t i = 0; i < nodes.size();) {
      const TrieNode& nd = nodes[i];
      const uint32_t d = nd.depth;
      pend_.resize(pend_len_[d - 1]);
      for (const ParseStacks::Escape& e : states_[st_[d - 1]].escapes)
        if (g.follow[e.rule].test(nd.byte)) pend_.push_back({e.depth, d - 1});
      pend_len_[d] = static_cast<uint32_t>(pend_.size());
      const uint32_t s = transition(st_[d - 1], nd.byte);
      st_[d] = s;
      const State& cs = states_[s];
      const bool alive = cs.alive();
      if (!alive && pend_.empty()) {
        i = nd.end;
        continue;
      }
      for (uint32_t t = nd.tokens_begin, e = v.tokens_end(i); t < e; ++t) {
        if (alive) {
          accepted_.push_back(ids[t]);
        } else {
          for (const Pending& r : pend_)
            tails_.push_back({r.depth, v.piece(ids[t]).substr(r.k), ids[t]});
        }
      }
      if (cs.tops.empty() && cs.escapes.empty() && pend_.empty()) {
        i = nd.end;
        continue;
      }
      ++i;
    }
    return store(accepted_, tails_);
  }

  CompiledGrammar::Entry store(std::vector<int32_t>& accepted, std::vector<Tail>& tails) {
    CompiledGrammar& c = *c_;
    CompiledGrammar::Entry e{};
    const size_t n = static_cast<size_t>(c.vocab_->size());
    if (accepted.size() * 32 > n) {
      e.bitset = static_cast<uint32_t>(c.bitsets_.size() / c.words_);
      c.bitsets_.resize(c.bitsets_.size() + c.words_, 0);
      uint32_t* words = c.bitsets_.data() + size_t{e.bitset} * c.words_;
      for (int32_t t : accepted) words[t >> 5] |= 1u << (t & 31);
      ++c.stats_.accepted_bitsets;
    } else {
      e.bitset = CompiledGrammar::kNone;
      std::sort(accepted.begin(), accepted.end());
      e.list_begin = static_cast<uint32_t>(c.lists_.size());
      c.lists_.insert(c.lists_.end(), accepted.begin(), accepted.end());
      e.list_end = static_cast<uint32_t>(c.lists_.size());
    }
    std::sort(tails.begin(), tails.end(), [](const Tail& a, const Tail& b) {
      if (a.depth != b.depth) return a.depth < b.depth;
      if (a.bytes != b.bytes) return a.bytes < b.bytes;
      return a.token < b.token;
    });
    tails.erase(std::unique(tails.begin(), tails.end(),
                            [](const Tail& a, const Tail& b) {
                              return a.depth == b.depth && a.bytes == b.bytes && a.token == b.token;
                            }),
                tails.end());
    c.stats_.uncertain += tails.size();
    e.checks_begin = static_cast<uint32_t>(c.checks_.size());
    for (size_t i = 0; i < tails.size();) {
      size_t j = i;
      entries_.clear();
      for (; j < tails.size() && tails[j].depth == tails[i].depth; ++j)
        entries_.push_back({tails[j].bytes, tails[j].token});
      const uint32_t begin = static_cast<uint32_t>(c.check_nodes_.size());
      append_trie(entries_, &c.check_nodes_, &c.check_tokens_);
      c.checks_.push_back({tails[i].depth, begin, static_cast<uint32_t>(c.check_nodes_.size())});
      i = j;
    }
    e.checks_end = static_cast<uint32_t>(c.checks_.size());
    return e;
  }

  static constexpr uint32_t kUnknown = 0xFFFFFFFF;
  CompiledGrammar* c_;
  ParseStacks stacks_;
  ParseStacks::Step step_;
  std::vector<State> states_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<uint32_t> trans_;
  std::vector<uint32_t> key_;
  std::vector<uint32_t> st_, pend_len_;
  std::vector<Pending> pend_;
  std::vector<int32_t> accepted_;
  std::vector<Tail> tails_;
  std::vector<std::pair<std::string_view, int32_t>> entries_;
};

std::shared_ptr<const CompiledGrammar> CompiledGrammar::compile(
    const Grammar& g, std::shared_ptr<const TokenVocabulary> vocab) {
  std::shared_ptr<CompiledGrammar> c(new CompiledGrammar());
  c->vocab_ = std::move(vocab);
  c->bytes_ = ByteGrammar::lower(g);
  c->words_ = (static_cast<size_t>(c->vocab_->size()) + 31) / 32;
  MaskCacheBuilder(c.get()).build();
  return c;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> g)
    : g_(std::move(g)), stacks_(&g_->bytes_) {
  stacks_.start(&next_);
  tops_ = next_.tops;
  accept_ = next_.accept;
  levels_.resize(g_->vocab_->max_piece_length() + 2);
}

GrammarMatcher GrammarMatcher::fork() const {
  GrammarMatcher m = *this;
  m.stacks_.compact(&m.tops_);
  return m;
}

void GrammarMatcher::fill_mask(std::vector<uint32_t>* mask) {
  const CompiledGrammar& c = *g_;
  mask->assign(c.words_, 0);
  if (ended_) return;
  uint32_t* m = mask->data();
  seen_entries_.clear();
  for (uint32_t top : tops_) {
    const uint32_t ei = c.entry_of_[stacks_.node(top).pos];
    const CompiledGrammar::Entry& e = c.entries_[ei];
    if (std::find(seen_entries_.begin(), seen_entries_.end(), ei) == seen_entries_.end()) {
      seen_entries_.push_back(ei);
      if (e.bitset != CompiledGrammar::kNone) {
        const uint32_t* b = c.bitsets_.data() + size_t{e.bitset} * c.words_;
        for (size_t w = 0; w < c.words_; ++w) m[w] |= b[w];
      } else {
        for (uint32_t i = e.list_begin; i < e.list_end; ++i) {
          const int32_t t = c.lists_[i];
          m[t >> 5] |= 1u << (t & 31);
        }
      }
    }
    for (uint32_t k = e.checks_begin; k < e.checks_end; ++k) check_tails(top, c.checks_[k], m);
  }
  if (accept_)
    for (int32_t t : c.vocab_->end_tokens()) m[t >> 5] |= 1u << (t & 31);
}

// The uncertain tokens of one check: their tails must continue the real
// stack `check.depth` frames below `top`. The tails form a trie, walked with
// one stack set per depth so shared prefixes are stepped once.
void GrammarMatcher::check_tails(uint32_t top, const CompiledGrammar::Check& check,
                                 uint32_t* mask) {
  const CompiledGrammar& c = *g_;
  const uint32_t below = stacks_.pop(top, check.depth);
  if (below == ParseStacks::kNoParent) return;  // the input ends there: no tail fits
  stacks_.expand(below, &levels_[0]);
  for (uint32_t i = check.begin; i < check.end;) {
    const TrieNode& nd = c.check_nodes_[i];
    ParseStacks::Step& prev = levels_[nd.depth - 1];
    ParseStacks::Step& cur = levels_[nd.depth];
    if (prev.tops.empty()) {
      i = nd.end;
      continue;
    }
    stacks_.advance(prev.tops, nd.byte, &cur);
    if (cur.tops.empty() && !cur.accept) {
      i = nd.end;
      continue;
    }
    // The tries lie back to back, their tokens too: node i's run to the next node's.
    const uint32_t end = i + 1 < c.check_nodes_.size()
                             ? c.check_nodes_[i + 1].tokens_begin
                             : static_cast<uint32_t>(c.check_tokens_.size());
    for (uint32_t t = nd.tokens_begin; t < end; ++t) {
      const int32_t id = c.check_tokens_[t];
      mask[id >> 5] |= 1u << (id & 31);
    }
    ++i;
  }
}

size_t GrammarMatcher::min_bytes_to_end() const {
  if (ended_ || accept_) return 0;
  const ByteGrammar& g = g_->bytes_;
  size_t best = SIZE_MAX;
  for (uint32_t top : tops_) {
    size_t len = 0;
    for (uint32_t id = top; id != ParseStacks::kNoParent; id = stacks_.node(id).parent)
      len += g.min_rest[stacks_.node(id).pos];
    best = std::min(best, len);
  }
  return best;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (ended_) return false;
  if (bytes.empty()) return true;
  std::vector<uint32_t> tops = tops_;
  bool accept = accept_;
  for (char ch : bytes) {
    stacks_.advance(tops, static_cast<uint8_t>(ch), &next_);
    if (next_.tops.empty() && !next_.accept) return false;
    tops = next_.tops;
    accept = next_.accept;
  }
  tops_.swap(tops);
  accept_ = accept;
  // Frames no stack uses pile up (fill_mask's checks leave theirs too).
  if (stacks_.size() > 4096 && stacks_.size() > 64 * (tops_.size() + 1)) stacks_.compact(&tops_);
  return true;
}

bool GrammarMatcher::accept(int32_t token) {
  const TokenVocabulary& v = *g_->vocab_;
  if (ended_ || token < 0 || token >= v.size()) return false;
  if (v.is_end(token)) {
    if (!accept_) return false;
    ended_ = true;
    return true;
  }
  std::string_view piece = v.piece(token);
  return !piece.empty() && accept_bytes(piece);
}

void apply_token_mask(const std::vector<uint32_t>& mask, float* logits, int64_t n_vocab) {
  for (int64_t t = 0; t < n_vocab; ++t)
    if (static_cast<size_t>(t >> 5) >= mask.size() || !((mask[t >> 5] >> (t & 31)) & 1))
      logits[t] = -INFINITY;
}

}  // namespace kiln
