// The thread pool: every item of every launch runs exactly once, on back-to-
// back launches of varying sizes, with more threads than cores (workers that
// wake late must neither miss nor repeat items, nor run an old launch's
// function), and a chunk's exception reaches the caller.
#include <atomic>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

#include "targets/cpu/thread_pool.h"

using namespace kiln;

TEST_CASE("every item of every launch runs exactly once", "[thread_pool]") {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(3000);
    for (int launch = 0; launch < 2000; ++launch) {
      int64_t n = (launch * 37) % 3000;
      for (int64_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
      // Each launch has its own function object, so a worker running a
      // stale launch's function would write the wrong tag.
      int tag = launch + 1;
      pool.parallel_for(n, [&hits, tag](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(tag, std::memory_order_relaxed);
      });
      for (int64_t i = 0; i < n; ++i) {
        int h = hits[i].load(std::memory_order_relaxed);
        if (h != tag)
          FAIL("threads " << threads << ", launch " << launch << ", item " << i << ": got " << h
                          << ", want " << tag);
      }
    }
  }
}

TEST_CASE("a chunk's exception is rethrown and the pool stays usable", "[thread_pool]") {
  ThreadPool pool(3);
  REQUIRE_THROWS_WITH(pool.parallel_for(100,
                                        [](int64_t b, int64_t e) {
                                          if (b <= 57 && 57 < e)
                                            throw std::runtime_error("item 57");
                                        }),
                      "item 57");
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  REQUIRE(sum == 4950);
}

TEST_CASE("launches far larger than the chunk count cover every item", "[thread_pool]") {
  ThreadPool pool(2);
  const int64_t n = 5'000'003;
  std::atomic<int64_t> count{0}, sum{0};
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    count += e - b;
    int64_t s = 0;
    for (int64_t i = b; i < e; ++i) s += i;
    sum += s;
  });
  REQUIRE(count == n);
  REQUIRE(sum == n * (n - 1) / 2);
}
