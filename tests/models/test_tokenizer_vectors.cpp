// llama.cpp's tokenizer test vectors (../shared/data/vocab, see its README):
// every input must encode to exactly the expected ids and decode back.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
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

// Where llama.cpp's own vocabularies and their vectors are kept
// (tools/setup-debian.sh --test fetches them from its pinned source).
std::string llamacpp_dir() {
  if (const char* d = std::getenv("KILN_LLAMACPP_DATA"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/kiln/llama.cpp" : std::string();
}

// The vocabulary's tokenizer, from the shared data or llama.cpp's; null,
// with a warning (never silently), when neither has it.
std::unique_ptr<Tokenizer> open_vocab(const std::string& name, std::string* path) {
  *path = vocab_dir() + "/ggml-vocab-" + name + ".gguf";
  if (!fs::exists(*path)) *path = llamacpp_dir() + "/ggml-vocab-" + name + ".gguf";
  if (!fs::exists(*path)) {
    WARN("skipped: ggml-vocab-" << name
                                << ".gguf is absent (set KILN_VOCAB_DIR to the vocab "
                                   "test data, or run tools/setup-debian.sh --test)");
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

// A SentencePiece vocabulary written as Hugging Face's converter writes it
// to tokenizer.json (tokenizers' SentencePieceExtractor): BPE with byte
// fallback, no scores; for each piece, every split into two pieces (by
// their ids) becomes a merge, the merges stably sorted by the piece's score,
// highest first; spaces become U+2581 and one is prepended by the
// normalizer. Read back through models/hf_tokenizer.h.
std::unique_ptr<Tokenizer> spm_through_tokenizer_json(const Vocab& v) {
  std::map<std::string, int32_t> ids;
  for (int32_t i = 0; i < v.size(); ++i) ids.emplace(v.tokens[i], i);
  struct Merge {
    int32_t l, r;
    float score;
  };
  std::vector<Merge> merges;
  for (int32_t i = 0; i < v.size(); ++i) {
    const std::string& t = v.tokens[i];
    std::vector<Merge> local;
    for (size_t cut = 1; cut < t.size(); ++cut) {
      auto l = ids.find(t.substr(0, cut)), r = ids.find(t.substr(cut));
      if (l != ids.end() && r != ids.end()) local.push_back({l->second, r->second, v.scores[i]});
    }
    std::sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return std::pair(a.l, a.r) < std::pair(b.l, b.r);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array(),
                 merge_texts = nlohmann::json::array();
  for (int32_t i = 0; i < v.size(); ++i) {
    vocab[v.tokens[i]] = i;
    if (v.types[i] == TokenType::control || v.types[i] == TokenType::unknown)
      added.push_back({{"id", i}, {"content", v.tokens[i]}, {"special", true}});
  }
  for (const Merge& m : merges) merge_texts.push_back(v.tokens[m.l] + " " + v.tokens[m.r]);
  const std::string space = "\xe2\x96\x81";
  nlohmann::json tok = {
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", space}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}}}}}},
      {"pre_tokenizer", nullptr},
      {"model",
       {{"type", "BPE"},
        {"byte_fallback", true},
        {"fuse_unk", true},
        {"unk_token", v.unk >= 0 ? nlohmann::json(v.tokens[v.unk]) : nlohmann::json()},
        {"vocab", vocab},
        {"merges", merge_texts}}}};
  const fs::path dir =
      fs::temp_directory_path() / ("kiln-test-hf-spm-json-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  GgufWriter w;
  add_hf_tokenizer(dir.string(), v.bos, v.eos, v.size(), w);
  fs::remove_all(dir);
  GgufFile back = GgufFile::open_memory(w.bytes(), "tokenizer.json as GGUF");
  CHECK(back.get_string("tokenizer.ggml.model") == "llama");
  if (v.unk >= 0)
    CHECK(back.get_u32("tokenizer.ggml.unknown_token_id") == static_cast<uint32_t>(v.unk));
  return Tokenizer::from_gguf(back);
}

TEST_CASE("SentencePiece (llama-spm) from a scoreless tokenizer.json matches llama.cpp's vectors",
          "[models][tokenizer][hf]") {
  std::string path;
  if (!open_vocab("llama-spm", &path)) return;
  std::unique_ptr<Tokenizer> tok =
      spm_through_tokenizer_json(Vocab::from_gguf(GgufFile::open(path)));
  CHECK(tok->bos_id() == 1);
  CHECK(tok->add_bos_default());
  check_vectors("llama-spm", true, std::move(tok), path);
}

// The same without the shared data: a small SentencePiece vocabulary with
// random scores (the byte pieces, "<unk>", "<s>", "</s>", U+2581 and five
// letters, then pieces joining two earlier ones), and random texts over
// its letters: tokenizer.json (scores gone, only merge ranks) must encode
// every text as the scored vocabulary does.
TEST_CASE("a scoreless SentencePiece tokenizer.json encodes as its scored vocabulary",
          "[models][tokenizer][hf]") {
  const std::string space = "\xe2\x96\x81";
  std::mt19937 rng(5);
  Vocab v;
  v.model = "llama";
  v.add_space_prefix = true;
  v.add_bos = true;
  auto piece = [&](const std::string& t, TokenType type, float score) {
    v.tokens.push_back(t);
    v.types.push_back(type);
    v.scores.push_back(score);
  };
  piece("<unk>", TokenType::unknown, 0);
  piece("<s>", TokenType::control, 0);
  piece("</s>", TokenType::control, 0);
  v.unk = 0, v.bos = 1, v.eos = 2;
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    piece(std::string{'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'}, TokenType::byte, 0);
  const size_t first = v.tokens.size();
  for (const std::string& c : {space, std::string("a"), std::string("b"), std::string("c"),
                               std::string("d"), std::string("e")})
    piece(c, TokenType::normal, -1000 - static_cast<float>(v.tokens.size()));
  std::set<std::string> have(v.tokens.begin(), v.tokens.end());
  while (v.tokens.size() < first + 80) {
    const std::string t = v.tokens[first + rng() % (v.tokens.size() - first)] +
                          v.tokens[first + rng() % (v.tokens.size() - first)];
    if (t.size() <= 8 && have.insert(t).second)
      piece(t, TokenType::normal, -static_cast<float>(rng() % 1000));
  }
  v.finish("random SentencePiece vocabulary");
  std::unique_ptr<Tokenizer> scored = Tokenizer::create(v);
  std::unique_ptr<Tokenizer> json = spm_through_tokenizer_json(v);
  int differ = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (int n = 1 + static_cast<int>(rng() % 12); n > 0; --n)
      text += "abcde  \xc3\xa9"[rng() % 10];
    const std::vector<int32_t> want = scored->encode(text, false);
    differ += json->encode(text, false) != want;
    if (differ == 1 && json->encode(text, false) != want) CHECK(text == "(encodes alike)");
  }
  CHECK(differ == 0);
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

TEST_CASE("byte-level BPE of more families matches llama.cpp's vectors", "[models][tokenizer]") {
  for (const char* name : {"falcon", "starcoder", "refact", "command-r", "deepseek-llm"}) {
    INFO(name);
    check_vectors(name, true);
  }
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
