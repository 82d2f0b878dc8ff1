#include "models/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/scalar_eval.h"

namespace kiln {

void write_npy(const std::string& path, const std::vector<float>& data, int64_t cols) {
  int64_t rows = static_cast<int64_t>(data.size()) / cols;
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error("cannot write '" + path + "'");
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  f.write(reinterpret_cast<const char*>(data.data()),
          static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!f) throw Error("writing '" + path + "' failed");
}

NpyMatrix read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  auto bad = [&](const std::string& why) { return Error("npy file '" + path + "': " + why); };
  if (!f) throw bad("cannot be read");
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw bad("not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t len = 0;
  if (major == 1) {
    uint16_t l16 = 0;
    f.read(reinterpret_cast<char*>(&l16), 2);
    len = l16;
  } else if (major == 2 || major == 3) {
    f.read(reinterpret_cast<char*>(&len), 4);
  } else {
    throw bad("format version " + std::to_string(major) + " (expected 1, 2 or 3)");
  }
  if (!f || len > (1u << 20)) throw bad("truncated or oversized header");
  std::string header(len, '\0');
  if (!f.read(header.data(), len)) throw bad("truncated header");
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([<|=]?)([fi])(\\d+)'")))
    throw bad("no dtype in the header");
  const std::string kind = m[2].str() + m[3].str();
  if (m[1].str() == ">" || (kind != "f4" && kind != "f2"))
    throw bad("dtype '" + m[1].str() + kind + "' (expected little-endian f4 or f2)");
  if (std::regex_search(header, std::regex("'fortran_order':\\s*True")))
    throw bad("Fortran order (expected C order)");
  if (!std::regex_search(header, m,
                         std::regex("'shape':\\s*\\(\\s*(\\d{1,12})\\s*,\\s*(\\d{1,12})\\s*\\)")))
    throw bad("not a 2-D array");
  NpyMatrix r;
  r.rows = std::stoll(m[1].str());
  r.cols = std::stoll(m[2].str());
  if (r.rows < 1 || r.cols < 1 || r.rows > (int64_t{1} << 31) / r.cols)
    throw bad("shape (" + m[1].str() + ", " + m[2].str() + ") is empty or too large");
  const size_t n = static_cast<size_t>(r.rows * r.cols), esize = kind == "f4" ? 4 : 2;
  std::vector<char> raw(n * esize);
  if (!f.read(raw.data(), static_cast<std::streamsize>(raw.size())))
    throw bad("truncated: expected " + std::to_string(n) + " elements");
  r.data.resize(n);
  if (esize == 4) {
    std::memcpy(r.data.data(), raw.data(), raw.size());
  } else {
    for (size_t i = 0; i < n; ++i)
      r.data[i] =
          static_cast<float>(load_element(raw.data(), static_cast<int64_t>(i), DType::f16).f);
  }
  return r;
}

}  // namespace kiln
