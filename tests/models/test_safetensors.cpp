// The safetensors reader: a valid file read back exactly, every malformed
// header refused with a message naming the file and the tensor, seeded
// mutations that open or fail cleanly, and sharded checkpoints.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ir/error.h"
#include "models/safetensors.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// A file from a header written by hand and `data_bytes` bytes counting up.
std::string st_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out += static_cast<char>(i);
  return out;
}

// Two tensors and metadata: a [2, 3] F16 and a [4] F32 after it.
const std::string kHeader =
    R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},)"
    R"("b":{"dtype":"F32","shape":[4],"data_offsets":[12,28]}})";

std::string error_of(const std::string& bytes) {
  try {
    SafetensorsFile::open_memory(bytes, "bad.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define CHECK_ST_ERROR(bytes, text)                                               \
  do {                                                                            \
    std::string msg = error_of(bytes);                                            \
    INFO(msg);                                                                    \
    CHECK(msg.find("safetensors file 'bad.safetensors': ") != std::string::npos); \
    CHECK(msg.find(text) != std::string::npos);                                   \
  } while (0)

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offs) {
  return R"({"t":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offs +
         "}}";
}

}  // namespace

TEST_CASE("safetensors: a valid file reads back", "[models][safetensors]") {
  SafetensorsFile f = SafetensorsFile::open_memory(st_file(kHeader, 28), "ok.safetensors");
  REQUIRE(f.tensors().size() == 2);
  const SafeTensor* w = f.find("w");
  const SafeTensor* b = f.find("b");
  REQUIRE(w);
  REQUIRE(b);
  CHECK(w->dtype == StDtype::f16);
  CHECK(w->shape == std::vector<int64_t>{2, 3});
  CHECK(w->nbytes == 12);
  CHECK(w->elements() == 6);
  CHECK(b->dtype == StDtype::f32);
  CHECK(b->data - w->data == 12);
  CHECK(b->data[0] == 12);  // data bytes count up from the end of the header
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.find("nope") == nullptr);
  CHECK(*w->file == "ok.safetensors");
  // A scalar (shape []) holds one element; an empty tensor none.
  SafetensorsFile s = SafetensorsFile::open_memory(
      st_file(R"({"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
              R"("e":{"dtype":"BF16","shape":[0,5],"data_offsets":[8,8]}})",
              8),
      "s.safetensors");
  CHECK(s.find("s")->elements() == 1);
  CHECK(s.find("e")->nbytes == 0);
}

TEST_CASE("safetensors: malformed headers are refused naming the file and tensor",
          "[models][safetensors][error]") {
  CHECK_ST_ERROR(std::string("\x05\0\0", 3), "too short for the 8-byte header length");
  CHECK_ST_ERROR(st_file(kHeader, 28).substr(0, 40), "runs past the end of the file");
  std::string huge(8, '\0');
  huge[7] = 0x10;
  CHECK_ST_ERROR(huge + "{}", "exceeds the 100 MiB limit");
  CHECK_ST_ERROR(st_file("{\"w\": ", 0), "its header is not a JSON object");
  CHECK_ST_ERROR(st_file("[1, 2]", 0), "its header is not a JSON object");
  CHECK_ST_ERROR(st_file(R"({"t": 3})", 0), "tensor 't' is not an object");
  CHECK_ST_ERROR(st_file(entry("Q4", "[2]", "[0,2]"), 2), "tensor 't' has unknown dtype 'Q4'");
  CHECK_ST_ERROR(st_file(R"({"t":{"shape":[2],"data_offsets":[0,2]}})", 2),
                 "tensor 't' has no dtype");
  CHECK_ST_ERROR(st_file(R"({"t":{"dtype":"U8","data_offsets":[0,2]}})", 2),
                 "tensor 't' has no shape");
  CHECK_ST_ERROR(st_file(entry("U8", "[-2]", "[0,2]"), 2), "not a non-negative integer: -2");
  CHECK_ST_ERROR(st_file(entry("U8", "[1.5]", "[0,2]"), 2), "not a non-negative integer: 1.5");
  CHECK_ST_ERROR(st_file(entry("F32", "[4611686018427387904,8]", "[0,2]"), 2),
                 "tensor 't' has too many elements");
  CHECK_ST_ERROR(st_file(entry("U8", "[2]", "[0]"), 2), "tensor 't' has no data_offsets");
  CHECK_ST_ERROR(st_file(entry("U8", "[2]", "[2,0]"), 2), "data_offsets [2, 0] lie outside");
  CHECK_ST_ERROR(st_file(entry("U8", "[2]", "[0,9]"), 2),
                 "tensor 't' data_offsets [0, 9] lie outside the data section of 2 bytes");
  CHECK_ST_ERROR(st_file(entry("F16", "[2,2]", "[0,6]"), 8),
                 "tensor 't' holds 6 bytes; its F16 shape [2,2] needs 8");
  CHECK_ST_ERROR(st_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                         6),
                 "tensors 'a' and 'b' overlap");
  CHECK_ST_ERROR(st_file(R"({"__metadata__":{"k":1}})", 0),
                 "__metadata__ value 'k' is not a string");
  CHECK_ST_ERROR(st_file(R"({"__metadata__":[]})", 0), "__metadata__ is not an object");
}

TEST_CASE("safetensors: seeded mutations open or fail with kiln::Error",
          "[models][safetensors][fuzz]") {
  const std::string seed = st_file(kHeader, 28);
  std::mt19937_64 rng(20261126);
  int opened = 0, refused = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string m = seed;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n && !m.empty(); ++k) {
      size_t pos = rng() % m.size();
      switch (rng() % 4) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1 << (rng() % 8))); break;
        case 1: m[pos] = "0123456789[]{},:\"-.eE"[rng() % 21]; break;  // JSON's own characters
        case 2: m.resize(pos); break;
        default: m.erase(pos, 1 + rng() % 8);
      }
    }
    try {
      SafetensorsFile f = SafetensorsFile::open_memory(m, "fuzz.safetensors");
      uint64_t sum = 0;
      for (const SafeTensor& t : f.tensors())
        for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];  // every pointer readable
      (void)sum;
      ++opened;
    } catch (const Error&) {
      ++refused;
    }
  }
  INFO(opened << " opened, " << refused << " refused");
  CHECK(opened > 100);
  CHECK(refused > 100);
}

TEST_CASE("safetensors: checkpoints of one file or shards", "[models][safetensors]") {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln-test-safetensors-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
  };
  auto error_of_dir = [&]() -> std::string {
    try {
      SafetensorsCheckpoint::open(dir.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK_THAT(error_of_dir(),
             Catch::Contains("no model.safetensors or model.safetensors.index.json"));

  write("model.safetensors", st_file(kHeader, 28));
  SafetensorsCheckpoint one = SafetensorsCheckpoint::open(dir.string());
  CHECK(one.tensor("w").nbytes == 12);
  CHECK(one.tensors().size() == 2);
  CHECK_THROWS_WITH(one.tensor("x"), Catch::Contains("no tensor 'x'"));

  write("a.safetensors", st_file(entry("U8", "[3]", "[0,3]"), 3));
  write("b.safetensors", st_file(kHeader, 28));
  write(
      "model.safetensors.index.json",
      R"({"metadata":{},"weight_map":{"t":"a.safetensors","w":"b.safetensors","b":"b.safetensors"}})");
  SafetensorsCheckpoint shards = SafetensorsCheckpoint::open(dir.string());
  CHECK(shards.tensor("t").nbytes == 3);
  CHECK(shards.tensor("b").dtype == StDtype::f32);
  CHECK(*shards.tensor("t").file == (dir / "a.safetensors").string());

  write("model.safetensors.index.json", R"({"weight_map":{"t":"missing.safetensors"}})");
  CHECK_THAT(error_of_dir(),
             Catch::Contains("names shard 'missing.safetensors', which is missing"));
  write("model.safetensors.index.json", R"({"weight_map":{"t":"../a.safetensors"}})");
  CHECK_THAT(error_of_dir(), Catch::Contains("which is not a file name"));
  write("model.safetensors.index.json", R"({"weight_map":{"w":"a.safetensors"}})");
  CHECK_THAT(error_of_dir(), Catch::Contains("tensor 'w' is not in shard 'a.safetensors'"));
  write("model.safetensors.index.json", R"({"weight_map":[]})");
  CHECK_THAT(error_of_dir(), Catch::Contains("no weight_map object"));
  // A truncated shard is named with its path.
  write("model.safetensors.index.json", R"({"weight_map":{"w":"b.safetensors"}})");
  write("b.safetensors", st_file(kHeader, 20));
  CHECK_THAT(error_of_dir(), Catch::Contains("b.safetensors") && Catch::Contains("lie outside"));
  fs::remove_all(dir);
}
