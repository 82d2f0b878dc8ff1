// ColdCopies: the argument sets a benchmark or the tuner cycles through so
// that each launch reads its large buffers from DRAM.
#include <catch2/catch.hpp>
#include <cstring>
#include <set>

#include "runtime/cold_copies.h"
#include "runtime/runtime.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {

Kernel add_kernel() { return build_kernel(find_kernel("add").make_spec({{"T", DType::f32}})); }

}  // namespace

TEST_CASE("cold copies duplicate the large buffers only, with their contents",
          "[runtime][cold_copies]") {
  // add(x, y, z = out, n): x and out large (8 KiB), y small (passed with fewer
  // elements than the launch reads: ColdCopies looks at the sizes given).
  auto x = HostBuffer::random(DType::f32, 2048, 1), y = HostBuffer::random(DType::f32, 16, 2);
  auto out = HostBuffer::random(DType::f32, 2048, 3);
  const Kernel k = add_kernel();
  const BoundArgs bound = bind_named(k, {{"x", x}, {"y", y}, {"z", out}, {"n", int64_t{2048}}});
  const std::vector<Arg>& args = bound.args();
  // 16 KiB per set of large buffers, 64 KiB in all: the original and 3 copies.
  ColdCopies c(k, bound, 4096, 65536);
  REQUIRE(c.count() == 4);
  std::set<void*> xs, outs;
  for (size_t i = 0; i < c.count(); ++i) {
    const std::vector<Arg>& a = c.next().args();
    REQUIRE(a.size() == args.size());
    xs.insert(a[0].data);
    outs.insert(a[2].data);
    CHECK(a[1].data == args[1].data);  // small: shared
    CHECK(a[3].i == 2048);
    CHECK(a[0].count == 2048);
    CHECK(std::memcmp(a[0].data, args[0].data, 2048 * 4) == 0);
    CHECK(std::memcmp(a[2].data, args[2].data, 2048 * 4) == 0);
  }
  CHECK(xs.size() == 4);
  CHECK(outs.size() == 4);
  CHECK(c.next().args()[0].data == args[0].data);  // cycles back to the original
}

TEST_CASE("cold copies of a launch without large buffers copy its largest; warm, none",
          "[runtime][cold_copies]") {
  // out is the largest (1 KiB), x as large, y smaller: x and out are copied,
  // 2 KiB a set, 8 KiB in all: the original and 3 copies.
  auto x = HostBuffer::random(DType::f32, 256, 1), y = HostBuffer::random(DType::f32, 64, 2);
  auto out = HostBuffer(DType::f32, 256);
  const Kernel k = add_kernel();
  const BoundArgs bound = bind_named(k, {{"x", x}, {"y", y}, {"z", out}, {"n", int64_t{256}}});
  const std::vector<Arg>& args = bound.args();
  ColdCopies small(k, bound, kColdBufferBytes, 8192);
  REQUIRE(small.count() == 4);
  std::set<void*> xs;
  for (size_t i = 0; i < small.count(); ++i) {
    const std::vector<Arg>& a = small.next().args();
    xs.insert(a[0].data);
    CHECK(a[1].data == args[1].data);
    CHECK(std::memcmp(a[0].data, args[0].data, 256 * 4) == 0);
  }
  CHECK(xs.size() == 4);
  ColdCopies warm(bound);
  CHECK(warm.count() == 1);
  CHECK(warm.next().args()[2].data == args[2].data);
  CHECK(warm.next().args()[2].data == args[2].data);
}
