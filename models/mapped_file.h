// A file mapped read-only into memory, for the model containers (GGUF,
// safetensors) whose tensors are used where they lie on disk.
//
// The mapping lives as long as the MappedFile (move-only). Opening reports
// why it failed as a short phrase ("cannot open it: No such file or
// directory", "it is a directory") for the caller to prefix with the kind of
// file and its path, so every container's messages read alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

class MappedFile {
 public:
  // Maps `path`; on failure returns false with *why set.
  bool open(const std::string& path, std::string* why);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops the pages wholly inside [p, p + n) from this process's memory;
  // later reads fault them back in from the file.
  void release(const uint8_t* p, size_t n) const;

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

 private:
  void* map_ = nullptr;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
