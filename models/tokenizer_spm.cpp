// SentencePiece (BPE variant) as llama.cpp runs it: the text gets a dummy
// space prefix and spaces become U+2581; adjacent symbols are merged
// greedily, the pair forming the highest-scoring token first (the leftmost
// among equal scores); symbols that are not tokens fall back to byte tokens
// <0xXX>, or to the unknown token when the vocabulary has none.
#include <array>
#include <queue>

#include "ir/error.h"
#include "models/tokenizer.h"
#include "models/unicode.h"

namespace kiln {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

struct Symbol {
  int prev, next;
  size_t offset, length;  // into the escaped text; length 0 once merged away
};

struct Bigram {
  int left, right;
  float score;
  size_t length;
  // priority_queue puts the largest first: highest score, then leftmost.
  bool operator<(const Bigram& o) const {
    return score < o.score || (score == o.score && left > o.left);
  }
};

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab v) : Tokenizer(std::move(v)) {
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      std::string name = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
      int32_t id = vocab_.find(name);
      if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
      byte_ids_[b] = id >= 0 ? id : vocab_.unk;
    }
  }

 protected:
  void encode_text(std::string_view raw, bool after_special,
                   std::vector<int32_t>* out) const override {
    std::string text;
    if (vocab_.add_space_prefix && after_special) text = kSpace;
    for (char c : raw) {
      if (c == ' ')
        text += kSpace;
      else
        text += c;
    }
    // One symbol per UTF-8 sequence (by its lead byte, as llama.cpp does).
    std::vector<Symbol> syms;
    for (size_t off = 0; off < text.size();) {
      size_t len =
          std::min(utf8_sequence_length(static_cast<uint8_t>(text[off])), text.size() - off);
      int index = static_cast<int>(syms.size());
      syms.push_back({index - 1, off + len == text.size() ? -1 : index + 1, off, len});
      off += len;
    }
    std::priority_queue<Bigram> queue;
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      std::string pair = text.substr(syms[left].offset, syms[left].length + syms[right].length);
      int32_t id = vocab_.find(pair);
      if (id < 0) return;
      queue.push({left, right, vocab_.scores[id], pair.size()});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
    while (!queue.empty()) {
      Bigram b = queue.top();
      queue.pop();
      Symbol& l = syms[b.left];
      Symbol& r = syms[b.right];
      // Skip pairs whose symbols have changed since they were queued.
      if (l.length == 0 || r.length == 0 || l.length + r.length != b.length) continue;
      l.length += r.length;
      r.length = 0;
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    // Every merged symbol is a token (pairs are only queued when they form
    // one), so only single characters can miss: those become bytes.
    // (llama.cpp's re-splitting of non-token symbols is therefore never used.)
    for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
      std::string_view piece = std::string_view(text).substr(syms[i].offset, syms[i].length);
      int32_t id = vocab_.find(piece);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
      for (char c : piece) out->push_back(byte_id(static_cast<uint8_t>(c)));
    }
  }

  std::string normal_piece(int32_t id) const override {
    const std::string& t = vocab_.tokens[id];
    std::string out;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, kSpace.size(), kSpace) == 0) {
        out += ' ';
        i += kSpace.size();
      } else {
        out += t[i++];
      }
    }
    return out;
  }

  bool strips_leading_space() const override { return vocab_.add_space_prefix; }

 private:
  int32_t byte_id(uint8_t b) const {
    if (byte_ids_[b] < 0) {
      static const char* hex = "0123456789ABCDEF";
      throw Error(std::string("SentencePiece vocabulary has no byte token <0x") + hex[b >> 4] +
                  hex[b & 15] + "> and no unknown token");
    }
    return byte_ids_[b];
  }

  std::array<int32_t, 256> byte_ids_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab) {
  return std::make_unique<SpmTokenizer>(std::move(vocab));
}

}  // namespace kiln
