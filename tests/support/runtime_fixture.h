// One Runtime per test process (2 threads) so kernels compile once, and no
// tuning database, so tests never see the user's tunings. Its compile cache
// is the build's own (KILN_TEST_CACHE_DIR, which ctest sets to a folder of
// the build tree), shared by the processes ctest runs, one per test case:
// each would otherwise JIT the same kernels again, the larger part of the
// suite's time. Run by hand without it, the cache is memory only; never the
// user's.
#pragma once

#include <cstdlib>
#include <string>

#include "runtime/runtime.h"

namespace kiln::test {

// The compile cache a test's runtimes share: the build's, else memory only.
inline std::string cache_dir() {
  const char* dir = std::getenv("KILN_TEST_CACHE_DIR");
  return dir ? dir : "";
}

inline Runtime& runtime() {
  static Runtime rt(RuntimeOptions{2, cache_dir(), false});
  return rt;
}

}  // namespace kiln::test
