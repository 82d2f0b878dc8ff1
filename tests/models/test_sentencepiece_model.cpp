// The tokenizer.model reader: fields read back, damaged files refused with
// the file named, and seeded mutations that parse or fail with kiln::Error.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "models/sentencepiece_model.h"
#include "support/sentencepiece_bytes.h"

using namespace kiln;

namespace {

using kiln::test::bytes;
using kiln::test::piece;
using kiln::test::tag;
using kiln::test::varint;

std::string model() { return kiln::test::small_sentencepiece_model(); }

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
