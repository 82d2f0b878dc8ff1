// HostMemory promises zero-filled buffers, 64-byte aligned, and 2 MiB-aligned
// from 2 MiB up (mapped rather than filled, so the zeros come from the
// kernel): checked on both sides of that size, after a move, and for a
// large buffer allocated where a freed one of the same size was dirtied.
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>

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
