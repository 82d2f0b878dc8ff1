// Byte-level BPE (GPT-2) as llama.cpp runs it: the pre-tokenizer cuts the
// text into words; each word's bytes are spelled with GPT-2's byte-to-
// unicode alphabet (printable bytes as themselves, the rest from U+0100 up)
// and its adjacent symbols are merged, the pair with the lowest merge rank
// first (the leftmost among equal ranks). A final symbol that is not a token
// falls back to its single bytes' tokens.
#include <array>
#include <queue>
#include <unordered_map>

#include "ir/error.h"
#include "models/bpe_pretokenizer.h"
#include "models/tokenizer.h"
#include "models/unicode.h"

namespace kiln {

namespace {

// GPT-2's bytes_to_unicode(): byte -> UTF-8 of its stand-in code point, and back.
struct ByteAlphabet {
  std::array<std::string, 256> utf8;
  std::array<int, 324> byte_of;  // stand-in code point -> byte, -1 if none

  ByteAlphabet() {
    byte_of.fill(-1);
    auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      int cp = printable(b) ? b : next++;
      append_utf8(&utf8[b], static_cast<uint32_t>(cp));
      byte_of[cp] = b;
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a;
  return a;
}

struct MergeKey {
  std::string left, right;
  bool operator==(const MergeKey&) const = default;
};
struct MergeKeyHash {
  size_t operator()(const MergeKey& k) const {
    size_t h = std::hash<std::string>{}(k.left);
    return h ^ (std::hash<std::string>{}(k.right) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }
};

struct Symbol {
  int prev, next;
  size_t offset, length;  // into the word; length 0 once merged away
};

struct Bigram {
  int left, right;
  int rank;
  std::string text;
  // priority_queue puts the largest first: lowest rank, then leftmost.
  bool operator<(const Bigram& o) const {
    return rank > o.rank || (rank == o.rank && left > o.left);
  }
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(Vocab v)
      : Tokenizer(std::move(v)), pre_(find_bpe_pre_tokenizer(vocab_.pre)) {
    ranks_.reserve(vocab_.merges.size());
    for (size_t i = 0; i < vocab_.merges.size(); ++i) {
      const std::string& m = vocab_.merges[i];
      // Split at the first space after the first byte (a merge's left side
      // may itself start with a space).
      size_t sp = m.find(' ', 1);
      if (sp == std::string::npos) continue;
      ranks_.emplace(MergeKey{m.substr(0, sp), m.substr(sp + 1)}, static_cast<int>(i));
    }
  }

 protected:
  void encode_text(std::string_view text, bool, std::vector<int32_t>* out) const override {
    const ByteAlphabet& alphabet = byte_alphabet();
    for (const std::string& raw : pre_tokenize(pre_, text)) {
      std::string word;
      for (char c : raw) word += alphabet.utf8[static_cast<uint8_t>(c)];
      encode_word(word, out);
    }
  }

  std::string normal_piece(int32_t id) const override {
    const ByteAlphabet& alphabet = byte_alphabet();
    const std::string& t = vocab_.tokens[id];
    std::string out;
    for (size_t pos = 0; pos < t.size();) {
      uint32_t cp = decode_utf8(t, &pos);
      int b = cp < alphabet.byte_of.size() ? alphabet.byte_of[cp] : -1;
      // A code point outside the alphabet (a hand-made vocabulary) stands for itself.
      if (b >= 0)
        out += static_cast<char>(b);
      else
        append_utf8(&out, cp);
    }
    return out;
  }

 private:
  int rank(const std::string& left, const std::string& right) const {
    auto it = ranks_.find(MergeKey{left, right});
    return it == ranks_.end() ? -1 : it->second;
  }

  void encode_word(const std::string& word, std::vector<int32_t>* out) const {
    std::vector<Symbol> syms;
    for (size_t off = 0; off < word.size();) {
      size_t len =
          std::min(utf8_sequence_length(static_cast<uint8_t>(word[off])), word.size() - off);
      int index = static_cast<int>(syms.size());
      syms.push_back({index - 1, off + len == word.size() ? -1 : index + 1, off, len});
      off += len;
    }
    auto text_of = [&](const Symbol& s) { return word.substr(s.offset, s.length); };
    std::priority_queue<Bigram> queue;
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      std::string l = text_of(syms[left]), r = text_of(syms[right]);
      int k = rank(l, r);
      if (k >= 0) queue.push({left, right, k, l + r});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
    while (!queue.empty()) {
      Bigram b = queue.top();
      queue.pop();
      Symbol& l = syms[b.left];
      Symbol& r = syms[b.right];
      // Skip pairs whose symbols have changed since they were queued.
      if (l.length == 0 || r.length == 0 || l.length + r.length != b.text.size() ||
          word.compare(l.offset, b.text.size(), b.text) != 0)
        continue;
      l.length += r.length;
      r.length = 0;
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
      std::string piece = text_of(syms[i]);
      int32_t id = vocab_.find(piece);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
      for (char c : piece) {
        int32_t byte = vocab_.find(std::string(1, c));
        if (byte >= 0) out->push_back(byte);
      }
    }
  }

  BpePreTokenizer pre_;
  std::unordered_map<MergeKey, int, MergeKeyHash> ranks_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab) {
  return std::make_unique<BpeTokenizer>(std::move(vocab));
}

}  // namespace kiln
