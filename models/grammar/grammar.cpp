#include "models/grammar/grammar.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "ir/error.h"

namespace kiln {

std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  return out;
}

std::vector<CodepointRange> complement_ranges(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (const CodepointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

namespace {

// A code point as GBNF writes it inside a literal or a class.
std::string gbnf_char(uint32_t cp, bool in_class) {
  char buf[16];
  switch (cp) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\\': return "\\\\";
    case '"': return "\\\"";
  }
  if (in_class && (cp == ']' || cp == '[' || cp == '-')) return std::string("\\") + char(cp);
  if (in_class && cp == '^') return "\\x5E";  // a leading ^ would negate the class
  if (cp >= 0x20 && cp < 0x7F) return std::string(1, static_cast<char>(cp));
  if (cp <= 0xFF)
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp <= 0xFFFF)
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

bool single(const GrammarElement& e) {
  return e.kind == GrammarElement::Kind::chars && e.chars.size() == 1 &&
         e.chars[0].lo == e.chars[0].hi;
}

}  // namespace

std::string gbnf_class(const std::vector<CodepointRange>& chars) {
  std::string s = "[";
  for (const CodepointRange& r : chars) {
    s += gbnf_char(r.lo, true);
    if (r.hi != r.lo) s += "-" + gbnf_char(r.hi, true);
  }
  return s + "]";
}

std::string gbnf_literal(std::string_view utf8) {
  std::string s = "\"";
  for (char c : utf8) {
    const unsigned char u = static_cast<unsigned char>(c);
    s += u < 0x80 ? gbnf_char(u, false) : std::string(1, c);  // UTF-8 passes through
  }
  return s + "\"";
}

std::string Grammar::to_gbnf() const {
  // Generated names ("item_7") are not GBNF words: written with dashes,
  // made unique against the other names.
  std::vector<std::string> names;
  std::set<std::string> taken;
  for (const GrammarRule& r : rules) taken.insert(r.name);
  for (const GrammarRule& r : rules) {
    std::string n = r.name;
    for (char& c : n)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
        c = '-';
    if (n != r.name) {
      while (taken.count(n)) n += "-x";
      taken.insert(n);
    }
    names.push_back(n);
  }
  std::string out;
  auto emit_rule = [&](const GrammarRule& r) {
    out += names[&r - rules.data()] + " ::=";
    for (size_t a = 0; a < r.alternatives.size(); ++a) {
      if (a) out += " |";
      const GrammarSequence& seq = r.alternatives[a];
      if (seq.empty()) out += " \"\"";  // a bare trailing '|' would continue on the next line
      for (size_t i = 0; i < seq.size();) {
        out += ' ';
        if (single(seq[i])) {  // a run of single code points is a literal
          out += '"';
          for (; i < seq.size() && single(seq[i]); ++i) out += gbnf_char(seq[i].chars[0].lo, false);
          out += '"';
        } else if (seq[i].kind == GrammarElement::Kind::chars) {
          const std::vector<CodepointRange>& chars = seq[i++].chars;
          out += chars.empty() ? std::string("[^\\x00-\\U0010FFFF]") : gbnf_class(chars);
        } else if (seq[i].kind == GrammarElement::Kind::repeat) {
          out += names[seq[i].rule] + "{" + std::to_string(seq[i].min) + "," +
                 std::to_string(seq[i].max) + "}";
          ++i;
        } else {
          out += names[seq[i++].rule];
        }
      }
    }
    out += '\n';
  };
  if (root < rules.size()) emit_rule(rules[root]);
  for (size_t i = 0; i < rules.size(); ++i)
    if (i != root) emit_rule(rules[i]);
  return out;
}

void Grammar::check() const {
  if (root >= rules.size()) throw Error("grammar has no 'root' rule");
  for (const GrammarRule& r : rules)
    for (const GrammarSequence& seq : r.alternatives)
      for (const GrammarElement& e : seq)
        if (e.refers() && e.rule >= rules.size())
          throw Error("grammar rule '" + r.name + "' refers to rule #" + std::to_string(e.rule) +
                      ", which does not exist");
  const size_t n = rules.size();
  // Which rules can match the empty string, and which can match anything at all.
  std::vector<char> nullable(n, 0), productive(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      for (const GrammarSequence& seq : rules[i].alternatives) {
        bool all_nullable = true, all_productive = true;
        for (const GrammarElement& e : seq) {
          const bool optional = e.kind == GrammarElement::Kind::repeat && e.min == 0;
          all_nullable &= e.refers() && (optional || nullable[e.rule]);
          all_productive &= e.refers() ? optional || productive[e.rule] : !e.chars.empty();
        }
        if (all_nullable && !nullable[i]) nullable[i] = changed = true;
        if (all_productive && !productive[i]) productive[i] = changed = true;
      }
    }
  }
  // Left recursion: an edge A -> B wherever B can be the first thing A
  // consumes with, i.e. everything before it in the alternative nullable. A
  // cycle reachable from the root would make the matcher expand forever.
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t i = 0; i < n; ++i)
    for (const GrammarSequence& seq : rules[i].alternatives)
      for (const GrammarElement& e : seq) {
        if (!e.refers()) break;
        first[i].push_back(e.rule);
        if (!nullable[e.rule] && !(e.kind == GrammarElement::Kind::repeat && e.min == 0)) break;
      }
  // Reachable rules: left recursion anywhere the root can lead to is an error.
  std::vector<char> reachable(n, 0);
  std::vector<uint32_t> work = {root};
  reachable[root] = 1;
  while (!work.empty()) {
    uint32_t r = work.back();
    work.pop_back();
    for (const GrammarSequence& seq : rules[r].alternatives)
      for (const GrammarElement& e : seq)
        if (e.refers() && !reachable[e.rule]) reachable[e.rule] = 1, work.push_back(e.rule);
  }
  // Iterative depth-first search for a cycle of `first` edges (deep
  // grammars must not overflow the stack): an edge to a rule still on the
  // path closes one.
  std::vector<uint8_t> color(n, 0);  // 0 unvisited, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t start = 0; start < n; ++start) {
    if (!reachable[start] || color[start] != 0) continue;
    color[start] = 1;
    path = {{start, 0}};
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == first[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = first[r][next++];
      if (color[to] == 1) {
        std::string cycle;
        size_t from = 0;
        while (path[from].first != to) ++from;
        for (size_t i = from; i < path.size(); ++i) cycle += rules[path[i].first].name + " -> ";
        throw Error("grammar rule '" + rules[to].name + "' is left-recursive: " + cycle +
                    rules[to].name + " without consuming a character");
      }
      if (color[to] == 0) {
        color[to] = 1;
        path.push_back({to, 0});
      }
    }
  }
  if (!productive[root])
    throw Error("grammar matches no string: rule '" + rules[root].name +
                "' never finishes (every alternative needs an endless or empty part)");
}

}  // namespace kiln
