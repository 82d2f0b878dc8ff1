#include "models/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kiln {

bool MappedFile::open(const std::string& path, std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = std::string("cannot open it: ") + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *why = std::string("cannot stat it: ") + std::strerror(errno);
    ::close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file";
    ::close(fd);
    return false;
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size > 0) {
    void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (m == MAP_FAILED) {
      *why = std::string("cannot map it: ") + std::strerror(err);
      return false;
    }
    map_ = m;
    data_ = static_cast<const uint8_t*>(m);
  } else {
    ::close(fd);
  }
  size_ = size;
  return true;
}

void MappedFile::release(const uint8_t* p, size_t n) const {
  if (!map_ || n == 0) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto first = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  auto last = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (map_) munmap(map_, size_);
    map_ = std::exchange(o.map_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (map_) munmap(map_, size_);
}

}  // namespace kiln
