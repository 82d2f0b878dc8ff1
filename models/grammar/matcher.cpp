#include "models/grammar/matcher.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <exception>
#include <string>
#include <thread>
#include <unordered_map>

#include "ir/error.h"

namespace kiln {

// What one compile worker produces: entries for the positions it took and
// the arrays they index, merged into the CompiledGrammar afterwards.
struct MaskShard {
  std::vector<std::pair<uint32_t, CompiledGrammar::Entry>> entries;  // (position, entry)
  std::vector<int32_t> lists;
  std::vector<uint32_t> bitsets;
  std::vector<CompiledGrammar::Check> checks;
  std::vector<TrieNode> check_nodes;
  std::vector<int32_t> check_tokens;
  std::vector<uint16_t> cond_passes;
  std::vector<int32_t> cond_tokens;
  size_t uncertain = 0, accepted_bitsets = 0, walk_states = 0;
};

// The compile-time walk. Its stack sets are those of positions with an
// unknown stack below, and the same set recurs from many positions and at
// every character of a string, so the sets are numbered and their byte
// transitions memoized: a lazily built DFA over stack sets. Walking the
// vocabulary trie through it costs a table lookup per trie node visited.
class MaskCacheBuilder {
 public:
  MaskCacheBuilder(const ByteGrammar& g, const TokenVocabulary& v, size_t words, MaskShard* out)
      : g_(g), v_(v), words_(words), out_(out), stacks_(&g) {
    states_.push_back({});  // 0: dead
    flags_.push_back(0);
    passes_.push_back(kDead);
    trans_.assign(256, 0);
    const size_t depth = v.max_piece_length() + 2;
    st_.resize(depth);
    pend_len_.resize(depth);
    // The trie's first level by byte: a walk starts only under the bytes
    // its position takes.
    const std::vector<TrieNode>& nodes = v.nodes();
    root_.fill(kUnknown);
    for (uint32_t i = 0; i < nodes.size(); i = nodes[i].end) root_[nodes[i].byte] = i;
  }
  ~MaskCacheBuilder() { out_->walk_states += states_.size(); }

  void add(uint32_t p) { out_->entries.push_back({p, build_entry(p)}); }

 private:
  struct State {
    std::vector<uint32_t> tops;  // sorted
    std::vector<uint32_t> spec;  // the speculative ones
    std::vector<ParseStacks::Escape> escapes;
  };
  // Per state, in a flat array the walk reads at every trie node.
  enum : uint8_t {
    kTops = 1,     // a certain stack is alive
    kEscapes = 2,  // a rule with many returns ended on the bottom marker here
    kAlive = 4,    // a token ending here is accepted (for some repeat counts: passes_)
    // A speculative stack (or end) that has taken a byte since its escape
    // is alive: some context may take the token's tail. (Speculation begun
    // by this very byte says nothing about tails that started earlier.)
    kSpec = 8,
  };
  static constexpr uint16_t kDead = 0xFFFF;
  struct Pending {  // an escape on the current trie path: the token's tail from byte k is uncertain
    uint32_t depth, add, k;
  };
  struct Tail {
    uint32_t depth, add;
    std::string_view bytes;
    int32_t token;
  };

  uint32_t intern_state(ParseStacks::Step& s, bool carried) {
    std::sort(s.tops.begin(), s.tops.end());
    key_.clear();
    key_.push_back(symbolic_depth_);  // the same stacks mean other things for another depth
    key_.push_back(s.accept | s.spec_accept << 1 | carried << 2);
    key_.push_back(static_cast<uint32_t>(s.escapes.size()));
    for (const auto& e : s.escapes)
      key_.push_back(e.depth), key_.push_back(e.rule), key_.push_back(e.add);
    key_.insert(key_.end(), s.tops.begin(), s.tops.end());
    std::string k(reinterpret_cast<const char*>(key_.data()), key_.size() * sizeof(uint32_t));
    auto [it, inserted] = ids_.emplace(std::move(k), static_cast<uint32_t>(states_.size()));
    if (inserted) {
      // Bytes no top takes lead to the dead state (0) without a step.
      // A token ending here is accepted when the symbolic repeat count X
      // leaves room for the fewest passes some live parse relies on:
      // X <= max - passes (0: whatever X is).
      ByteSet live;
      bool certain = false;
      std::vector<uint32_t> spec;
      uint32_t passes = s.accept ? 0 : kDead;
      for (const ParseStacks::Escape& e : s.escapes) passes = std::min(passes, e.add);
      for (uint32_t top : s.tops) {
        const uint32_t pos = stacks_.node(top).pos;
        if (pos == ParseStacks::kAnyPos)
          for (uint64_t& w : live.bits) w = ~uint64_t{0};
        else
          live |= g_.byte_sets[g_.elements[pos].arg];
        uint32_t id = top, k = 0;
        for (; stacks_.node(id).parent < ParseStacks::kBottomBase; id = stacks_.node(id).parent)
          if (const uint32_t c = stacks_.node(id).count;
              c >= ParseStacks::kSymbolic && c != ParseStacks::kAnyCount)
            k = c - ParseStacks::kSymbolic;
        if (const uint32_t c = stacks_.node(id).count;
            c >= ParseStacks::kSymbolic && c != ParseStacks::kAnyCount)
          k = c - ParseStacks::kSymbolic;
        if (stacks_.node(id).parent == ParseStacks::kSpeculative) {
          spec.push_back(top);
        } else {
          certain = true;
          passes = std::min(passes, k);
        }
      }
      states_.push_back({s.tops, std::move(spec), s.escapes});
      passes_.push_back(static_cast<uint16_t>(std::min<uint32_t>(passes, kDead)));
      flags_.push_back(
          static_cast<uint8_t>((certain ? kTops : 0) | (s.escapes.empty() ? 0 : kEscapes) |
                               (passes != kDead ? kAlive : 0) | (carried ? kSpec : 0)));
      const size_t row = trans_.size();
      trans_.resize(row + 256);
      for (unsigned b = 0; b < 256; ++b)
        trans_[row + b] = live.test(static_cast<uint8_t>(b)) ? kUnknown : 0;
    }
    return it->second;
  }

  uint32_t transition(uint32_t s, uint8_t b) {
    const uint32_t t = trans_[size_t{s} * 256 + b];
    if (t != kUnknown) return t;
    bool carried = false;
    if (!states_[s].spec.empty()) {
      stacks_.advance(states_[s].spec, b, &step_);
      carried = !step_.tops.empty() || step_.spec_accept;
    }
    stacks_.advance(states_[s].tops, b, &step_);
    const uint32_t next =
        !step_.tops.empty() || step_.accept || step_.spec_accept || !step_.escapes.empty()
            ? intern_state(step_, carried)
            : 0;
    trans_[size_t{s} * 256 + b] = next;  // intern_state may have moved trans_
    return next;
  }

  CompiledGrammar::Entry build_entry(uint32_t p) {
    const std::vector<TrieNode>& nodes = v_.nodes();
    // The first repeat frame on p's static chain (frame 1 is p's own) keeps
    // a symbolic count: tokens that loop in it are sorted by how many
    // passes they need, and the real count picks them at run time.
    symbolic_depth_ = 0;
    uint32_t symbolic_max = 0;
    for (uint32_t depth = 1, pos = p; depth < 4096; ++depth) {
      const uint32_t ret = g_.sole_return[g_.rule_of[pos]];
      if (ret == ByteGrammar::kGrammarEnd || ret == ByteGrammar::kManyReturns) break;
      if (ret & ByteGrammar::kPass) {
        symbolic_depth_ = depth + 1;
        symbolic_max = g_.repeats[g_.elements[ret & ~ByteGrammar::kPass].arg].max;
        break;
      }
      pos = ret;
    }
    stacks_.set_symbolic_depth(symbolic_depth_);
    step_.clear();
    step_.tops.push_back(stacks_.intern(p, ParseStacks::kBottomBase + 1));
    st_[0] = intern_state(step_, false);
    accepted_.clear();
    cond_.clear();
    tails_.clear();
    pend_.clear();
    pend_len_[0] = 0;
    for (unsigned b = 0; b < 256; ++b)
      if (root_[b] != kUnknown && trans_[size_t{st_[0]} * 256 + b] != 0)
        walk(root_[b], nodes[root_[b]].end);
    CompiledGrammar::Entry e = store(accepted_, tails_);
    store_conditional(&e, symbolic_max);
    return e;
  }

  // Classifies the tokens of trie nodes [begin, end), a subtree of the root.
  void walk(uint32_t begin, uint32_t end) {
    const TokenVocabulary& v = v_;
    const std::vector<TrieNode>& nodes = v.nodes();
    const std::vector<int32_t>& ids = v.token_ids();
    for (uint32_t i = begin; i < end;) {
      const TrieNode& nd = nodes[i];
      const uint32_t d = nd.depth, from = st_[d - 1];
      if (pend_.size() != pend_len_[d - 1]) pend_.resize(pend_len_[d - 1]);
      if (flags_[from] & kEscapes)
        for (const ParseStacks::Escape& e : states_[from].escapes)
          pend_.push_back({e.depth, e.add, d - 1});
      pend_len_[d] = static_cast<uint32_t>(pend_.size());
      const uint32_t s = transition(from, nd.byte);
      st_[d] = s;
      const uint8_t f = flags_[s];
      const uint16_t passes = passes_[s];
      // Uncertain: no parse took the bytes for certain (or only for some
      // repeat counts), but past an escape some speculative one did.
      const bool uncertain = passes != 0 && (f & kSpec) && !pend_.empty();
      for (uint32_t t = nd.tokens_begin, e = v.tokens_end(i); t < e; ++t) {
        if (passes == 0) {
          accepted_.push_back(ids[t]);
          continue;
        }
        if (passes != kDead) cond_.push_back({passes, ids[t]});
        if (uncertain)
          for (const Pending& r : pend_)
            tails_.push_back({r.depth, r.add, v.piece(ids[t]).substr(r.k), ids[t]});
      }
      // Deeper tokens need a certain stack, an escape here, or a
      // speculative stack past an earlier escape.
      if ((f & (kTops | kEscapes)) || ((f & kSpec) && !pend_.empty()))
        ++i;
      else
        i = nd.end;
    }
  }

  CompiledGrammar::Entry store(std::vector<int32_t>& accepted, std::vector<Tail>& tails) {
    MaskShard& c = *out_;
    CompiledGrammar::Entry e{};
    if (accepted.size() * 32 > static_cast<size_t>(v_.size())) {  // a bitset is smaller
      e.bitset = static_cast<uint32_t>(c.bitsets.size() / words_);
      c.bitsets.resize(c.bitsets.size() + words_, 0);
      uint32_t* words = c.bitsets.data() + size_t{e.bitset} * words_;
      for (int32_t t : accepted) words[t >> 5] |= 1u << (t & 31);
      ++c.accepted_bitsets;
    } else {
      e.bitset = CompiledGrammar::kNone;
      e.list_begin = static_cast<uint32_t>(c.lists.size());
      c.lists.insert(c.lists.end(), accepted.begin(), accepted.end());
      e.list_end = static_cast<uint32_t>(c.lists.size());
    }
    std::sort(tails.begin(), tails.end(), [](const Tail& a, const Tail& b) {
      if (a.depth != b.depth) return a.depth < b.depth;
      if (a.add != b.add) return a.add < b.add;
      if (a.bytes != b.bytes) return a.bytes < b.bytes;
      return a.token < b.token;
    });
    tails.erase(std::unique(tails.begin(), tails.end(),
                            [](const Tail& a, const Tail& b) {
                              return a.depth == b.depth && a.add == b.add && a.bytes == b.bytes &&
                                     a.token == b.token;
                            }),
                tails.end());
    c.uncertain += tails.size();
    e.checks_begin = static_cast<uint32_t>(c.checks.size());
    for (size_t i = 0; i < tails.size();) {
      size_t j = i;
      entries_.clear();
      for (; j < tails.size() && tails[j].depth == tails[i].depth && tails[j].add == tails[i].add;
           ++j)
        entries_.push_back({tails[j].bytes, tails[j].token});
      const uint32_t begin = static_cast<uint32_t>(c.check_nodes.size());
      append_trie(entries_, &c.check_nodes, &c.check_tokens);
      c.checks.push_back(
          {tails[i].depth, tails[i].add, begin, static_cast<uint32_t>(c.check_nodes.size())});
      i = j;
    }
    e.checks_end = static_cast<uint32_t>(c.checks.size());
    return e;
  }

  // Tokens accepted for some counts of the symbolic repeat, fewest passes
  // first, with a bitset of them all when that is smaller than a list.
  void store_conditional(CompiledGrammar::Entry* e, uint32_t symbolic_max) {
    MaskShard& c = *out_;
    std::sort(cond_.begin(), cond_.end());
    e->cond_begin = static_cast<uint32_t>(c.cond_tokens.size());
    for (const auto& [passes, token] : cond_) {
      c.cond_passes.push_back(passes);
      c.cond_tokens.push_back(token);
    }
    e->cond_end = static_cast<uint32_t>(c.cond_tokens.size());
    e->symbolic_pops = symbolic_depth_ ? symbolic_depth_ - 1 : 0;
    e->symbolic_max = symbolic_max;
    e->cond_bitset = CompiledGrammar::kNone;
    if (cond_.size() * 32 > static_cast<size_t>(v_.size())) {
      e->cond_bitset = static_cast<uint32_t>(c.bitsets.size() / words_);
      c.bitsets.resize(c.bitsets.size() + words_, 0);
      uint32_t* words = c.bitsets.data() + size_t{e->cond_bitset} * words_;
      for (const auto& [passes, t] : cond_) words[t >> 5] |= 1u << (t & 31);
      ++c.accepted_bitsets;
    }
  }

  static constexpr uint32_t kUnknown = 0xFFFFFFFF;
  const ByteGrammar& g_;
  const TokenVocabulary& v_;
  const size_t words_;
  MaskShard* out_;
  std::array<uint32_t, 256> root_;
  ParseStacks stacks_;
  ParseStacks::Step step_;
  std::vector<State> states_;
  std::vector<uint8_t> flags_;
  std::vector<uint16_t> passes_;  // per state: kDead, or the passes a token ending here needs
  uint32_t symbolic_depth_ = 0;
  std::vector<std::pair<uint16_t, int32_t>> cond_;
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
  c->build_masks();
  return c;
}

// Positions are handed out in small runs (neighbours share walk states) to
// workers with their own walk state; their shards are then appended with
// their indices shifted.
void CompiledGrammar::build_masks() {
  std::vector<uint32_t> positions;
  for (uint32_t p = 0; p < bytes_.elements.size(); ++p)
    if (bytes_.elements[p].kind == ByteGrammar::Kind::bytes) positions.push_back(p);
  constexpr size_t kRun = 16;
  const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                            std::min<size_t>(8, positions.size() / kRun + 1));
  std::vector<MaskShard> shards(workers);
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(workers);
  auto work = [&](size_t w) {
    try {
      MaskCacheBuilder b(bytes_, *vocab_, words_, &shards[w]);
      for (size_t i; (i = next.fetch_add(kRun)) < positions.size();)
        for (size_t j = i; j < std::min(i + kRun, positions.size()); ++j) b.add(positions[j]);
    } catch (...) {
      errors[w] = std::current_exception();
      next = positions.size();
    }
  };
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(work, w);
  work(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  entry_of_.assign(bytes_.elements.size(), kNone);
  for (MaskShard& s : shards) {
    const uint32_t lists = static_cast<uint32_t>(lists_.size());
    const uint32_t bitsets = static_cast<uint32_t>(bitsets_.size() / words_);
    const uint32_t checks = static_cast<uint32_t>(checks_.size());
    const uint32_t nodes = static_cast<uint32_t>(check_nodes_.size());
    const uint32_t tokens = static_cast<uint32_t>(check_tokens_.size());
    const uint32_t conds = static_cast<uint32_t>(cond_tokens_.size());
    for (auto [p, e] : s.entries) {
      e.list_begin += lists;
      e.list_end += lists;
      if (e.bitset != kNone) e.bitset += bitsets;
      if (e.cond_bitset != kNone) e.cond_bitset += bitsets;
      e.cond_begin += conds;
      e.cond_end += conds;
      e.checks_begin += checks;
      e.checks_end += checks;
      entry_of_[p] = static_cast<uint32_t>(entries_.size());
      entries_.push_back(e);
    }
    lists_.insert(lists_.end(), s.lists.begin(), s.lists.end());
    bitsets_.insert(bitsets_.end(), s.bitsets.begin(), s.bitsets.end());
    for (Check c : s.checks) checks_.push_back({c.depth, c.add, c.begin + nodes, c.end + nodes});
    cond_passes_.insert(cond_passes_.end(), s.cond_passes.begin(), s.cond_passes.end());
    cond_tokens_.insert(cond_tokens_.end(), s.cond_tokens.begin(), s.cond_tokens.end());
    for (TrieNode n : s.check_nodes) {
      n.end += nodes;
      n.tokens_begin += tokens;
      check_nodes_.push_back(n);
    }
    check_tokens_.insert(check_tokens_.end(), s.check_tokens.begin(), s.check_tokens.end());
    stats_.uncertain += s.uncertain;
    stats_.accepted_bitsets += s.accepted_bitsets;
    stats_.walk_states += s.walk_states;
  }
  stats_.positions = entries_.size();
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
    if (e.cond_begin != e.cond_end) add_conditional(top, e, m);
    for (uint32_t k = e.checks_begin; k < e.checks_end; ++k) check_tails(top, c.checks_[k], m);
  }
  if (accept_)
    for (int32_t t : c.vocab_->end_tokens()) m[t >> 5] |= 1u << (t & 31);
}

// The tokens of an entry that loop in a counted repeat: those needing no
// more passes than the real count leaves. Set one by one, or, when most
// fit, as the entry's bitset of them all less the rest (in scratch, as
// other stacks' tokens must stay).
void GrammarMatcher::add_conditional(uint32_t top, const CompiledGrammar::Entry& e,
                                     uint32_t* mask) {
  const CompiledGrammar& c = *g_;
  const uint32_t count = stacks_.node(stacks_.pop(top, e.symbolic_pops)).count;
  const uint32_t room = e.symbolic_max > count ? e.symbolic_max - count : 0;
  const uint16_t* passes = c.cond_passes_.data();
  const uint32_t fit = static_cast<uint32_t>(
      std::upper_bound(passes + e.cond_begin, passes + e.cond_end, room) - passes);
  if (e.cond_bitset != CompiledGrammar::kNone &&
      (fit - e.cond_begin) * 2 > e.cond_end - e.cond_begin) {
    const uint32_t* all = c.bitsets_.data() + size_t{e.cond_bitset} * c.words_;
    if (fit == e.cond_end) {  // room for them all, as far from the bound as most steps are
      for (size_t w = 0; w < c.words_; ++w) mask[w] |= all[w];
      return;
    }
    scratch_.assign(all, all + c.words_);
    for (uint32_t i = fit; i < e.cond_end; ++i) {
      const int32_t t = c.cond_tokens_[i];
      scratch_[t >> 5] &= ~(1u << (t & 31));
    }
    for (size_t w = 0; w < c.words_; ++w) mask[w] |= scratch_[w];
    return;
  }
  for (uint32_t i = e.cond_begin; i < fit; ++i) {
    const int32_t t = c.cond_tokens_[i];
    mask[t >> 5] |= 1u << (t & 31);
  }
}

// The uncertain tokens of one check: their tails must continue the real
// stack `check.depth` frames below `top`. The tails form a trie, walked with
// one stack set per depth so shared prefixes are stepped once.
void GrammarMatcher::check_tails(uint32_t top, const CompiledGrammar::Check& check,
                                 uint32_t* mask) {
  const CompiledGrammar& c = *g_;
  uint32_t below = stacks_.pop(top, check.depth);
  if (below == ParseStacks::kNoParent) return;  // the input ends there: no tail fits
  if (check.add) {                              // a repeat frame, `add` passes further on
    const ParseStacks::Node n = stacks_.node(below);
    below = stacks_.intern(n.pos, n.parent, n.count + check.add);
  }
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

size_t GrammarMatcher::min_bytes_to_end() const { return ended_ ? 0 : min_bytes(tops_, accept_); }

size_t GrammarMatcher::min_bytes(const std::vector<uint32_t>& tops, bool accept) const {
  if (accept) return 0;
  const ByteGrammar& g = g_->bytes_;
  size_t best = SIZE_MAX;
  for (uint32_t top : tops) {
    size_t len = 0;
    for (uint32_t id = top; id != ParseStacks::kNoParent; id = stacks_.node(id).parent) {
      const ParseStacks::Node& n = stacks_.node(id);
      if (g.elements[n.pos].kind == ByteGrammar::Kind::repeat) {  // the passes still needed
        const ByteGrammar::Repeat& r = g.repeats[g.elements[n.pos].arg];
        len += size_t{r.min > n.count ? r.min - n.count : 0} * g.min_len[r.rule] +
               g.min_rest[n.pos + 1];
      } else {
        len += g.min_rest[n.pos];
      }
    }
    best = std::min(best, len);
  }
  return best;
}

void GrammarMatcher::fill_closing_mask(std::vector<uint32_t>* mask) {
  const CompiledGrammar& c = *g_;
  mask->assign(c.words_, 0);
  if (ended_) return;
  const TokenVocabulary& v = *c.vocab_;
  auto allow = [&](int32_t t) { (*mask)[t / 32] |= 1u << (t % 32); };
  if (accept_) {  // complete: end it
    for (int32_t t : v.end_tokens()) allow(t);
    return;
  }
  // A walk of the vocabulary's trie that follows only bytes one step along
  // a shortest completion: few branches, however large the vocabulary.
  const std::vector<TrieNode>& nodes = v.nodes();
  struct Frame {
    uint32_t node;
    std::vector<uint32_t> tops;
    size_t need;  // bytes still needed before this node's byte
  };
  std::vector<Frame> todo;
  const size_t need = min_bytes(tops_, false);
  for (uint32_t i = 0; i < nodes.size(); i = nodes[i].end) todo.push_back({i, tops_, need});
  while (!todo.empty()) {
    Frame f = std::move(todo.back());
    todo.pop_back();
    stacks_.advance(f.tops, nodes[f.node].byte, &next_);
    if (next_.tops.empty() && !next_.accept) continue;
    const size_t left = min_bytes(next_.tops, next_.accept);
    if (left + 1 != f.need) continue;
    for (uint32_t k = nodes[f.node].tokens_begin; k < v.tokens_end(f.node); ++k)
      allow(v.token_ids()[k]);
    if (left == 0) continue;  // complete: a longer token would go past the end
    for (uint32_t ch = f.node + 1; ch < nodes[f.node].end; ch = nodes[ch].end)
      todo.push_back({ch, next_.tops, left});
  }
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
