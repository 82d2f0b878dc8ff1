// One Runtime per test process (2 threads) so kernels compile once, and no
// tuning database, so tests never see the user's tunings. Its compile cache
// is the build's own (KILN_TEST_CACHE_DIR, which ctest sets to a folder of
// the build tree), shared by the processes ctest runs, one per test case:
// each would otherwise JIT the same kernels again, the larger part of the
// suite's time. Run by hand without it, the cache is memory only; never the
// user's.
#pragma once

#include <cstdlib>

#include "runtime/runtime.h"

namespace kiln::test {

inline Runtime& runtime() {
  static Runtime rt([] {
    const char* dir = std::getenv("KILN_TEST_CACHE_DIR");
    return RuntimeOptions{2, dir ? dir : "", false};
  }());
  return rt;
}

}  // namespace kiln::test
