// GGUF round trips: what the writer writes, the reader reads back, from
// memory and through a file mapping, for every metadata type, every
// supported tensor type and several alignments.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <random>

#include "ir/error.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"

using namespace kiln;
namespace fs = std::filesystem;
using W = GgufWriter;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("kiln-test-" + name + "-" + std::to_string(getpid()) + ".gguf"))
      .string();
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

struct TensorCase {
  std::string name;
  TensorType type;
  std::vector<int64_t> shape;
  uint64_t nbytes;
};

// One tensor of every supported type; sizes from the block geometry.
const std::vector<TensorCase>& tensor_cases() {
  static const std::vector<TensorCase> cases = {
      {"f32", TensorType::f32, {3, 2}, 24},
      {"f16", TensorType::f16, {5}, 10},
      {"q4_0", TensorType::q4_0, {64, 2}, 2 * 2 * 18},
      {"q8_0", TensorType::q8_0, {32}, 34},
      {"q4_K", TensorType::q4_K, {256, 1, 2}, 2 * 144},
      {"q6_K", TensorType::q6_K, {512}, 2 * 210},
      {"bf16", TensorType::bf16, {2, 3, 1, 2}, 24},
  };
  return cases;
}

GgufWriter full_writer(uint32_t alignment) {
  W w(alignment);
  w.add("u8", W::u8(200));
  w.add("i8", W::i8(-5));
  w.add("u16", W::u16(60000));
  w.add("i16", W::i16(-30000));
  w.add("u32", W::u32(4000000000u));
  w.add("i32", W::i32(-2000000000));
  w.add("f32", W::f32(1.5f));
  w.add("bool", W::boolean(true));
  w.add("string", W::str("h\xC3\xA9llo"));
  w.add("u64", W::u64(uint64_t{1} << 60));
  w.add("i64", W::i64(-(int64_t{1} << 60)));
  w.add("f64", W::f64(3.25));
  w.add("strings", W::string_array({"a", "", "\xC3\x9F"}));
  w.add("a.u8", W::array(std::vector<uint8_t>{1, 255}));
  w.add("a.i8", W::array(std::vector<int8_t>{-1, 2}));
  w.add("a.u16", W::array(std::vector<uint16_t>{65535}));
  w.add("a.i16", W::array(std::vector<int16_t>{-32768}));
  w.add("a.u32", W::array(std::vector<uint32_t>{7, 8, 9}));
  w.add("a.i32", W::array(std::vector<int32_t>{-7, 8}));
  w.add("a.u64", W::array(std::vector<uint64_t>{uint64_t{1} << 63}));
  w.add("a.i64", W::array(std::vector<int64_t>{-(int64_t{1} << 62)}));
  w.add("a.f32", W::array(std::vector<float>{0.5f, -2.0f}));
  w.add("a.f64", W::array(std::vector<double>{1e300}));
  w.add("a.bool", W::bool_array({true, false, true}));
  w.add("a.empty", W::array(std::vector<float>{}));
  w.add("nested", W::array_of(GgufType::array, {W::array(std::vector<int32_t>{1, 2}),
                                                W::array_of(GgufType::string, {W::str("x")})}));
  for (size_t i = 0; i < tensor_cases().size(); ++i) {
    const TensorCase& t = tensor_cases()[i];
    w.add_tensor(t.name, t.type, t.shape, random_bytes(t.nbytes, static_cast<uint32_t>(i)));
  }
  return w;
}

void check_full(const GgufFile& f, uint32_t alignment) {
  CHECK(f.version() == 3);
  CHECK(f.alignment() == alignment);
  CHECK(f.data_offset() % alignment == 0);
  CHECK(f.find_u32("u8") == 200u);
  CHECK(f.get_i32("i8") == -5);
  CHECK(f.get_u32("u16") == 60000u);
  CHECK(f.get_i64("i16") == -30000);
  CHECK(f.get_u32("u32") == 4000000000u);
  CHECK(f.get_i32("i32") == -2000000000);
  CHECK(f.get_f32("f32") == 1.5f);
  CHECK(f.get_bool("bool"));
  CHECK(f.get_string("string") == "h\xC3\xA9llo");
  CHECK(f.get_u64("u64") == uint64_t{1} << 60);
  CHECK(f.get_i64("i64") == -(int64_t{1} << 60));
  CHECK(f.get_f64("f64") == 3.25);
  CHECK(f.get_string_array("strings") == std::vector<std::string_view>{"a", "", "\xC3\x9F"});
  CHECK(f.get_i32_array("a.u8") == std::vector<int32_t>{1, 255});
  CHECK(f.get_i32_array("a.i8") == std::vector<int32_t>{-1, 2});
  CHECK(f.get_i32_array("a.u16") == std::vector<int32_t>{65535});
  CHECK(f.get_i32_array("a.i16") == std::vector<int32_t>{-32768});
  CHECK(f.get_i64_array("a.u32") == std::vector<int64_t>{7, 8, 9});
  CHECK(f.get_i32_array("a.i32") == std::vector<int32_t>{-7, 8});
  CHECK(f.find("a.u64")->number_at(0) == 9223372036854775808.0);
  CHECK(f.get_i64_array("a.i64") == std::vector<int64_t>{-(int64_t{1} << 62)});
  CHECK(f.get_f32_array("a.f32") == std::vector<float>{0.5f, -2.0f});
  CHECK(f.find("a.f64")->number_at(0) == 1e300);
  CHECK(f.find("a.bool")->count == 3);
  CHECK(f.find("a.bool")->int_at(0) == 1);
  CHECK(f.find("a.bool")->int_at(1) == 0);
  CHECK(f.get_f32_array("a.empty").empty());
  const GgufValue* nested = f.find("nested");
  REQUIRE(nested != nullptr);
  CHECK(nested->type == GgufType::array);
  CHECK(nested->elem_type == GgufType::array);
  REQUIRE(nested->arrays.size() == 2);
  CHECK(nested->arrays[0].elem_type == GgufType::i32);
  CHECK(nested->arrays[0].int_at(1) == 2);
  CHECK(nested->arrays[1].strings == std::vector<std::string_view>{"x"});
  // Types as stored, in file order.
  CHECK(f.find("i16")->type == GgufType::i16);
  CHECK(f.find("a.bool")->elem_type == GgufType::boolean);
  size_t first_user_key = alignment == 32 ? 0 : 1;
  CHECK(f.metadata()[first_user_key].first == "u8");

  REQUIRE(f.tensors().size() == tensor_cases().size());
  for (size_t i = 0; i < tensor_cases().size(); ++i) {
    const TensorCase& want = tensor_cases()[i];
    const GgufTensor& t = f.tensor(want.name);
    INFO("tensor " << want.name);
    CHECK(&t == &f.tensors()[i]);
    CHECK(t.type == want.type);
    CHECK(t.shape == want.shape);
    CHECK(t.nbytes == want.nbytes);
    CHECK(t.offset % alignment == 0);
    CHECK(reinterpret_cast<uintptr_t>(t.data) % std::min<uint32_t>(alignment, 64) == 0);
    CHECK(std::memcmp(t.data, random_bytes(want.nbytes, static_cast<uint32_t>(i)).data(),
                      want.nbytes) == 0);
  }
  CHECK(f.tensor("q4_K").elements() == 512);
}

}  // namespace

TEST_CASE("gguf writer output reads back: every metadata and tensor type", "[models][gguf]") {
  for (uint32_t alignment : {32u, 64u, 8u}) {
    INFO("alignment " << alignment);
    GgufWriter w = full_writer(alignment);
    std::string bytes = w.bytes();
    check_full(GgufFile::open_memory(bytes, "memory.gguf"), alignment);

    std::string path = temp_path("roundtrip");
    w.write(path);
    {
      GgufFile f = GgufFile::open(path);
      CHECK(f.path() == path);
      CHECK(f.size() == bytes.size());
      check_full(f, alignment);
      // The mapping moves with the object; tensor pointers stay valid.
      GgufFile moved = std::move(f);
      check_full(moved, alignment);
    }
    fs::remove(path);
  }
}

TEST_CASE("gguf files without tensors and version 2 files read", "[models][gguf]") {
  W w;
  w.add("general.architecture", W::str("llama"));
  std::string bytes = w.bytes();
  GgufFile f = GgufFile::open_memory(bytes, "vocab.gguf");
  CHECK(f.tensors().empty());
  CHECK(f.get_string("general.architecture") == "llama");
  // Version 2 has the same layout.
  bytes[4] = 2;
  CHECK(GgufFile::open_memory(bytes, "v2.gguf").version() == 2);
  // A file without tensors may end before the aligned data section.
  CHECK(GgufFile::open_memory(bytes.substr(0, bytes.size() - 1), "short.gguf").tensors().empty());
}

TEST_CASE("gguf getters convert integers that fit and name the key otherwise",
          "[models][gguf][error]") {
  W w;
  w.add("small", W::u8(7));
  w.add("neg", W::i32(-1));
  w.add("big", W::u64(uint64_t{1} << 40));
  w.add("name", W::str("x"));
  w.add("floats", W::array(std::vector<float>{1.5f}));
  w.add("ints", W::array(std::vector<int64_t>{int64_t{1} << 40}));
  GgufFile f = GgufFile::open_memory(w.bytes(), "getters.gguf");
  CHECK(f.get_i64("small") == 7);
  CHECK(f.get_u64("small") == 7);
  CHECK(f.get_i32("neg") == -1);
  CHECK(f.get_f64("small") == 7.0);  // float getters take integers too
  CHECK_FALSE(f.find_u32("absent").has_value());
  CHECK_FALSE(f.find_string_array("absent").has_value());
  CHECK(f.get_i64_array("ints")[0] == int64_t{1} << 40);
  REQUIRE_THROWS_WITH(f.get_u32("absent"),
                      Catch::Contains("GGUF file 'getters.gguf': missing metadata key 'absent'"));
  REQUIRE_THROWS_WITH(f.get_u32("neg"), Catch::Contains("'neg' = -1 does not fit in u32"));
  REQUIRE_THROWS_WITH(f.get_i32("big"),
                      Catch::Contains("'big' = 1099511627776 does not fit in i32"));
  REQUIRE_THROWS_WITH(f.get_u32("name"), Catch::Contains("'name' is string, expected an integer"));
  REQUIRE_THROWS_WITH(f.get_string("small"), Catch::Contains("'small' is u8, expected string"));
  REQUIRE_THROWS_WITH(f.get_bool("small"), Catch::Contains("'small' is u8, expected bool"));
  REQUIRE_THROWS_WITH(f.get_f32("name"), Catch::Contains("'name' is string, expected a number"));
  REQUIRE_THROWS_WITH(f.get_i32_array("floats"), Catch::Contains("not an array of integers"));
  REQUIRE_THROWS_WITH(f.get_i32_array("ints"), Catch::Contains("element 0 does not fit in i32"));
  REQUIRE_THROWS_WITH(f.get_string_array("floats"), Catch::Contains("not an array of strings"));
  REQUIRE_THROWS_WITH(f.get_f32_array("name"), Catch::Contains("not an array of numbers"));
  REQUIRE_THROWS_WITH(f.tensor("blk.0.attn_q.weight"),
                      Catch::Contains("getters.gguf': no tensor named 'blk.0.attn_q.weight'"));
}

TEST_CASE("gguf writer refuses what it could not write correctly", "[models][gguf][error]") {
  REQUIRE_THROWS_WITH(W(48), Catch::Contains("alignment 48 is not a power of two"));
  W w;
  w.add("k", W::u32(1));
  REQUIRE_THROWS_WITH(w.add("k", W::u32(2)), Catch::Contains("duplicate metadata key 'k'"));
  REQUIRE_THROWS_WITH(w.add_tensor("t", TensorType::q4_0, {32}, std::string(17, '\0')),
                      Catch::Contains("tensor 't' of type Q4_0 needs 18 bytes, given 17"));
  REQUIRE_THROWS_WITH(w.add_tensor("t", TensorType::q8_0, {33}, ""),
                      Catch::Contains("not a whole number of Q8_0 blocks"));
  REQUIRE_THROWS_WITH(W::array_of(GgufType::u32, {W::i32(1)}),
                      Catch::Contains("array of u32 given an element of type i32"));
  REQUIRE_THROWS_WITH(W().write("/nonexistent-dir/x.gguf"),
                      Catch::Contains("cannot write GGUF file '/nonexistent-dir/x.gguf'"));
}

TEST_CASE("gguf writer streams produced tensors and copies read values", "[models][gguf]") {
  // Every key of a file copied across, and every tensor produced in uneven
  // pieces, writes the very same bytes.
  std::string original = full_writer(32).bytes();
  GgufFile f = GgufFile::open_memory(original, "original.gguf");
  W copy;
  for (const auto& [key, value] : f.metadata()) copy.add(key, W::copy_of(value));
  for (const GgufTensor& t : f.tensors()) {
    copy.add_tensor(t.name, t.type, t.shape, [&t](const W::ByteSink& sink) {
      for (uint64_t at = 0; at < t.nbytes; at += 7)
        sink(t.data + at, std::min<uint64_t>(7, t.nbytes - at));
    });
  }
  CHECK(copy.bytes() == original);
  CHECK(W::tensor_bytes("t", TensorType::q4_K, {512, 3}) == 6 * 144);
}

TEST_CASE("gguf writer refuses a producer that emits the wrong size", "[models][gguf][error]") {
  std::string block(34, '\1');
  auto emit = [&](int pieces) {
    return [&, pieces](const W::ByteSink& sink) {
      for (int i = 0; i < pieces; ++i) sink(reinterpret_cast<const uint8_t*>(block.data()), 34);
    };
  };
  W few;
  few.add_tensor("few", TensorType::q8_0, {32, 2}, emit(1));
  REQUIRE_THROWS_WITH(few.bytes(), Catch::Contains("tensor 'few' produced 34 of its 68 bytes"));
  W many;
  many.add_tensor("many", TensorType::q8_0, {32}, emit(2));
  REQUIRE_THROWS_WITH(many.bytes(), Catch::Contains("tensor 'many' produced more than its 34"));
  REQUIRE_THROWS_WITH(many.add_tensor("odd", TensorType::q4_K, {100}, emit(1)),
                      Catch::Contains("not a whole number of Q4_K blocks"));
}
