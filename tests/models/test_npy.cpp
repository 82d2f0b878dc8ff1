// .npy logits files (models/npy.h): what Kiln writes reads back; f16 files
// (llama.cpp's logits saved as float16) are converted, not reinterpreted
// (AURA.md pitfall 10); other dtypes, orders and shapes, and truncated
// files, are clear errors.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <iterator>

#include "ir/error.h"
#include "models/npy.h"
#include "support/temp_dir.h"

using namespace kiln;

namespace {

void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::string h = header;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(h.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << h << data;
}

}  // namespace

TEST_CASE("npy logits files read back, f16 converted", "[models][npy]") {
  static const test::TempDir dir("kiln-test-npy");
  const std::string f32 = dir.path("a.npy");
  std::vector<float> v = {1.5f, -2.25f, 3e-3f, 65504.f, -0.f, 7.f};
  write_npy(f32, v, 3);
  NpyMatrix m = read_npy(f32);
  CHECK(m.rows == 2);
  CHECK(m.cols == 3);
  CHECK(m.data == v);
  // 1.0, -2.0, 0.5 as f16 bits.
  const uint16_t half[] = {0x3c00, 0xc000, 0x3800};
  const std::string f16 = dir.path("h.npy");
  write_raw(f16, "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 3), }",
            std::string(reinterpret_cast<const char*>(half), sizeof half));
  NpyMatrix h = read_npy(f16);
  CHECK(h.data == std::vector<float>{1.f, -2.f, 0.5f});
  const std::string i8 = dir.path("i.npy");
  write_raw(i8, "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 3), }", "abc");
  CHECK_THROWS_WITH(read_npy(i8), Catch::Contains("i.npy': dtype '|i1'"));
  const std::string fo = dir.path("f.npy");
  write_raw(fo, "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1), }", "abcd");
  CHECK_THROWS_WITH(read_npy(fo), Catch::Contains("Fortran order"));
  const std::string one = dir.path("1d.npy");
  write_raw(one, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "abcdabcdabcdabcd");
  CHECK_THROWS_WITH(read_npy(one), Catch::Contains("not a 2-D array"));
  const std::string cut = dir.path("cut.npy");
  write_raw(cut, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "abcd");
  CHECK_THROWS_WITH(read_npy(cut), Catch::Contains("truncated: expected 6 elements"));
  CHECK_THROWS_WITH(read_npy(dir.path("none.npy")), Catch::Contains("cannot be read"));
}

TEST_CASE("npy reader: every truncation and random byte flips give an error or a matrix",
          "[models][npy]") {
  static const test::TempDir dir("kiln-test-npy-fuzz");
  const std::string good = dir.path("good.npy");
  write_npy(good, std::vector<float>(12, 1.f), 4);
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = dir.path("mutant.npy");
  auto attempt = [&](const std::string& b) {
    std::ofstream(path, std::ios::binary) << b;
    try {
      NpyMatrix m = read_npy(path);
      CHECK(static_cast<int64_t>(m.data.size()) == m.rows * m.cols);
    } catch (const Error&) {
    }
  };
  for (size_t n = 0; n < bytes.size(); ++n) attempt(bytes.substr(0, n));
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 2000; ++i) {
    std::string b = bytes;
    for (int f = 0; f < 3; ++f) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b[x % b.size()] = static_cast<char>(x >> 32);
    }
    attempt(b);
  }
}
