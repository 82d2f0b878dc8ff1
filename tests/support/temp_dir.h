// A scratch folder of this test process (its pid in the name, so ctest's
// parallel processes and earlier runs never share files), removed with the
// object.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kiln::test {

struct TempDir {
  std::filesystem::path dir;
  explicit TempDir(const std::string& prefix)
      : dir(std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

}  // namespace kiln::test
