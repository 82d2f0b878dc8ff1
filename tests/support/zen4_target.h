// AMD Zen 4 as LLVM names it, for tests that read the assembly Kiln emits
// for a fixed x86 core whatever the host is (load order, register pressure).
#pragma once

#include "targets/cpu/cpu_target.h"

namespace kiln::test {

inline CpuTarget zen4_target() {
  return {"znver4", "x86_64-unknown-linux-gnu", "znver4",
          "+avx2,+avx512bw,+avx512dq,+avx512f,+avx512vl,+avx512vnni,+f16c,+fma"};
}

}  // namespace kiln::test
