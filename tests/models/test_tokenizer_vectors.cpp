// llama.cpp's tokenizer test vectors (../shared/data/vocab, see its README):
// every input must encode to exactly the expected ids and decode back.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/hf_tokenizer.h"
#include "models/tokenizer.h"
#include "models/vocab.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::string vocab_dir() {
  if (const char* d = std::getenv("KILN_VOCAB_DIR"); d && *d) return d;
  return std::string(KILN_SOURCE_DIR) + "/../shared/data/vocab";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// Each input is followed by the separator; each output line holds the ids.
std::vector<Case> load_cases(const std::string& gguf) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string inp = read_all(gguf + ".inp"), outs = read_all(gguf + ".out");
  std::vector<Case> cases;
  for (size_t pos = 0, hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    cases.push_back({inp.substr(pos, hit - pos), {}});
  std::istringstream lines(outs);
  std::string line;
  for (Case& c : cases) {
    REQUIRE(std::getline(lines, line));
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

// The vocabulary's tokenizer; null, with a warning (never silently), when
// the shared data is absent.
std::unique_ptr<Tokenizer> open_vocab(const std::string& name, std::string* path) {
  *path = vocab_dir() + "/ggml-vocab-" + name + ".gguf";
  if (!fs::exists(*path)) {
    WARN("skipped: " << *path << " is absent (set KILN_VOCAB_DIR to the vocab test data)");
    return nullptr;
  }
  return Tokenizer::from_gguf(GgufFile::open(*path));
}

void check_vectors(const std::string& name, bool lossless, std::unique_ptr<Tokenizer> tok,
                   const std::string& path) {
  std::vector<Case> cases = load_cases(path);
  REQUIRE(cases.size() > 40);
  for (const Case& c : cases) {
    INFO(name << " input '" << c.text << "'");
    std::vector<int32_t> ids = tok->encode(c.text, false);
    CHECK(ids == c.ids);
    if (lossless) CHECK(tok->decode(ids) == c.text);
  }
}

void check_vectors(const std::string& name, bool lossless) {
  std::string path;
  if (std::unique_ptr<Tokenizer> tok = open_vocab(name, &path))
    check_vectors(name, lossless, std::move(tok), path);
}

// The vocabulary written as a Hugging Face tokenizer.json (byte-level BPE,
// GPT-2's built-in regex; control tokens as special added tokens), read
// back through models/hf_tokenizer.h.
std::unique_ptr<Tokenizer> through_tokenizer_json(const GgufFile& f) {
  Vocab v = Vocab::from_gguf(f);
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (int32_t i = 0; i < v.size(); ++i) {
    vocab[v.tokens[i]] = i;
    if (v.types[i] == TokenType::control)
      added.push_back({{"id", i}, {"content", v.tokens[i]}, {"special", true}});
  }
  nlohmann::json tok = {
      {"added_tokens", added},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", v.merges}}}};
  const fs::path dir =
      fs::temp_directory_path() / ("kiln-test-hf-tokenizer-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  fs::remove(dir / "tokenizer_config.json");
  GgufWriter w;
  add_hf_tokenizer(dir.string(), v.bos, v.eos, v.size(), w);
  fs::remove_all(dir);
  GgufFile back = GgufFile::open_memory(w.bytes(), "tokenizer.json as GGUF");
  CHECK(back.get_string("tokenizer.ggml.pre") == "gpt-2");
  return Tokenizer::from_gguf(back);
}

}  // namespace

TEST_CASE("SentencePiece (llama-spm) matches llama.cpp's vectors", "[models][tokenizer]") {
  check_vectors("llama-spm", true);
}

TEST_CASE("byte-level BPE (gpt-2) matches llama.cpp's vectors", "[models][tokenizer]") {
  check_vectors("gpt-2", true);
}

// The vocabulary written as a SentencePiece tokenizer.model (protobuf:
// pieces, trainer_spec's model type and ids, normalizer_spec's dummy
// prefix), read back through models/hf_tokenizer.h.
std::unique_ptr<Tokenizer> through_tokenizer_model(const GgufFile& f) {
  Vocab v = Vocab::from_gguf(f);
  auto varint = [](std::string* out, uint64_t x) {
    for (; x >= 0x80; x >>= 7) *out += static_cast<char>((x & 0x7F) | 0x80);
    *out += static_cast<char>(x);
  };
  auto field = [&](std::string* out, int tag, int wire) {
    varint(out, static_cast<uint64_t>(tag << 3 | wire));
  };
  auto bytes = [&](std::string* out, int tag, const std::string& b) {
    field(out, tag, 2);
    varint(out, b.size());
    *out += b;
  };
  std::string model;
  for (int32_t i = 0; i < v.size(); ++i) {
    std::string piece;
    bytes(&piece, 1, v.tokens[i]);
    field(&piece, 2, 5);
    piece.append(reinterpret_cast<const char*>(&v.scores[i]), 4);
    field(&piece, 3, 0);
    varint(&piece, static_cast<uint64_t>(v.types[i]));
    bytes(&model, 1, piece);
  }
  std::string trainer, normalizer;
  for (auto [tag, value] : {std::pair{3, 2}, {35, 1}, {40, v.unk}, {41, v.bos}, {42, v.eos}}) {
    field(&trainer, tag, 0);
    varint(&trainer, static_cast<uint64_t>(value));
  }
  field(&normalizer, 3, 0);
  varint(&normalizer, v.add_space_prefix);
  bytes(&model, 2, trainer);
  bytes(&model, 3, normalizer);
  const fs::path dir = fs::temp_directory_path() / ("kiln-test-hf-spm-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.model", std::ios::binary) << model;
  GgufWriter w;
  add_hf_tokenizer(dir.string(), std::nullopt, std::nullopt, v.size(), w);
  fs::remove_all(dir);
  return Tokenizer::from_gguf(GgufFile::open_memory(w.bytes(), "tokenizer.model as GGUF"));
}

TEST_CASE("SentencePiece (llama-spm) from a tokenizer.model matches llama.cpp's vectors",
          "[models][tokenizer][hf]") {
  std::string path;
  if (!open_vocab("llama-spm", &path)) return;
  std::unique_ptr<Tokenizer> tok = through_tokenizer_model(GgufFile::open(path));
  CHECK(tok->bos_id() == 1);
  CHECK(tok->add_bos_default());
  check_vectors("llama-spm", true, std::move(tok), path);
}

TEST_CASE("byte-level BPE (gpt-2) from a tokenizer.json matches llama.cpp's vectors",
          "[models][tokenizer][hf]") {
  std::string path;
  if (!open_vocab("gpt-2", &path)) return;
  check_vectors("gpt-2", true, through_tokenizer_json(GgufFile::open(path)), path);
}

TEST_CASE("byte-level BPE (deepseek-coder) matches llama.cpp's vectors", "[models][tokenizer]") {
  check_vectors("deepseek-coder", true);
}

TEST_CASE("real vocabularies: BOS, user-defined tokens, random round trips",
          "[models][tokenizer]") {
  std::string path;
  if (auto spm = open_vocab("llama-spm", &path)) {
    CHECK(spm->vocab_size() == 32000);
    CHECK(spm->add_bos_default());
    std::vector<int32_t> ids = spm->encode("Hello world", true);
    CHECK(ids == std::vector<int32_t>{1, 15043, 3186});
    CHECK(spm->decode(ids) == "Hello world");
    CHECK(spm->token_to_piece(15043) == " Hello");
  }
  if (auto ds = open_vocab("deepseek-coder", &path)) {
    CHECK(ds->bos_id() == 32013);
    CHECK(ds->eos_id() == 32014);
    // <｜fim▁hole｜> is user-defined: it matches as itself inside text.
    std::string hole =
        "<\xEF\xBD\x9C"
        "fim\xE2\x96\x81hole\xEF\xBD\x9C>";
    std::vector<int32_t> ids = ds->encode("a" + hole + "b", false);
    CHECK(ids.size() == 3);
    CHECK(ids[1] == 32015);
    CHECK(ds->decode(ids) == "a" + hole + "b");
    // The BOS control token's text is plain text.
    std::string bos_text = ds->token_to_piece(32013, true);
    CHECK(ds->token_to_piece(32013).empty());
    std::vector<int32_t> plain = ds->encode(bos_text, false);
    CHECK(plain.size() > 1);
    CHECK(std::count(plain.begin(), plain.end(), 32013) == 0);
  }
  // Random strings over an alphabet of scripts, spaces and emoji decode back
  // to themselves with every vocabulary.
  const std::vector<std::string> alphabet = {"a",
                                             "Z",
                                             "0",
                                             "7",
                                             " ",
                                             "  ",
                                             "\t",
                                             "\n",
                                             "'",
                                             "s",
                                             ".",
                                             "!",
                                             "(",
                                             "$",
                                             "\xC3\xA9",
                                             "\xC3\xBC",
                                             "\xC3\x9F",
                                             "\xE4\xB8\x96",
                                             "\xE7\x95\x8C",
                                             "\xE1\x9E\x80",
                                             "\xE1\x9E\xB6",
                                             "\xF0\x9F\x98\x80",
                                             "\xF0\x9F\xA6\x99",
                                             "\xE2\x80\x8D",
                                             "\xE3\x80\x80",
                                             "\xE2\x80\x99",
                                             "\xD0\xB6",
                                             "\xD9\xA3"};
  for (std::string name : {"llama-spm", "gpt-2", "deepseek-coder"}) {
    auto tok = open_vocab(name, &path);
    if (!tok) continue;
    std::mt19937 rng(7);
    for (int i = 0; i < 300; ++i) {
      std::string s;
      for (int n = rng() % 24; n > 0; --n) s += alphabet[rng() % alphabet.size()];
      INFO(name << " '" << s << "'");
      CHECK(tok->decode(tok->encode(s, false)) == s);
    }
  }
}
