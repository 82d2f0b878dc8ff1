#include "models/bpe_pretokenizer.h"

#include <cstdint>
#include <cstring>

#include "ir/error.h"
#include "models/unicode.h"

namespace kiln {

namespace {

// Pieces of the text as lengths in code points; together they cover it.
using Pieces = std::vector<size_t>;
using Cps = std::vector<uint32_t>;

bool is_space(uint32_t cp) { return is_unicode_whitespace(cp); }
// \p{L}, \p{N}, \p{P} as llama.cpp's regexes see them: a code point's
// category, except that whitespace is never anything else.
bool is_letter(uint32_t cp) { return !is_space(cp) && is_unicode_letter(cp); }
bool is_number(uint32_t cp) { return !is_space(cp) && is_unicode_number(cp); }
bool is_punct(uint32_t cp) { return !is_space(cp) && is_unicode_punctuation(cp); }

// One regex pass: each piece splits into the leftmost-first, non-overlapping
// matches of `match` and the gaps between them. match(cps, pos, end) returns
// the length of the match starting at pos, 0 for none; no pattern here
// matches the empty string.
template <class Match>
Pieces split(const Cps& cps, const Pieces& in, Match match) {
  Pieces out;
  out.reserve(in.size());
  size_t start = 0;
  for (size_t len : in) {
    size_t end = start + len, gap = start;
    for (size_t pos = start; pos < end;) {
      size_t n = match(cps, pos, end);
      if (n == 0) {
        ++pos;
        continue;
      }
      if (pos > gap) out.push_back(pos - gap);
      out.push_back(n);
      pos += n;
      gap = pos;
    }
    if (end > gap) out.push_back(end - gap);
    start = end;
  }
  return out;
}

// The length of the run of code points from pos satisfying pred.
template <class Pred>
size_t run(const Cps& cps, size_t pos, size_t end, Pred pred) {
  size_t n = 0;
  while (pos + n < end && pred(cps[pos + n])) ++n;
  return n;
}

// \s?X+ for a class X.
template <class Pred>
size_t optional_space_run(const Cps& cps, size_t pos, size_t end, Pred pred) {
  if (pred(cps[pos])) return run(cps, pos, end, pred);
  if (is_space(cps[pos]) && pos + 1 < end && pred(cps[pos + 1]))
    return 1 + run(cps, pos + 1, end, pred);
  return 0;
}

// 's|'t|'re|'ve|'m|'ll|'d at pos, in any case where any_case ((?i:...)):
// the match's length, 0 for none.
template <class Cpt>
size_t contraction(Cpt cpt, size_t pos, size_t hi, bool any_case) {
  if (cpt(pos) != '\'' || pos + 1 >= hi) return 0;
  auto lower = [&](uint32_t c) { return any_case && c >= 'A' && c <= 'Z' ? c + 32 : c; };
  const uint32_t n1 = lower(cpt(pos + 1));
  if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
  if (pos + 2 >= hi) return 0;
  const uint32_t n2 = lower(cpt(pos + 2));
  return (n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l') ? 3 : 0;
}

// Cuts each piece [lo, hi) of `in` into words: cut(lo, hi, add) calls
// add(end) to close the word ending at `end` (add returns its length).
template <class Cut>
Pieces cut_pieces(const Pieces& in, Cut cut) {
  Pieces out;
  out.reserve(in.size());
  size_t start = 0;
  for (size_t len : in) {
    const size_t lo = start, hi = start + len;
    start = hi;
    size_t prev_end = lo;
    auto add = [&](size_t end) {
      const size_t n = end - prev_end;
      if (n > 0) out.push_back(n);
      prev_end = end;
      return n;
    };
    cut(lo, hi, add);
  }
  return out;
}

// GPT-2's regex, a port of llama.cpp's unicode_regex_split_custom_gpt2 so
// that every corner (lookahead at piece ends, out-of-piece neighbours) agrees.
Pieces split_gpt2(const Cps& cps, const Pieces& in) {
  return cut_pieces(in, [&](const size_t lo, const size_t hi, auto&& add) {
    constexpr uint32_t kOut = 0xFFFFFFFF;
    auto cpt = [&](size_t p) { return p >= lo && p < hi ? cps[p] : kOut; };
    // The class flags of the code point at p; nothing outside the piece.
    struct Flags {
      bool in = false, letter = false, number = false, space = false;
    };
    auto flags = [&](size_t p) {
      Flags f;
      if (p < lo || p >= hi) return f;
      f.in = true;
      f.space = is_space(cps[p]);
      f.letter = is_unicode_letter(cps[p]);
      f.number = is_unicode_number(cps[p]);
      return f;
    };
    for (size_t pos = lo; pos < hi;) {
      const uint32_t c = cpt(pos);
      const Flags f = flags(pos);
      if (size_t n = contraction(cpt, pos, hi, false)) {
        pos += add(pos + n);
        continue;
      }
      Flags f2 = c == ' ' ? flags(pos + 1) : f;
      //  ?\p{L}+
      if (f2.letter) {
        pos += c == ' ';
        while (f2.letter) f2 = flags(++pos);
        add(pos);
        continue;
      }
      //  ?\p{N}+
      if (f2.number) {
        pos += c == ' ';
        while (f2.number) f2 = flags(++pos);
        add(pos);
        continue;
      }
      //  ?[^\s\p{L}\p{N}]+
      auto other = [](const Flags& g) { return g.in && !(g.space || g.letter || g.number); };
      if (other(f2)) {
        pos += c == ' ';
        while (other(f2)) f2 = flags(++pos);
        add(pos);
        continue;
      }
      size_t spaces = 0;
      while (flags(pos + spaces).space) ++spaces;
      // \s+(?!\S): leave the last space to prefix the next word.
      if (spaces > 1 && cpt(pos + spaces) != kOut) {
        pos += spaces - 1;
        add(pos);
        continue;
      }
      if (spaces > 0) {
        pos += spaces;
        add(pos);
        continue;
      }
      add(++pos);
    }
  });
}

// Llama 3's regex (max_digits 3), Qwen2's (max_digits 1) and, `cased`,
// OpenAI's o200k (GPT-4o, GPT-OSS). Llama 3's:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// o200k's words split where lower case turns upper and keep a contraction
// after them, and its punctuation takes slashes too:
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?|
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?|
//   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Alternative by alternative at each position, as llama.cpp reads them:
// Llama 3's as unicode_regex_split_custom_llama3 does; o200k's as its regex
// engine does, which sees other scripts' letters as one class, so the cased
// classes are "a letter but not a-z" and "a letter but not A-Z" (marks
// dropping out), with the regex's backtracking.
Pieces split_llama3(const Cps& cps, const Pieces& in, size_t max_digits, bool cased) {
  return cut_pieces(in, [&](const size_t lo, const size_t hi, auto&& add) {
    constexpr uint32_t kOut = 0xFFFFFFFF;
    auto cpt = [&](size_t p) { return p >= lo && p < hi ? cps[p] : kOut; };
    auto in_piece = [&](size_t p) { return p >= lo && p < hi; };
    auto letter = [&](size_t p) { return in_piece(p) && is_unicode_letter(cps[p]); };
    auto upper = [&](size_t p) { return letter(p) && !(cps[p] >= 'a' && cps[p] <= 'z'); };
    auto lower = [&](size_t p) { return letter(p) && !(cps[p] >= 'A' && cps[p] <= 'Z'); };
    auto number = [&](size_t p) { return in_piece(p) && is_unicode_number(cps[p]); };
    auto space = [&](size_t p) { return in_piece(p) && is_space(cps[p]); };
    // The end of o200k's cased word from q (a letter): upper* lower+, the
    // upper run backing off to its last letter that is also lower, else
    // upper+ lower* (lower* empty there); then an optional contraction.
    auto cased_word = [&](size_t q) {
      size_t u = q;
      while (upper(u)) ++u;
      size_t end = u;
      if (lower(u)) {
        while (lower(end)) ++end;
      } else {
        for (size_t j = u; j-- > q;)
          if (lower(j)) {
            end = j + 1;
            break;
          }
      }
      return end + contraction(cpt, end, hi, true);
    };
    for (size_t pos = lo; pos < hi;) {
      const uint32_t c = cpt(pos);
      if (size_t n = cased ? 0 : contraction(cpt, pos, hi, true)) {
        add(pos += n);
        continue;
      }
      // [^\r\n\p{L}\p{N}]? then a word
      if (c != '\r' && c != '\n' && !number(pos) && (letter(pos) || letter(pos + 1))) {
        const size_t q = letter(pos) ? pos : pos + 1;
        if (cased) {
          pos = cased_word(q);
        } else {
          for (pos = q; letter(pos);) ++pos;
        }
        add(pos);
        continue;
      }
      // \p{N}{1,max}: a run of digits in pieces of max_digits
      if (number(pos)) {
        size_t first = pos;
        while (number(pos))
          if (++pos - first >= max_digits) {
            add(pos);
            first = pos;
          }
        add(pos);
        continue;
      }
      //  ?[^\s\p{L}\p{N}]+[\r\n]* (o200k: [\r\n/]*)
      auto other = [&](size_t p) { return in_piece(p) && !space(p) && !letter(p) && !number(p); };
      const size_t q = c == ' ' ? pos + 1 : pos;
      if (other(q)) {
        pos = q;
        while (other(pos)) ++pos;
        while (cpt(pos) == '\r' || cpt(pos) == '\n' || (cased && cpt(pos) == '/')) ++pos;
        add(pos);
        continue;
      }
      size_t spaces = 0, after_newline = 0;
      for (; space(pos + spaces); ++spaces)
        if (cpt(pos + spaces) == '\r' || cpt(pos + spaces) == '\n')
          after_newline = pos + spaces + 1;
      if (after_newline > 0) {  // \s*[\r\n]+
        add(pos = after_newline);
        continue;
      }
      if (spaces > 1 && cpt(pos + spaces) != kOut) {  // \s+(?!\S)
        add(pos += spaces - 1);
        continue;
      }
      if (spaces > 0) {  // \s+
        add(pos += spaces);
        continue;
      }
      add(++pos);
    }
  });
}

Pieces split_default(const Cps& cps, Pieces p) {
  p = split(cps, p, [](const Cps& c, size_t pos, size_t end) {
    return run(c, pos, end, [](uint32_t cp) {
      return is_punct(cp) || (cp < 128 && cp != 0 && std::strchr("$+<=>^~|", static_cast<int>(cp)));
    });
  });
  p = split_gpt2(cps, p);
  p = split(cps, p,
            [](const Cps& c, size_t pos, size_t end) { return run(c, pos, end, is_number); });
  return split(cps, p, [](const Cps& c, size_t pos, size_t end) -> size_t {
    auto digit = [&](size_t i) { return c[i] >= '0' && c[i] <= '9'; };
    return pos + 3 <= end && digit(pos) && digit(pos + 1) && digit(pos + 2) ? 3 : 0;
  });
}

// CJK, Hangul and everything from U+0800 to U+4E00, as the regex's ranges
// say; whitespace there was replaced before llama.cpp's regex saw it.
bool in_deepseek_cjk(uint32_t cp) {
  return ((cp >= 0x0800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF)) && !is_space(cp);
}

Pieces split_deepseek_coder(const Cps& cps, Pieces p) {
  p = split(cps, p, [](const Cps& c, size_t pos, size_t) -> size_t {
    return c[pos] == '\r' || c[pos] == '\n' ? 1 : 0;
  });
  p = split(cps, p, [](const Cps& c, size_t pos, size_t end) {
    return optional_space_run(c, pos, end, is_letter);
  });
  p = split(cps, p, [](const Cps& c, size_t pos, size_t end) {
    return optional_space_run(c, pos, end, is_punct);
  });
  p = split(cps, p,
            [](const Cps& c, size_t pos, size_t end) { return run(c, pos, end, in_deepseek_cjk); });
  return split(
      cps, p, [](const Cps& c, size_t pos, size_t) -> size_t { return is_number(c[pos]) ? 1 : 0; });
}

// DeepSeek LLM's letters: the cased scripts its regex lists range by range
// (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, Glagolitic, Coptic,
// Deseret, Osage, ...), not \p{L}.
bool in_deepseek_llm_letters(uint32_t cp) {
  static constexpr uint32_t kRanges[][2] = {
      {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},
      {0x00D8, 0x00F6},   {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},
      {0x0295, 0x02AF},   {0x0370, 0x0373},   {0x0376, 0x0377},   {0x037B, 0x037D},
      {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},   {0x038C, 0x038C},
      {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},   {0x048A, 0x052F},
      {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
      {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
      {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
      {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
      {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
      {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
      {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
      {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
      {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
      {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
      {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
      {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
      {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
      {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
      {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
      {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943}};
  for (const auto& r : kRanges)
    if (cp >= r[0] && cp <= r[1]) return true;
  return false;
}

// ASCII punctuation and letters' neighbours (!-/ and :-~, which spans the
// ASCII letters), their fullwidth forms, curly quotes, ideographic space
// and full stops.
bool in_deepseek_llm_punct(uint32_t cp) {
  return (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '~') || (cp >= 0xFF01 && cp <= 0xFF0F) ||
         (cp >= 0xFF1A && cp <= 0xFF5E) || (cp >= 0x2018 && cp <= 0x201F) ||
         (cp >= 0x3000 && cp <= 0x3002);
}

// [\r\n], \s?[letters]+, \s?[punctuation]+, \s+$, [CJK]+, \p{N}+
Pieces split_deepseek_llm(const Cps& cps, Pieces p) {
  p = split(cps, p, [](const Cps& c, size_t pos, size_t) -> size_t {
    return c[pos] == '\r' || c[pos] == '\n' ? 1 : 0;
  });
  p = split(cps, p, [](const Cps& c, size_t pos, size_t end) {
    return optional_space_run(c, pos, end, in_deepseek_llm_letters);
  });
  p = split(cps, p, [](const Cps& c, size_t pos, size_t end) {
    return optional_space_run(c, pos, end, in_deepseek_llm_punct);
  });
  p = split(cps, p, [](const Cps& c, size_t pos, size_t end) -> size_t {
    const size_t n = run(c, pos, end, is_space);
    return pos + n == end ? n : 0;  // whitespace up to the piece's end
  });
  p = split(cps, p,
            [](const Cps& c, size_t pos, size_t end) { return run(c, pos, end, in_deepseek_cjk); });
  return split(cps, p,
               [](const Cps& c, size_t pos, size_t end) { return run(c, pos, end, is_number); });
}

// Falcon: [\p{P}\$\+<=>\^~\|`]+, then GPT-2's regex, then [0-9]{3}.
Pieces split_falcon(const Cps& cps, Pieces p) {
  p = split(cps, p, [](const Cps& c, size_t pos, size_t end) {
    return run(c, pos, end, [](uint32_t cp) {
      return is_punct(cp) ||
             (cp < 128 && cp != 0 && std::strchr("$+<=>^~|`", static_cast<int>(cp)));
    });
  });
  p = split_gpt2(cps, p);
  return split(cps, p, [](const Cps& c, size_t pos, size_t end) -> size_t {
    auto digit = [&](size_t i) { return c[i] >= '0' && c[i] <= '9'; };
    return pos + 3 <= end && digit(pos) && digit(pos + 1) && digit(pos + 2) ? 3 : 0;
  });
}

// StarCoder and its kin: every \p{N} alone, then GPT-2's regex.
Pieces split_starcoder(const Cps& cps, Pieces p) {
  p = split(cps, p,
            [](const Cps& c, size_t pos, size_t) -> size_t { return is_number(c[pos]) ? 1 : 0; });
  return split_gpt2(cps, p);
}

}  // namespace

BpePreTokenizer find_bpe_pre_tokenizer(std::string_view name) {
  if (name.empty() || name == "default") return BpePreTokenizer::llama_default;
  if (name == "deepseek-coder") return BpePreTokenizer::deepseek_coder;
  if (name == "deepseek-llm") return BpePreTokenizer::deepseek_llm;
  if (name == "falcon") return BpePreTokenizer::falcon;
  // The names llama.cpp maps to StarCoder's regexes.
  for (std::string_view starcoder : {"starcoder", "refact", "command-r", "smollm", "codeshell",
                                     "exaone", "minerva-7b", "mellum2"})
    if (name == starcoder) return BpePreTokenizer::starcoder;
  for (std::string_view llama3 : {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"})
    if (name == llama3) return BpePreTokenizer::llama3;
  for (std::string_view qwen2 : {"qwen2", "deepseek-r1-qwen", "megrez"})
    if (name == qwen2) return BpePreTokenizer::qwen2;
  for (std::string_view o200k : {"gpt-4o", "minimax-m2"})
    if (name == o200k) return BpePreTokenizer::o200k;
  // The names llama.cpp maps to the plain GPT-2 regex.
  for (std::string_view gpt2 :
       {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
        "mellum", "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"})
    if (name == gpt2) return BpePreTokenizer::gpt2;
  throw Error(
      "unsupported BPE pre-tokenizer '" + std::string(name) +
      "' (Kiln knows default, gpt-2, llama-bpe, qwen2, gpt-4o, starcoder and their aliases, "
      "falcon, deepseek-coder and deepseek-llm)");
}

std::vector<std::string> pre_tokenize(BpePreTokenizer kind, std::string_view text) {
  Cps cps = utf8_to_codepoints(text);
  Pieces pieces = {cps.size()};
  switch (kind) {
    case BpePreTokenizer::gpt2: pieces = split_gpt2(cps, pieces); break;
    case BpePreTokenizer::llama_default: pieces = split_default(cps, pieces); break;
    case BpePreTokenizer::deepseek_coder: pieces = split_deepseek_coder(cps, pieces); break;
    case BpePreTokenizer::deepseek_llm: pieces = split_deepseek_llm(cps, pieces); break;
    case BpePreTokenizer::falcon: pieces = split_falcon(cps, pieces); break;
    case BpePreTokenizer::starcoder: pieces = split_starcoder(cps, pieces); break;
    case BpePreTokenizer::llama3: pieces = split_llama3(cps, pieces, 3, false); break;
    case BpePreTokenizer::qwen2: pieces = split_llama3(cps, pieces, 1, false); break;
    case BpePreTokenizer::o200k: pieces = split_llama3(cps, pieces, 3, true); break;
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t start = 0;
  for (size_t n : pieces) {
    if (n > 0) words.push_back(codepoints_to_utf8(cps.data() + start, n));
    start += n;
  }
  return words;
}

}  // namespace kiln
