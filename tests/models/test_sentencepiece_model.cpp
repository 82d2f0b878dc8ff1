// The tokenizer.model reader: fields read back, damaged files refused with
// the file named, and seeded mutations that parse or fail with kiln::Error.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "models/sentencepiece_model.h"

using namespace kiln;

namespace {

std::string varint(uint64_t x) {
  std::string out;
  for (; x >= 0x80; x >>= 7) out += static_cast<char>((x & 0x7F) | 0x80);
  return out + static_cast<char>(x);
}
std::string tag(int field, int wire) { return varint(static_cast<uint64_t>(field << 3 | wire)); }
std::string bytes(int field, const std::string& b) { return tag(field, 2) + varint(b.size()) + b; }
std::string piece(const std::string& text, float score, int type) {
  std::string s(reinterpret_cast<const char*>(&score), 4);
  return bytes(1, bytes(1, text) + tag(2, 5) + s + tag(3, 0) + varint(static_cast<uint64_t>(type)));
}

// <unk>, <s>, </s>, a byte piece and a word; BPE, byte fallback, bos 1; an
// unknown field (99) the reader skips; no dummy prefix.
std::string model() {
  return piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3) + piece("<0x41>", 0, 6) +
         piece("\xE2\x96\x81hi", -1.5f, 1) +
         bytes(2, tag(3, 0) + varint(2) + tag(35, 0) + varint(1) + tag(41, 0) + varint(1)) +
         bytes(3, bytes(1, "nmt_nfkc") + tag(3, 0) + varint(0)) + tag(99, 0) + varint(7);
}

std::string error_of(const std::string& b) {
  try {
    SentencePieceModel::parse(b, "bad.model");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("sentencepiece: a model's pieces and specs read back", "[models][tokenizer][hf]") {
  SentencePieceModel m = SentencePieceModel::parse(model(), "ok.model");
  REQUIRE(m.pieces.size() == 5);
  CHECK(m.pieces[1].text == "<s>");
  CHECK(m.pieces[1].type == 3);
  CHECK(m.pieces[3].type == 6);
  CHECK(m.pieces[4].score == -1.5f);
  CHECK(m.model_type == 2);
  CHECK(m.byte_fallback);
  CHECK(m.bos_id == 1);
  CHECK(m.eos_id == 2);  // the default
  CHECK_FALSE(m.add_dummy_prefix);
}

TEST_CASE("sentencepiece: damaged models are refused naming the file",
          "[models][tokenizer][error]") {
  const std::string m = model();
  CHECK_THAT(error_of(""), Catch::Contains("SentencePiece model 'bad.model': it holds no pieces"));
  CHECK_THAT(error_of(m.substr(0, 5)),
             Catch::Contains("bad.model") && Catch::Contains("runs past the end"));
  CHECK_THAT(error_of(m + "\x80"), Catch::Contains("a varint runs past the end"));
  CHECK_THAT(error_of(m + tag(5, 7)), Catch::Contains("wire type 7 is not protobuf's"));
  CHECK_THAT(error_of(piece("x", 0, 9)), Catch::Contains("piece 0 has type 9"));
  CHECK_THAT(error_of(std::string(11, '\xFF')), Catch::Contains("a varint longer than 10 bytes"));
}

TEST_CASE("sentencepiece: seeded mutations parse or fail with kiln::Error",
          "[models][tokenizer][fuzz]") {
  const std::string seed = model();
  std::mt19937_64 rng(3);
  int parsed = 0, refused = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string m = seed;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n && !m.empty(); ++k) {
      size_t pos = rng() % m.size();
      switch (rng() % 3) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1 << (rng() % 8))); break;
        case 1: m[pos] = static_cast<char>(rng()); break;
        default: m.resize(pos);
      }
    }
    try {
      SentencePieceModel::parse(m, "fuzz.model");
      ++parsed;
    } catch (const Error&) {
      ++refused;
    }
  }
  INFO(parsed << " parsed, " << refused << " refused");
  CHECK(parsed > 100);
  CHECK(refused > 100);
}
