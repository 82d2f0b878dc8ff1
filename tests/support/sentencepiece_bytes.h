// SentencePiece ModelProto bytes built by hand (protobuf's wire format), for
// tests of the tokenizer.model reader and of folders that carry one.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::test {

inline std::string varint(uint64_t x) {
  std::string out;
  for (; x >= 0x80; x >>= 7) out += static_cast<char>((x & 0x7F) | 0x80);
  return out + static_cast<char>(x);
}
inline std::string tag(int field, int wire) {
  return varint(static_cast<uint64_t>(field << 3 | wire));
}
inline std::string bytes(int field, const std::string& b) {
  return tag(field, 2) + varint(b.size()) + b;
}
// One SentencePiece (text, score, type) as ModelProto field 1.
inline std::string piece(const std::string& text, float score, int type) {
  std::string s(reinterpret_cast<const char*>(&score), 4);
  return bytes(1, bytes(1, text) + tag(2, 5) + s + tag(3, 0) + varint(static_cast<uint64_t>(type)));
}

// <unk>, <s>, </s>, a byte piece and a word; BPE, byte fallback, bos 1; an
// unknown field (99) the reader skips; no dummy prefix.
inline std::string small_sentencepiece_model() {
  return piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3) + piece("<0x41>", 0, 6) +
         piece("\xE2\x96\x81hi", -1.5f, 1) +
         bytes(2, tag(3, 0) + varint(2) + tag(35, 0) + varint(1) + tag(41, 0) + varint(1)) +
         bytes(3, bytes(1, "nmt_nfkc") + tag(3, 0) + varint(0)) + tag(99, 0) + varint(7);
}

}  // namespace kiln::test
