// Malformed GGUF files: each class of defect is a kiln::Error that names the
// file and the problem, never a crash, a hang or a huge allocation.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "gguf_bytes.h"
#include "ir/error.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"

using namespace kiln;
using kiln::test::GgufBytes;
namespace fs = std::filesystem;

namespace {

// The message open_memory throws for `bytes`, read as file "bad.gguf".
std::string error_of(const std::string& bytes) {
  try {
    GgufFile::open_memory(bytes, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define CHECK_GGUF_ERROR(bytes, text)                               \
  do {                                                              \
    std::string msg = error_of(bytes);                              \
    INFO(msg);                                                      \
    CHECK(msg.find("GGUF file 'bad.gguf': ") != std::string::npos); \
    CHECK(msg.find(text) != std::string::npos);                     \
  } while (0)

// A valid file: two keys, one Q8_0 tensor.
std::string valid_file() {
  GgufWriter w;
  w.add("general.name", GgufWriter::str("tiny"));
  w.add("tokens", GgufWriter::string_array({"a", "b"}));
  w.add_tensor("w", TensorType::q8_0, {32, 2}, std::string(68, '\x01'));
  return w.bytes();
}

}  // namespace

TEST_CASE("gguf: wrong magic", "[models][gguf][error]") {
  CHECK_GGUF_ERROR("GGUX" + valid_file().substr(4), "not a GGUF file: it starts with 'GGUX'");
  CHECK_GGUF_ERROR(std::string("\x7f"
                               "ELF\x02\x01",
                               6) +
                       std::string(30, '\0'),
                   "not a GGUF file: it starts with '\\x7fELF'");
}

TEST_CASE("gguf: unsupported versions", "[models][gguf][error]") {
  CHECK_GGUF_ERROR(GgufBytes().header(0, 0, 1).b, "unsupported GGUF version 1");
  CHECK_GGUF_ERROR(GgufBytes().header(0, 0, 4).b, "unsupported GGUF version 4");
  CHECK_GGUF_ERROR(GgufBytes().header(0, 0, 0x03000000).b, "big-endian GGUF file (version 3)");
}

TEST_CASE("gguf: truncated files", "[models][gguf][error]") {
  std::string good = valid_file();
  CHECK_GGUF_ERROR("", "truncated file: the GGUF magic needs 4 bytes at offset 0");
  CHECK_GGUF_ERROR(good.substr(0, 6), "truncated file: the version needs 4 bytes at offset 4");
  CHECK_GGUF_ERROR(good.substr(0, 20), "truncated file: the metadata count needs 8 bytes");
  CHECK_GGUF_ERROR(good.substr(0, 30), "tensor count 1 is impossible: only 6 bytes follow");
  CHECK_GGUF_ERROR(good.substr(0, 58),
                   "the value of metadata key 'general.name': string length 4 at offset 48 runs "
                   "past the end of the file (2 bytes left)");
  // Cut inside the tensor data.
  CHECK_GGUF_ERROR(good.substr(0, good.size() - 40), "tensor 'w' data out of bounds");
  // Every cut is an error, except cuts in the padding after the last tensor.
  size_t data_end = good.size() - (32 - 68 % 32);
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("cut at " << n);
    if (n < data_end)
      CHECK_THROWS_AS(GgufFile::open_memory(good.substr(0, n), "cut.gguf"), Error);
    else
      CHECK_NOTHROW(GgufFile::open_memory(good.substr(0, n), "cut.gguf"));
  }
}

TEST_CASE("gguf: counts larger than the file", "[models][gguf][error]") {
  CHECK_GGUF_ERROR(GgufBytes().header(0, int64_t{1} << 60).b,
                   "metadata count 1152921504606846976 is impossible");
  CHECK_GGUF_ERROR(GgufBytes().header(-1, 0).b, "tensor count -1 is impossible");
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).str("k").u32(8).u64(uint64_t{1} << 62).raw("abc").b,
                   "the value of metadata key 'k': string length 4611686018427387904 at offset "
                   "37 runs past the end of the file (3 bytes left)");
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).u64(~uint64_t{0}).raw(std::string(20, 'a')).b,
                   "the name of metadata key 0: string length 18446744073709551615");
  // An array whose count cannot fit is refused before anything is allocated.
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).str("arr").u32(9).u32(4).u64(uint64_t{1} << 61).b,
                   "metadata key 'arr': array of 2305843009213693952 u32 elements");
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).str("arr").u32(9).u32(8).u64(1000).u64(1).b,
                   "array of 1000 string elements at offset 39 cannot fit in the 8 bytes left");
}

TEST_CASE("gguf: unknown value types", "[models][gguf][error]") {
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).str("k").u32(13).u32(0).b,
                   "metadata key 'k' has unknown value type 13");
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).str("k").u32(9).u32(99).u64(0).b,
                   "metadata key 'k': unknown array element type 99");
  // Arrays nested without end.
  GgufBytes deep;
  deep.header(0, 1).str("deep").u32(9);
  for (int i = 0; i < 20; ++i) deep.u32(9).u64(1);
  CHECK_GGUF_ERROR(deep.b, "metadata key 'deep': arrays nested deeper than 8");
}

TEST_CASE("gguf: duplicate keys and tensor names", "[models][gguf][error]") {
  CHECK_GGUF_ERROR(GgufBytes().header(0, 2).kv_u32("a", 1).kv_u32("a", 2).b,
                   "duplicate metadata key 'a'");
  CHECK_GGUF_ERROR(
      GgufBytes().header(2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).data(64).b,
      "duplicate tensor name 'w'");
}

TEST_CASE("gguf: unknown and unsupported tensor types", "[models][gguf][error]") {
  // IQ1_S: a type ggml has and Kiln does not read.
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("blk.0.ffn_up.weight", {256}, 19, 0).data(50).b,
                   "tensor 'blk.0.ffn_up.weight' has unsupported ggml type 19 (IQ1_S)");
  // The message lists what Kiln does read, from the type table itself.
  CHECK_GGUF_ERROR(
      GgufBytes().header(1, 0).tensor("w", {256}, 19, 0).data(50).b,
      "Kiln reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("w", {256}, 19, 0).data(50).b, "MXFP4");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {32}, 99, 0).data(128).b,
                   "tensor 't' has unsupported ggml type 99 (type 99)");
}

TEST_CASE("gguf: bad shapes", "[models][gguf][error]") {
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {4, 0}, 0, 0).b,
                   "tensor 't' dimension 1 is 0 (must be positive)");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {-4}, 0, 0).b,
                   "tensor 't' dimension 0 is -4 (must be positive)");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0).b,
                   "tensor 't' has 5 dimensions (at most 4)");
  CHECK_GGUF_ERROR(
      GgufBytes().header(1, 0).tensor("t", {int64_t{1} << 40, int64_t{1} << 40}, 0, 0).b,
      "tensor 't' has more than 2^63 elements");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {int64_t{1} << 62}, 0, 0).b,
                   "tensor 't' byte size overflows");
}

TEST_CASE("gguf: rows that are not whole blocks", "[models][gguf][error]") {
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {48, 2}, 2, 0).data(64).b,
                   "tensor 't' row size 48 is not a multiple of the Q4_0 block size 32");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {128}, 12, 0).data(144).b,
                   "row size 128 is not a multiple of the Q4_K block size 256");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {40}, 6, 0).data(64).b,
                   "tensor 't' row size 40 is not a multiple of the Q5_0 block size 32");
  // A truncated last block: two Q5_1 blocks are 48 bytes.
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {64}, 7, 0).data(47).b,
                   "tensor 't' data out of bounds: 48 bytes at offset 0");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {288}, 11, 0).data(220).b,
                   "tensor 't' row size 288 is not a multiple of the Q3_K block size 256");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {256, 2}, 13, 0).data(351).b,
                   "tensor 't' data out of bounds: 352 bytes at offset 0");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {48}, 39, 0).data(64).b,
                   "tensor 't' row size 48 is not a multiple of the MXFP4 block size 32");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {64}, 20, 0).data(35).b,
                   "tensor 't' data out of bounds: 36 bytes at offset 0");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {320}, 16, 0).data(160).b,
                   "tensor 't' row size 320 is not a multiple of the IQ2_XXS block size 256");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {256, 2}, 21, 0).data(219).b,
                   "tensor 't' data out of bounds: 220 bytes at offset 0");
  // IQ1_S: a ggml type Kiln does not read, named as ggml names it.
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {256}, 19, 0).data(64).b, "IQ1_S");
}

TEST_CASE("gguf: tensor data out of bounds, misaligned or overlapping", "[models][gguf][error]") {
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {8}, 0, 0).data(31).b,
                   "tensor 't' data out of bounds: 32 bytes at offset 0 of the data section, "
                   "which holds 31 bytes");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {8}, 0, ~uint64_t{0} - 31).data(32).b,
                   "tensor 't' data out of bounds");
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {8}, 0, 16).data(64).b,
                   "tensor 't' data offset 16 is not a multiple of the alignment 32");
  CHECK_GGUF_ERROR(
      GgufBytes().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).data(96).b,
      "tensors 'a' and 'b' overlap");
  // A header with tensors but no data section at all.
  CHECK_GGUF_ERROR(GgufBytes().header(1, 0).tensor("t", {8}, 0, 0).b, "data out of bounds");
}

TEST_CASE("gguf: bad alignment", "[models][gguf][error]") {
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).kv_u32("general.alignment", 48).b,
                   "general.alignment = 48 is not a power of two");
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).kv_u32("general.alignment", 0).b,
                   "general.alignment = 0 is not a power of two");
  CHECK_GGUF_ERROR(GgufBytes().header(0, 1).str("general.alignment").u32(8).str("32").b,
                   "'general.alignment' is string, expected an integer");
}

TEST_CASE("gguf: files that cannot be read", "[models][gguf][error]") {
  REQUIRE_THROWS_WITH(GgufFile::open("/nonexistent/model.gguf"),
                      Catch::Contains("GGUF file '/nonexistent/model.gguf': cannot open it: No "
                                      "such file or directory"));
  std::string dir = fs::temp_directory_path().string();
  REQUIRE_THROWS_WITH(GgufFile::open(dir), Catch::Contains("': it is a directory"));
  std::string empty =
      (fs::temp_directory_path() / ("kiln-test-empty-" + std::to_string(getpid()) + ".gguf"))
          .string();
  std::ofstream(empty).close();
  REQUIRE_THROWS_WITH(GgufFile::open(empty),
                      Catch::Contains("GGUF file '" + empty + "': truncated file: the GGUF magic"));
  fs::remove(empty);
}

TEST_CASE("gguf: names in messages are escaped and cut", "[models][gguf][error]") {
  std::string name = "bad\nname" + std::string(200, 'x');
  std::string msg = error_of(GgufBytes().header(0, 2).kv_u32(name, 1).kv_u32(name, 2).b);
  CHECK(msg.find("duplicate metadata key 'bad\\x0aname") != std::string::npos);
  CHECK(msg.find("xxx...'") != std::string::npos);
  CHECK(msg.size() < 200);
}
