// HostMemory promises zero-filled buffers, 64-byte aligned, and 2 MiB-aligned
// from 2 MiB up (mapped rather than filled, so the zeros come from the
// kernel): checked on both sides of that size, after a move, and for a
// large buffer allocated where a freed one of the same size was dirtied;
// HostHeap::commit faults a mapped buffer's pages in without changing them.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/host_memory.h"

using namespace kiln;

namespace {

bool all_zero(const HostMemory& m) {
  for (size_t i = 0; i < m.size(); ++i)
    if (m.data()[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("host memory is zero-filled and aligned, small or mapped") {
  const size_t huge = size_t{2} << 20;
  for (size_t bytes : {size_t{1}, size_t{100}, huge - 1, huge, 3 * huge + 5}) {
    INFO(bytes << " bytes");
    HostMemory m(bytes);
    REQUIRE(m.size() == bytes);
    const auto at = reinterpret_cast<uintptr_t>(m.data());
    CHECK(at % 64 == 0);
    if (bytes >= huge) CHECK(at % huge == 0);
    CHECK(all_zero(m));
    m.data()[0] = 1;
    m.data()[bytes - 1] = 2;  // the whole size is writable
    HostMemory moved(std::move(m));
    CHECK(moved.size() == bytes);
    CHECK(moved.data()[0] == (bytes == 1 ? 2 : 1));
    CHECK(moved.data()[bytes - 1] == 2);
  }
  for (int round = 0; round < 2; ++round) {  // a freed, dirtied buffer's memory comes back zero
    HostMemory m(3 * huge);
    CHECK(all_zero(m));
    for (size_t i = 0; i < m.size(); i += 4096) m.data()[i] = 0xff;
  }
}

TEST_CASE("committed host memory is resident before it is touched, and still zero") {
  const size_t bytes = (size_t{4} << 20) + 12345, page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  HostHeap heap;
  auto* p = static_cast<uint8_t*>(heap.alloc(bytes));
  auto resident = [&] {
    std::vector<unsigned char> in((bytes + page - 1) / page);
    REQUIRE(mincore(p, bytes, in.data()) == 0);
    size_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return n;
  };
  CHECK(resident() < (bytes + page - 1) / page);  // mapped, not yet faulted in
  HostHeap::commit(p, bytes);
  CHECK(resident() == (bytes + page - 1) / page);
  size_t nonzero = 0;
  for (size_t i = 0; i < bytes; ++i) nonzero += p[i] != 0;
  CHECK(nonzero == 0);
  heap.free(p);
}
