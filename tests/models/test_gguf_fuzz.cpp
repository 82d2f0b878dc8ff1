// Seeded mutation fuzzing of the GGUF reader (and the tokenizer built from
// what it reads): every mutated or truncated file either opens, with every
// pointer it hands out readable, or is refused with a kiln::Error. Any other
// exception (std::bad_alloc from a trusted count included) fails the test; a
// crash or sanitizer report fails the run. tests/fuzz/gguf_fuzzer.cpp is the
// coverage-guided version.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/tokenizer.h"

using namespace kiln;
using W = GgufWriter;

namespace {

// A small file with most value kinds, a BPE vocabulary and tensors of
// several types (the 32-weight block formats among them).
std::string seed_file() {
  W w;
  w.add("general.architecture", W::str("llama"));
  w.add("llama.block_count", W::u32(2));
  w.add("llama.rope.freq_base", W::f32(10000.0f));
  w.add("flag", W::boolean(true));
  w.add("nested", W::array_of(GgufType::array, {W::array(std::vector<int16_t>{1, -2}),
                                                W::string_array({"p", "q"})}));
  w.add("tokenizer.ggml.model", W::str("gpt2"));
  w.add("tokenizer.ggml.pre", W::str("gpt-2"));
  w.add("tokenizer.ggml.tokens", W::string_array({"a", "b", "c", "\xC4\xA0", "ab", "abc", "<s>"}));
  w.add("tokenizer.ggml.token_type", W::array(std::vector<int32_t>{1, 1, 1, 1, 1, 1, 3}));
  w.add("tokenizer.ggml.merges", W::string_array({"a b", "ab c"}));
  w.add("tokenizer.ggml.bos_token_id", W::u32(6));
  w.add_tensor("token_embd.weight", TensorType::f32, {4, 2}, std::string(32, '\x3f'));
  w.add_tensor("blk.0.attn_q.weight", TensorType::q4_0, {32, 2}, std::string(36, '\x01'));
  w.add_tensor("blk.0.attn_k.weight", TensorType::q5_0, {32, 2}, std::string(44, '\x03'));
  w.add_tensor("blk.0.attn_v.weight", TensorType::q4_1, {32, 1}, std::string(20, '\x04'));
  w.add_tensor("blk.0.ffn_up.weight", TensorType::q5_1, {32, 1}, std::string(24, '\x05'));
  w.add_tensor("blk.0.ffn_down.weight", TensorType::q2_K, {256, 1}, std::string(84, '\x06'));
  w.add_tensor("blk.0.ffn_gate.weight", TensorType::q3_K, {256, 1}, std::string(110, '\x07'));
  w.add_tensor("blk.1.ffn_up.weight", TensorType::q5_K, {256, 1}, std::string(176, '\x08'));
  w.add_tensor("blk.1.ffn_down.weight", TensorType::iq4_xs, {256, 1}, std::string(136, '\x09'));
  w.add_tensor("blk.1.ffn_gate.weight", TensorType::iq4_nl, {32, 1}, std::string(18, '\x0a'));
  w.add_tensor("blk.1.attn_q.weight", TensorType::mxfp4, {32, 2}, std::string(34, '\x0b'));
  w.add_tensor("blk.1.attn_k.weight", TensorType::iq2_xxs, {256, 1}, std::string(66, '\x0c'));
  w.add_tensor("blk.1.attn_v.weight", TensorType::iq2_xs, {256, 1}, std::string(74, '\x0d'));
  w.add_tensor("blk.1.attn_output.weight", TensorType::iq2_s, {256, 1}, std::string(82, '\x0e'));
  w.add_tensor("blk.2.ffn_up.weight", TensorType::iq3_xxs, {256, 1}, std::string(98, '\x0f'));
  w.add_tensor("blk.2.ffn_down.weight", TensorType::iq3_s, {256, 1}, std::string(110, '\x10'));
  w.add_tensor("output_norm.weight", TensorType::f16, {4}, std::string(8, '\x02'));
  return w.bytes();
}

// Reads everything the file points at, so a bad pointer would be noticed
// (by the sanitizers, or by a crash).
uint64_t touch(const GgufFile& f) {
  uint64_t sum = 0;
  auto value = [&](const GgufValue& v, auto&& self) -> void {
    for (char c : v.str) sum += static_cast<uint8_t>(c);
    for (std::string_view s : v.strings)
      for (char c : s) sum += static_cast<uint8_t>(c);
    if (v.data)
      for (uint64_t i = 0; i < v.count; ++i) sum += static_cast<uint64_t>(v.number_at(i) != 0);
    for (const GgufValue& a : v.arrays) self(a, self);
  };
  for (const auto& [key, v] : f.metadata()) value(v, value);
  for (const GgufTensor& t : f.tensors())
    for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
  if (f.has("tokenizer.ggml.model")) {
    std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(f);
    std::vector<int32_t> ids = tok->encode("abc cab\xff", false);
    sum += tok->decode(ids).size();
  }
  return sum;
}

}  // namespace

TEST_CASE("gguf: seeded mutations open or fail with kiln::Error", "[models][gguf][fuzz]") {
  const std::string seed = seed_file();
  REQUIRE_NOTHROW(touch(GgufFile::open_memory(seed, "seed.gguf")));
  const uint64_t interesting[] = {
      0,      1,          2,          3,          4,          7,          8,     9,
      12,     13,         31,         32,         33,         0x7F,       0x80,  0xFF,
      0xFFFF, 0xFFFFFFFF, 1ull << 31, 1ull << 32, 1ull << 62, 1ull << 63, ~0ull, seed.size()};
  std::mt19937_64 rng(20240601);
  int opened = 0, refused = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    std::string m = seed;
    int mutations = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < mutations && !m.empty(); ++k) {
      size_t pos = rng() % m.size();
      switch (rng() % 5) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1 << (rng() % 8))); break;
        case 1: m[pos] = static_cast<char>(rng()); break;
        case 2: {
          // A count, length, type or offset field overwritten with an edge value.
          uint64_t v = interesting[rng() % std::size(interesting)];
          size_t width = size_t{1} << (rng() % 4);
          for (size_t b = 0; b < width && pos + b < m.size(); ++b)
            m[pos + b] = static_cast<char>(v >> (8 * b));
          break;
        }
        case 3: m.resize(pos); break;
        default:
          if (rng() % 2)
            m.erase(pos, 1 + rng() % 16);
          else
            m.insert(pos, std::string(1 + rng() % 16, static_cast<char>(rng())));
      }
    }
    try {
      touch(GgufFile::open_memory(m, "fuzz.gguf"));
      ++opened;
    } catch (const Error&) {
      ++refused;
    }
  }
  INFO(opened << " opened, " << refused << " refused");
  CHECK(opened > 100);
  CHECK(refused > 100);
}
