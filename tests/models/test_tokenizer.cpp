// Tokenizers on small hand-made vocabularies (so the merge rules are tested
// without the shared vocab data), the pre-tokenizers' word cuts, and the
// errors for bad tokenizer metadata.
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>

#include "ir/error.h"
#include "models/bpe_pretokenizer.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/tokenizer.h"

using namespace kiln;
using W = GgufWriter;

namespace {

const char* const kSp = "\xE2\x96\x81";  // U+2581

struct Tok {
  std::string text;
  float score = 0;
  TokenType type = TokenType::normal;
};

Vocab make_vocab(const std::string& model, const std::vector<Tok>& toks) {
  Vocab v;
  v.model = model;
  for (const Tok& t : toks) {
    v.tokens.push_back(t.text);
    v.scores.push_back(t.score);
    v.types.push_back(t.type);
  }
  v.finish("test vocab");
  return v;
}

// <unk> <s> </s>, the 256 byte tokens, then `extra`.
Vocab spm_vocab(const std::vector<Tok>& extra, bool bytes = true) {
  std::vector<Tok> toks = {{"<unk>", 0, TokenType::unknown},
                           {"<s>", 0, TokenType::control},
                           {"</s>", 0, TokenType::control}};
  static const char* hex = "0123456789ABCDEF";
  if (bytes)
    for (int b = 0; b < 256; ++b)
      toks.push_back({std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, TokenType::byte});
  toks.insert(toks.end(), extra.begin(), extra.end());
  Vocab v = make_vocab("llama", toks);
  v.bos = 1, v.eos = 2, v.unk = 0;
  v.add_bos = v.add_space_prefix = true;
  return v;
}

// GPT-2's stand-in for every byte (bytes_to_unicode).
std::string gpt2_char(int b) {
  static std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int c = 0; c < 256; ++c) {
      bool printable = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      int cp = printable ? c : next++;
      if (cp < 0x80)
        t[c] = std::string(1, static_cast<char>(cp));
      else
        t[c] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    return t;
  }();
  return table[b];
}

// The 256 byte tokens, then `extra`; merges as given.
Vocab bpe_vocab(const std::vector<Tok>& extra, const std::vector<std::string>& merges) {
  std::vector<Tok> toks;
  for (int b = 0; b < 256; ++b) toks.push_back({gpt2_char(b)});
  toks.insert(toks.end(), extra.begin(), extra.end());
  Vocab v = make_vocab("gpt2", toks);
  v.merges = merges;
  v.pre = "gpt-2";
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("SentencePiece merges the highest-scoring pair first", "[models][tokenizer]") {
  std::string sp = kSp;
  auto tok = Tokenizer::create(spm_vocab({{sp, -10},
                                          {sp + "h", -3},
                                          {"he", -1},
                                          {"ll", -2},
                                          {"llo", -1},
                                          {sp + "he", -4},
                                          {"x", -5}}));
  int32_t he4 = tok->vocab().find(sp + "he"), llo = tok->vocab().find("llo");
  // he (-1), then ll (-2), then llo (-1), then ▁he (-4): not left to right.
  CHECK(tok->encode("hello", false) == std::vector<int32_t>{he4, llo});
  CHECK(tok->encode("hello", true) == std::vector<int32_t>{1, he4, llo});
  CHECK(tok->decode(tok->encode("hello", true)) == "hello");
  // é has no token: its two bytes fall back to <0xC3> <0xA9>.
  int32_t h3 = tok->vocab().find(sp + "h");
  CHECK(tok->encode("h\xC3\xA9", false) == std::vector<int32_t>{h3, 3 + 0xC3, 3 + 0xA9});
  CHECK(tok->decode(tok->encode(" h\xC3\xA9\tx ", false)) == " h\xC3\xA9\tx ");
  CHECK(tok->encode("", true) == std::vector<int32_t>{1});
  CHECK(tok->token_to_piece(he4) == " he");
  CHECK(tok->token_to_piece(1).empty());
  CHECK(tok->token_to_piece(1, true) == "<s>");
  CHECK(tok->token_to_piece(3 + 'A') == "A");
}

TEST_CASE("SentencePiece without byte tokens falls back to the unknown token",
          "[models][tokenizer]") {
  Vocab v = spm_vocab({{kSp, -1}, {"a", -1}}, false);
  auto tok = Tokenizer::create(v);
  CHECK(tok->encode("ab", false) == std::vector<int32_t>{3, 4, 0});
  CHECK(tok->decode({3, 4, 0}) == "a");
  v.unk = -1;
  auto no_unk = Tokenizer::create(v);
  CHECK_THAT(error_of([&] { no_unk->encode("b", false); }),
             Catch::Contains("no byte token <0x62> and no unknown token"));
}

TEST_CASE("control tokens in the text are text unless special tokens are parsed",
          "[models][tokenizer]") {
  std::string sp = kSp;
  auto tok =
      Tokenizer::create(spm_vocab({{sp, -1}, {"a", -1}, {"<|im_start|>", 0, TokenType::control}}));
  const int32_t start = tok->vocab().find("<|im_start|>"), a = tok->vocab().find("a");
  // Parsed (a chat template's layout): the control token, then the text
  // after it with SentencePiece's dummy prefix, as llama.cpp's parse_special.
  CHECK(tok->encode("<|im_start|>a", false, true) ==
        std::vector<int32_t>{start, tok->vocab().find(sp), a});
  CHECK(tok->encode("a<s>", true, true) == std::vector<int32_t>{1, tok->vocab().find(sp), a, 1});
  // Plain (a user's text): its characters as bytes.
  const std::vector<int32_t> plain = tok->encode("<|im_start|>a", false);
  CHECK(std::find(plain.begin(), plain.end(), start) == plain.end());
  CHECK(plain.size() > 10);
}

TEST_CASE("byte-level BPE merges by rank, within words", "[models][tokenizer]") {
  std::string g = gpt2_char(' ');  // Ġ
  auto tok = Tokenizer::create(bpe_vocab({{"ab"},
                                          {"abc"},
                                          {g + "a"},
                                          {"<tool>", 0, TokenType::user_defined},
                                          {"<|endoftext|>", 0, TokenType::control}},
                                         {"a b", "ab c", g + " a"}));
  const Vocab& v = tok->vocab();
  int32_t abc = v.find("abc"), sp = v.find(g), tool = v.find("<tool>"),
          eot = v.find("<|endoftext|>");
  // " abc": "a b" (rank 0) beats "Ġ a" (rank 2), and no merge joins Ġ to abc.
  CHECK(tok->encode("abc abc", false) == std::vector<int32_t>{abc, sp, abc});
  CHECK(tok->decode(tok->encode("abc abc", false)) == "abc abc");
  // User-defined tokens match as themselves, control tokens are plain text.
  std::vector<int32_t> ids = tok->encode("x<tool> <|endoftext|>", false);
  CHECK(ids.size() == 16);
  CHECK(ids[1] == tool);
  CHECK(std::find(ids.begin(), ids.end(), eot) == ids.end());
  CHECK(tok->decode(ids) == "x<tool> <|endoftext|>");
  CHECK(tok->token_to_piece(eot).empty());
  CHECK(tok->token_to_piece(eot, true) == "<|endoftext|>");
  // Invalid UTF-8 becomes U+FFFD, as in llama.cpp.
  CHECK(tok->decode(tok->encode("\xff", false)) == "\xEF\xBF\xBD");
  CHECK_THAT(error_of([&] { tok->encode("a", true); }), Catch::Contains("no BOS token"));
  CHECK_THAT(error_of([&] { tok->token_to_piece(-1); }),
             Catch::Contains("token id -1 is out of range (the vocabulary has 261 tokens)"));
  CHECK_THAT(error_of([&] { tok->token_to_piece(261); }), Catch::Contains("token id 261"));
}

TEST_CASE("pre-tokenizers cut words as llama.cpp's regexes do", "[models][tokenizer]") {
  using V = std::vector<std::string>;
  auto gpt2 = [](std::string_view s) { return pre_tokenize(BpePreTokenizer::gpt2, s); };
  CHECK(gpt2("Hello world") == V{"Hello", " world"});
  CHECK(gpt2("I'm  ok\n\n") == V{"I", "'m", " ", " ok", "\n\n"});
  CHECK(gpt2("3.14 abc!!") == V{"3", ".", "14", " abc", "!!"});
  CHECK(gpt2("caf\xC3\xA9 \xE4\xB8\x96") == V{"caf\xC3\xA9", " \xE4\xB8\x96"});
  CHECK(gpt2("").empty());
  CHECK(pre_tokenize(BpePreTokenizer::deepseek_coder,
                     "Hello, \xE4\xB8\x96\xE7\x95\x8C"
                     "123\n x") ==
        V{"Hello", ",", " ", "\xE4\xB8\x96\xE7\x95\x8C", "1", "2", "3", "\n", " x"});
  CHECK(pre_tokenize(BpePreTokenizer::llama_default, "a+=b 12345") ==
        V{"a", "+=", "b", " ", "123", "45"});
  CHECK(find_bpe_pre_tokenizer("") == BpePreTokenizer::llama_default);
  CHECK(find_bpe_pre_tokenizer("mpt") == BpePreTokenizer::gpt2);
  CHECK(find_bpe_pre_tokenizer("llama-bpe") == BpePreTokenizer::llama3);
  CHECK(find_bpe_pre_tokenizer("qwen2") == BpePreTokenizer::qwen2);
  CHECK_THAT(error_of([] { find_bpe_pre_tokenizer("chatglm-bpe"); }),
             Catch::Contains("unsupported BPE pre-tokenizer 'chatglm-bpe'"));
  // Llama 3: contractions in any case, one non-letter prefix on a word,
  // digits in threes, punctuation taking its newlines, \s*[\r\n]+.
  auto llama3 = [](std::string_view t) { return pre_tokenize(BpePreTokenizer::llama3, t); };
  CHECK(llama3("I'M here 12345") == V{"I", "'M", " here", " ", "123", "45"});
  CHECK(llama3("x.!\n\ny  \n z") == V{"x", ".!\n\n", "y", "  \n", " z"});
  CHECK(llama3("(hello) \t\tworld") == V{"(hello", ")", " \t", "\tworld"});
  CHECK(pre_tokenize(BpePreTokenizer::qwen2, "v12 ab") == V{"v", "1", "2", " ab"});
  // o200k (GPT-OSS): words cut where lower case turns upper, an upper-case
  // run keeps the lower-case tail after it, contractions join the word,
  // punctuation takes its newlines and slashes. (Python's `regex` module
  // cuts these ASCII texts the same.)
  auto o200k = [](std::string_view t) { return pre_tokenize(BpePreTokenizer::o200k, t); };
  CHECK(o200k("HelloWorld ABCdef I'M don't") == V{"Hello", "World", " ABCdef", " I'M", " don't"});
  CHECK(o200k("x/y\n1234567") == V{"x", "/y", "\n", "123", "456", "7"});
  CHECK(o200k("HTTPServer  \n\tok") == V{"HTTPServer", "  \n", "\tok"});
  CHECK(o200k("a.)/\n\nb") == V{"a", ".)/\n\n", "b"});
  CHECK(find_bpe_pre_tokenizer("gpt-4o") == BpePreTokenizer::o200k);
}

TEST_CASE("tokenizers refuse bad GGUF metadata, naming the file", "[models][tokenizer][error]") {
  auto open = [](const W& w) { return GgufFile::open_memory(w.bytes(), "tok.gguf"); };
  auto error_for = [&](const W& w) { return error_of([&] { Tokenizer::from_gguf(open(w)); }); };
  auto base = [](const std::string& model) {
    W w;
    w.add("tokenizer.ggml.model", W::str(model));
    w.add("tokenizer.ggml.tokens", W::string_array({"a", "b", "c"}));
    return w;
  };
  CHECK_THAT(error_for(W()),
             Catch::Contains("GGUF file 'tok.gguf': missing metadata key 'tokenizer.ggml.model'"));
  CHECK_THAT(error_for(base("bert")),
             Catch::Contains("GGUF file 'tok.gguf': unsupported tokenizer model 'bert'"));
  CHECK_THAT(error_for(base("gpt2")),
             Catch::Contains("missing metadata key 'tokenizer.ggml.merges'"));
  W qwen = base("gpt2");
  qwen.add("tokenizer.ggml.merges", W::string_array({"a b"}));
  qwen.add("tokenizer.ggml.pre", W::str("chatglm-bpe"));
  CHECK_THAT(error_for(qwen),
             Catch::Contains("tok.gguf': unsupported BPE pre-tokenizer 'chatglm-bpe'"));
  W scores = base("llama");
  scores.add("tokenizer.ggml.scores", W::array(std::vector<float>{0.5f}));
  CHECK_THAT(error_for(scores),
             Catch::Contains("'tokenizer.ggml.scores' has 1 entries for 3 tokens"));
  W bos = base("llama");
  bos.add("tokenizer.ggml.bos_token_id", W::u32(99));
  CHECK_THAT(error_for(bos), Catch::Contains("'tokenizer.ggml.bos_token_id' = 99 is not a token "
                                             "id (the vocabulary has 3 tokens)"));
  W dup;
  dup.add("tokenizer.ggml.model", W::str("llama"));
  dup.add("tokenizer.ggml.tokens", W::string_array({"a", "b", "a"}));
  CHECK_THAT(error_for(dup), Catch::Contains("tok.gguf': duplicate token text 'a' (ids 0 and 2)"));
  W tokens = base("llama");
  tokens.add("tokenizer.ggml.token_type", W::str("normal"));
  CHECK_THAT(error_for(tokens), Catch::Contains("'tokenizer.ggml.token_type' is not an array"));
  // A padding id past the vocabulary is dropped, not refused.
  W pad = base("llama");
  pad.add("tokenizer.ggml.padding_token_id", W::u32(3));
  CHECK(Tokenizer::from_gguf(open(pad))->vocab().pad == -1);
}
