#include "models/grammar/byte_grammar.h"

#include <algorithm>
#include <map>

#include "ir/error.h"

namespace kiln {

namespace {

constexpr size_t kMaxElements = 4000000;
// Rules at most this large (counting the non-recursive rules they use) are
// copied per reference; larger ones are shared and their ends left to the
// matcher's run-time check.
constexpr size_t kCloneSize = 160;
constexpr size_t kMaxReturns = 256;

struct ByteRange {
  uint8_t lo, hi;
  bool operator<(const ByteRange& o) const { return lo != o.lo ? lo < o.lo : hi < o.hi; }
  bool operator==(const ByteRange&) const = default;
};

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* out) {
  const int n = utf8_length(cp);
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  for (int i = n - 1; i > 0; --i, cp >>= 6) out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  static const uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// Appends the sequences of byte ranges whose concatenations are exactly the
// UTF-8 encodings of [lo, hi] (surrogates left out): split the range until
// each piece differs only in trailing bytes that span their whole range.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>* out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) utf8_sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_sequences(0xE000, hi, out);
    return;
  }
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      utf8_sequences(lo, edge, out);
      utf8_sequences(edge + 1, hi, out);
      return;
    }
  }
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      utf8_sequences(lo, lo | m, out);
      utf8_sequences((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      utf8_sequences(lo, (hi & ~m) - 1, out);
      utf8_sequences(hi & ~m, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  std::vector<ByteRange> seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out->push_back(std::move(seq));
}

// The code point set as alternatives of byte-set sequences; sequences that
// differ only in their first byte share one alternative.
std::vector<std::vector<ByteSet>> utf8_alternatives(const std::vector<CodepointRange>& chars) {
  std::vector<std::vector<ByteRange>> seqs;
  for (const CodepointRange& r : chars) utf8_sequences(r.lo, std::min(r.hi, kMaxCodepoint), &seqs);
  std::map<std::vector<ByteRange>, ByteSet> by_tail;
  for (const auto& s : seqs) {
    std::vector<ByteRange> tail(s.begin() + 1, s.end());
    by_tail[tail].set_range(s[0].lo, s[0].hi);
  }
  std::vector<std::vector<ByteSet>> out;
  for (const auto& [tail, first] : by_tail) {
    std::vector<ByteSet> alt = {first};
    for (const ByteRange& r : tail) {
      ByteSet b;
      b.set_range(r.lo, r.hi);
      alt.push_back(b);
    }
    out.push_back(std::move(alt));
  }
  return out;
}

bool encodable(const std::vector<CodepointRange>& chars) {
  for (const CodepointRange& r : chars)
    if (r.lo < 0xD800 || r.hi > 0xDFFF) return true;
  return false;
}

}  // namespace

ByteGrammar ByteGrammar::lower(const Grammar& g) {
  g.check();
  const size_t n = g.rules.size();
  // Productive alternatives only (the set can shrink below what check()
  // saw: a class of surrogates alone has no encoding).
  std::vector<char> productive(n, 0);
  auto alt_productive = [&](const GrammarSequence& seq) {
    for (const GrammarElement& e : seq) {
      if (e.kind == GrammarElement::Kind::repeat && e.min == 0) continue;
      if (e.refers() ? !productive[e.rule] : !encodable(e.chars)) return false;
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i)
      if (!productive[i])
        for (const GrammarSequence& seq : g.rules[i].alternatives)
          if (alt_productive(seq)) productive[i] = changed = true;
  }
  if (!productive[g.root])
    throw Error("grammar matches no string (no alternative of 'root' can finish)");
  // Which rules match the empty string: a repetition of one is unrolled.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i)
      for (const GrammarSequence& seq : g.rules[i].alternatives) {
        bool all = true;
        for (const GrammarElement& e : seq)
          all &= e.refers() &&
                 ((e.kind == GrammarElement::Kind::repeat && e.min == 0) || nullable[e.rule]);
        if (all && !nullable[i]) nullable[i] = changed = true;
      }
  }

  ByteGrammar b;
  std::map<ByteSet, uint32_t, bool (*)(const ByteSet&, const ByteSet&)> set_ids(
      [](const ByteSet& x, const ByteSet& y) {
        return std::lexicographical_compare(x.bits, x.bits + 4, y.bits, y.bits + 4);
      });
  auto set_id = [&](const ByteSet& s) {
    auto [it, inserted] = set_ids.emplace(s, static_cast<uint32_t>(b.byte_sets.size()));
    if (inserted) b.byte_sets.push_back(s);
    return it->second;
  };
  // Old rule ids to new, in the order the root reaches them.
  std::vector<uint32_t> id(n, kGrammarEnd);
  std::vector<uint32_t> order = {g.root};
  id[g.root] = 0;
  b.rules.push_back({g.rules[g.root].name, {}});
  struct Pending {
    uint32_t rule;
    std::vector<std::vector<ByteSet>> alts;  // a helper rule's alternatives
  };
  struct Optional {  // rule ::= body next | ""  (next: the rule after it, if `more`)
    uint32_t rule, body;
    bool more;
  };
  std::vector<Optional> optional;
  for (size_t next = 0; next < order.size(); ++next) {
    const GrammarRule& r = g.rules[order[next]];
    const uint32_t self = id[order[next]];
    std::vector<Pending> helpers;
    for (const GrammarSequence& seq : r.alternatives) {
      if (!alt_productive(seq)) continue;
      b.rules[self].alternatives.push_back(static_cast<uint32_t>(b.elements.size()));
      for (const GrammarElement& e : seq) {
        if (e.refers()) {
          if (e.kind == GrammarElement::Kind::repeat && e.max == 0) continue;  // x{0,0}
          if (!productive[e.rule]) continue;  // a repetition that can only be taken no times
          if (id[e.rule] == kGrammarEnd) {
            id[e.rule] = static_cast<uint32_t>(b.rules.size());
            b.rules.push_back({g.rules[e.rule].name, {}});
            order.push_back(e.rule);
          }
          if (e.kind == GrammarElement::Kind::rule) {
            b.elements.push_back({Kind::rule, id[e.rule]});
          } else if (!nullable[e.rule]) {
            b.elements.push_back({Kind::repeat, static_cast<uint32_t>(b.repeats.size())});
            b.repeats.push_back({id[e.rule], e.min, e.max});
          } else {
            // Unrolled: min references, then max - min nested optional ones.
            for (uint32_t k = 0; k < e.min; ++k) b.elements.push_back({Kind::rule, id[e.rule]});
            if (e.max > e.min)
              b.elements.push_back({Kind::rule, static_cast<uint32_t>(b.rules.size())});
            for (uint32_t k = e.min; k < e.max; ++k) {
              const uint32_t opt = static_cast<uint32_t>(b.rules.size());
              optional.push_back({opt, id[e.rule], k + 1 < e.max});
              b.rules.push_back({r.name + "~opt", {}});
            }
          }
          continue;
        }
        std::vector<std::vector<ByteSet>> alts = utf8_alternatives(e.chars);
        if (alts.size() == 1) {
          for (const ByteSet& s : alts[0]) b.elements.push_back({Kind::bytes, set_id(s)});
        } else {
          const uint32_t h = static_cast<uint32_t>(b.rules.size());
          b.rules.push_back({r.name + "~char", {}});
          helpers.push_back({h, std::move(alts)});
          b.elements.push_back({Kind::rule, h});
        }
      }
      b.elements.push_back({Kind::end, self});
    }
    for (Pending& h : helpers) {
      for (const auto& alt : h.alts) {
        b.rules[h.rule].alternatives.push_back(static_cast<uint32_t>(b.elements.size()));
        for (const ByteSet& s : alt) b.elements.push_back({Kind::bytes, set_id(s)});
        b.elements.push_back({Kind::end, h.rule});
      }
    }
    for (const Optional& o : optional) {
      b.rules[o.rule].alternatives.push_back(static_cast<uint32_t>(b.elements.size()));
      b.elements.push_back({Kind::rule, o.body});
      if (o.more) b.elements.push_back({Kind::rule, o.rule + 1});
      b.elements.push_back({Kind::end, o.rule});
      b.rules[o.rule].alternatives.push_back(static_cast<uint32_t>(b.elements.size()));
      b.elements.push_back({Kind::end, o.rule});
    }
    optional.clear();
    if (b.elements.size() > kMaxElements)
      throw Error("grammar is too large for the matcher (over " + std::to_string(kMaxElements) +
                  " byte positions)");
  }
  b.root = 0;
  b.clone_shared_rules();
  b.analyze();
  return b;
}

void ByteGrammar::clone_shared_rules() {
  const size_t n = rules.size();
  // Recursive rules (on a cycle of references) are never copied: Tarjan's
  // strongly connected components, iteratively.
  std::vector<std::vector<uint32_t>> refs(n);
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t p : rules[r].alternatives)
      for (; elements[p].kind != Kind::end; ++p)
        if (refers(p)) refs[r].push_back(target(p));
  std::vector<int> index(n, -1), low(n, 0);
  std::vector<char> on_stack(n, 0), recursive(n, 0);
  std::vector<uint32_t> stack;
  int counter = 0;
  for (uint32_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    std::vector<std::pair<uint32_t, size_t>> dfs = {{s, 0}};
    index[s] = low[s] = counter++;
    stack.push_back(s);
    on_stack[s] = 1;
    while (!dfs.empty()) {
      auto& [v, i] = dfs.back();
      if (i < refs[v].size()) {
        uint32_t w = refs[v][i++];
        if (w == v) recursive[v] = 1;
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = 1;
          dfs.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        std::vector<uint32_t> comp;
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp.push_back(w);
        } while (w != v);
        if (comp.size() > 1)
          for (uint32_t c : comp) recursive[c] = 1;
      }
      const uint32_t done = v;
      dfs.pop_back();
      if (!dfs.empty()) low[dfs.back().first] = std::min(low[dfs.back().first], low[done]);
    }
  }
  // Size of a rule with the non-recursive rules below it.
  std::vector<size_t> size(n, 0);
  std::vector<char> sized(n, 0);
  auto deep_size = [&](uint32_t root) {
    std::vector<std::pair<uint32_t, size_t>> dfs = {{root, 0}};
    while (!dfs.empty()) {
      auto& [v, i] = dfs.back();
      if (sized[v]) {
        dfs.pop_back();
        continue;
      }
      if (i < refs[v].size()) {
        uint32_t w = refs[v][i++];
        if (!recursive[w] && !sized[w]) dfs.push_back({w, 0});
        continue;
      }
      size_t s = 0;
      for (uint32_t p : rules[v].alternatives)
        for (; elements[p].kind != Kind::end; ++p) s += 1;
      for (uint32_t w : refs[v]) s += recursive[w] ? 1 : size[w];
      size[v] = std::min<size_t>(s, kMaxElements);
      sized[v] = 1;
      dfs.pop_back();
    }
    return size[root];
  };
  // Parents before children (reverse post-order of the references), so a
  // copied parent's references count when its children are considered.
  std::vector<uint32_t> post;
  std::vector<char> seen(n, 0);
  {
    std::vector<std::pair<uint32_t, size_t>> dfs = {{root, 0}};
    seen[root] = 1;
    while (!dfs.empty()) {
      auto& [v, i] = dfs.back();
      if (i < refs[v].size()) {
        uint32_t w = refs[v][i++];
        if (!seen[w]) seen[w] = 1, dfs.push_back({w, 0});
        continue;
      }
      post.push_back(v);
      dfs.pop_back();
    }
  }
  std::vector<std::vector<uint32_t>> sites(n);  // positions referencing each rule
  for (uint32_t p = 0; p < elements.size(); ++p)
    if (refers(p)) sites[target(p)].push_back(p);
  const size_t budget = elements.size() * 4 + 200000;
  for (auto it = post.rbegin(); it != post.rend(); ++it) {
    const uint32_t r = *it;
    if (r == root || recursive[r] || sites[r].size() < 2 || deep_size(r) > kCloneSize) continue;
    for (size_t k = 1; k < sites[r].size(); ++k) {
      if (elements.size() > budget) return;
      const uint32_t copy = static_cast<uint32_t>(rules.size());
      rules.push_back({rules[r].name, {}});
      sites.emplace_back();
      for (uint32_t p : rules[r].alternatives) {
        rules[copy].alternatives.push_back(static_cast<uint32_t>(elements.size()));
        for (; elements[p].kind != Kind::end; ++p) {
          Element e = elements[p];
          if (e.kind == Kind::repeat) {  // its own count bounds, redirected on their own
            repeats.push_back(repeats[e.arg]);
            e.arg = static_cast<uint32_t>(repeats.size()) - 1;
          }
          elements.push_back(e);
          if (refers(static_cast<uint32_t>(elements.size()) - 1))
            sites[target(static_cast<uint32_t>(elements.size()) - 1)].push_back(
                static_cast<uint32_t>(elements.size()) - 1);
        }
        elements.push_back({Kind::end, copy});
      }
      target_ref(sites[r][k]) = copy;
    }
    sites[r].resize(1);
  }
}

void ByteGrammar::analyze() {
  const size_t n = rules.size();
  rule_of.assign(elements.size(), 0);
  for (uint32_t p = static_cast<uint32_t>(elements.size()); p-- > 0;)
    rule_of[p] = elements[p].kind == Kind::end ? elements[p].arg
                 : p + 1 < elements.size()     ? rule_of[p + 1]
                                               : 0;
  // Where each rule returns: non-tail references directly, tail references
  // through the rule that makes them (its frame is gone when this one ends).
  // Sets are kept sorted; one that outgrows kMaxReturns is left empty and
  // marked, as a rule returning almost anywhere.
  std::vector<std::vector<uint32_t>> tail_callers(n);
  returns.assign(n, {});
  returns_unbounded.assign(n, 0);
  auto add = [&](uint32_t r, uint32_t ret) {
    if (returns_unbounded[r]) return false;
    auto it = std::lower_bound(returns[r].begin(), returns[r].end(), ret);
    if (it != returns[r].end() && *it == ret) return false;
    if (returns[r].size() == kMaxReturns) {
      returns[r].clear();
      returns_unbounded[r] = 1;
    } else {
      returns[r].insert(it, ret);
    }
    return true;
  };
  add(root, kGrammarEnd);
  for (uint32_t p = 0; p < elements.size(); ++p) {
    if (elements[p].kind == Kind::repeat)
      add(target(p), p | kPass);
    else if (elements[p].kind != Kind::rule)
      continue;
    else if (elements[p + 1].kind == Kind::end)
      tail_callers[elements[p].arg].push_back(rule_of[p]);
    else
      add(elements[p].arg, p + 1);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; ++r)
      for (uint32_t q : tail_callers[r]) {
        if (returns_unbounded[q] && !returns_unbounded[r]) {
          returns[r].clear();
          returns_unbounded[r] = changed = true;
        }
        for (size_t i = 0; i < returns[q].size(); ++i) changed |= add(r, returns[q][i]);
      }
  }
  sole_return.assign(n, kManyReturns);
  for (uint32_t r = 0; r < n; ++r)
    if (returns[r].size() == 1 && !returns_unbounded[r]) sole_return[r] = returns[r][0];
  // Shortest completions: of each rule (Bellman-Ford style; every rule
  // left is productive, so all are finite), then of each alternative's rest.
  constexpr uint32_t kInf = 0xFFFFFFFF;
  min_len.assign(n, kInf);
  auto element_len = [&](uint32_t p) -> uint64_t {
    const Element& e = elements[p];
    if (e.kind == Kind::bytes) return 1;
    const uint32_t l = min_len[target(p)];
    if (e.kind == Kind::rule || l == kInf) return l;
    return uint64_t{repeats[e.arg].min} * l;
  };
  auto rest_len = [&](uint32_t p) {
    uint64_t len = 0;
    for (; elements[p].kind != Kind::end; ++p) {
      const uint64_t l = element_len(p);
      if (l >= kInf) return kInf;
      len += l;
    }
    return static_cast<uint32_t>(std::min<uint64_t>(len, kInf - 1));
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; ++r)
      for (uint32_t p : rules[r].alternatives) {
        const uint32_t l = rest_len(p);
        if (l < min_len[r]) min_len[r] = l, changed = true;
      }
  }
  min_rest.assign(elements.size(), 0);
  for (uint32_t p = static_cast<uint32_t>(elements.size()); p-- > 0;) {
    if (elements[p].kind == Kind::end) continue;
    min_rest[p] =
        static_cast<uint32_t>(std::min<uint64_t>(element_len(p) + min_rest[p + 1], kInf - 1));
  }
}

}  // namespace kiln
