// KvPagePool's bookkeeping: pages handed out (lowest first) and returned, tables, forks
// sharing pages, copy-on-write of a shared partly filled page (and none for
// a shared full one), and running out of pages without a change.
#include <catch2/catch.hpp>
#include <set>

#include "ir/error.h"
#include "runtime/kv_page_pool.h"

using namespace kiln;

TEST_CASE("a page pool hands out pages as sequences grow and takes them back", "[runtime][kv]") {
  KvPagePool pool(8, 16);
  auto a = pool.create();
  CHECK(pool.append(a, 20).empty());
  CHECK(pool.length(a) == 20);
  CHECK(pool.table(a).size() == 2);
  CHECK(pool.append(a, 12).empty());  // fills the second page
  CHECK(pool.table(a).size() == 2);
  pool.append(a, 1);
  CHECK(pool.table(a).size() == 3);
  auto b = pool.create();
  pool.append(b, 40);
  std::set<int32_t> used(pool.table(a).begin(), pool.table(a).end());
  for (int32_t p : pool.table(b)) CHECK(used.insert(p).second);  // no page twice
  CHECK(pool.free_pages() == 2);
  pool.free(a);
  CHECK(pool.free_pages() == 5);
  CHECK(pool.padded_table(b, 5) ==
        std::vector<int32_t>{pool.table(b)[0], pool.table(b)[1], pool.table(b)[2], -1, -1});
  CHECK_THROWS_WITH(pool.padded_table(b, 2), Catch::Contains("holds 3 pages"));
  CHECK_THROWS_WITH(pool.length(a), Catch::Contains("no sequence 0"));
}

TEST_CASE("a page pool hands out its lowest free pages first", "[runtime][kv]") {
  // So that a prompt's pages are consecutive: one run per head in the
  // head-major pool.
  KvPagePool pool(8, 16);
  auto a = pool.create(), b = pool.create();
  pool.append(a, 48);
  pool.append(b, 32);
  CHECK(pool.table(a) == std::vector<int32_t>{0, 1, 2});
  CHECK(pool.table(b) == std::vector<int32_t>{3, 4});
  pool.free(a);
  auto c = pool.create();
  pool.append(c, 64);
  CHECK(pool.table(c) == std::vector<int32_t>{0, 1, 2, 5});
}

TEST_CASE("a fork shares its prefix and copies a shared partly filled page on write",
          "[runtime][kv]") {
  KvPagePool pool(6, 16);
  auto a = pool.create();
  pool.append(a, 24);  // one full page, one half page
  auto b = pool.fork(a);
  CHECK(pool.table(b) == pool.table(a));
  CHECK(pool.refs(pool.table(a)[0]) == 2);
  CHECK(pool.refs(pool.table(a)[1]) == 2);
  const int32_t half = pool.table(a)[1];
  // b writes row 24, inside the shared half page: a private copy first,
  // which the pages it needs count; 16 more rows need one page beyond it.
  CHECK(pool.pages_needed(b, 1) == 1);
  CHECK(pool.pages_needed(b, 9) == 2);
  CHECK(pool.pages_needed(b, 0) == 0);
  auto copies = pool.append(b, 1);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].from == half);
  CHECK(copies[0].to == pool.table(b)[1]);
  CHECK(pool.table(b)[1] != half);
  CHECK(pool.table(b)[0] == pool.table(a)[0]);  // the full page stays shared
  CHECK(pool.refs(half) == 1);
  CHECK(pool.pages_needed(a, 1) == 0);
  CHECK(pool.append(a, 1).empty());  // a now holds its half page alone
  // A fork at a page boundary shares only full pages: no copy on append.
  auto c = pool.create();
  pool.append(c, 16);
  auto d = pool.fork(c);
  CHECK(pool.append(d, 3).empty());
  CHECK(pool.table(d)[0] == pool.table(c)[0]);
  pool.free(c);
  CHECK(pool.refs(pool.table(d)[0]) == 1);
}

TEST_CASE("a truncated sequence lets go of the pages past its rows", "[runtime][kv]") {
  // Speculative decoding's refused guesses: rows appended, then dropped.
  KvPagePool pool(6, 16);
  auto a = pool.create();
  pool.append(a, 20);
  auto b = pool.fork(a);  // shares both pages, the second half full
  pool.append(b, 30);     // a copy of the half page, two new pages
  CHECK(pool.table(b).size() == 4);
  CHECK(pool.free_pages() == 1);
  pool.truncate(b, 21);  // back into its private copy: the new pages go
  CHECK(pool.length(b) == 21);
  CHECK(pool.table(b).size() == 2);
  CHECK(pool.free_pages() == 3);
  CHECK(pool.table(b)[0] == pool.table(a)[0]);
  pool.truncate(b, 8);  // into the shared full page: it stays shared
  CHECK(pool.table(b) == std::vector<int32_t>{pool.table(a)[0]});
  CHECK(pool.refs(pool.table(a)[0]) == 2);
  CHECK(pool.free_pages() == 4);
  // Writing row 8 of the shared page copies it first.
  auto copies = pool.append(b, 1);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].from == pool.table(a)[0]);
  pool.truncate(b, 0);
  CHECK(pool.table(b).empty());
  CHECK_THROWS_WITH(pool.truncate(a, 21), Catch::Contains("of 20 rows cannot keep 21"));
  CHECK_THROWS_WITH(pool.truncate(a, -1), Catch::Contains("cannot keep -1"));
}

TEST_CASE("a page pool refuses what it cannot hold", "[runtime][kv][error]") {
  KvPagePool pool(3, 16);
  auto a = pool.create();
  pool.append(a, 40);
  CHECK_THROWS_WITH(pool.append(a, 9),
                    Catch::Contains("needs 1 more pages of 16 rows, 0 are free"));
  CHECK(pool.length(a) == 40);  // unchanged
  CHECK(pool.table(a).size() == 3);
  auto b = pool.fork(a);
  // A copy-on-write needs a page too.
  CHECK_THROWS_WITH(pool.append(b, 1), Catch::Contains("needs 1 more pages"));
  CHECK_THROWS_WITH(KvPagePool(0, 16), Catch::Contains("0 pages of 16 rows"));
  CHECK_THROWS_WITH(check_block_table({0, 2, 7}, 3, 4),
                    Catch::Contains("entry 2 is page 7, outside the pool of 4 pages"));
  CHECK_THROWS_WITH(check_block_table({0, -1}, 2, 4), Catch::Contains("entry 1 is page -1"));
  CHECK_NOTHROW(check_block_table({0, 3, -1}, 2, 4));
}
