// One Runtime per test binary (2 threads) so kernels compile once; memory-only
// compile cache and no tuning database, so tests see neither the user's
// cache nor their tunings.
#pragma once

#include "runtime/runtime.h"

namespace kiln::test {

inline Runtime& runtime() {
  static Runtime rt(RuntimeOptions{2, "", false});
  return rt;
}

}  // namespace kiln::test
