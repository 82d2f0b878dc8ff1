// One Runtime per test binary (2 threads) so kernels compile once.
#pragma once

#include "runtime/runtime.h"

namespace kiln::test {

inline Runtime& runtime() {
  static Runtime rt(2);
  return rt;
}

}  // namespace kiln::test
