// The prefix cache (runtime/prefix_cache.h) over a KvPagePool: the longest
// run of cached full pages is found, a differing token anywhere before a
// page's end misses it and every page after, pages only the cache holds are
// evicted least recently used first, and pages a sequence holds never are.
#include <catch2/catch.hpp>

#include "ir/error.h"
#include "runtime/prefix_cache.h"

using namespace kiln;

namespace {
std::vector<int32_t> tokens(int n, int32_t first) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}
}  // namespace

TEST_CASE("the prefix cache shares full pages of the same prefix", "[runtime][prefix_cache]") {
  KvPagePool pool(8, 4);
  PrefixCache cache(pool);
  const std::vector<int32_t> a = tokens(10, 100);  // two full pages and two rows
  auto s = pool.create();
  pool.append(s, 10);
  cache.insert(a, pool.table(s));
  CHECK(cache.pages() == 2);
  const std::vector<int32_t> held = pool.table(s);
  pool.free(s);
  CHECK(pool.free_pages() == 6);  // the cache keeps the two full pages

  CHECK(cache.match(a, 8) == std::vector<int32_t>{held[0], held[1]});
  CHECK(cache.match(a, 1) == std::vector<int32_t>{held[0]});
  std::vector<int32_t> b = a;
  b[5] = 7;  // the second page differs: only the first is shared
  CHECK(cache.match(b, 8) == std::vector<int32_t>{held[0]});
  b[0] = 7;  // the first differs: nothing, though the second page's tokens match again
  b[5] = a[5];
  CHECK(cache.match(b, 8).empty());

  // A sequence on the cached pages: they are not evictable while it holds them.
  auto t = pool.create(cache.match(a, 8));
  CHECK(pool.length(t) == 8);
  CHECK(pool.refs(held[0]) == 2);
  CHECK_FALSE(cache.evict(8));
  CHECK(cache.pages() == 2);
  pool.free(t);
  CHECK(cache.evict(7));  // one page released: the least recently used
  CHECK(cache.pages() == 1);
  CHECK(cache.evict(8));
  CHECK(cache.pages() == 0);
  CHECK(pool.free_pages() == 8);
}

TEST_CASE("pool holders besides sequences are checked", "[runtime][prefix_cache][error]") {
  KvPagePool pool(2, 4);
  REQUIRE_THROWS_WITH(pool.retain(0), Catch::Contains("retaining page 0, which is not held"));
  REQUIRE_THROWS_WITH(pool.release(5), Catch::Contains("releasing page 5, which is not held"));
  REQUIRE_THROWS_WITH(pool.create({1}), Catch::Contains("page 1 is not held"));
}
