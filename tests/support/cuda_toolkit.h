// Whether the CUDA toolkit (NVRTC, ptxas) is here: tests that need it
// call this first and return, with a warning naming what was looked for,
// where it is not.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "targets/cuda/nvrtc_compiler.h"

namespace kiln::test {

inline bool have_cuda_toolkit() {
  std::string why;
  if (!find_cuda_toolkit(&why).empty()) return true;
  WARN("skipped: " << why);
  return false;
}

}  // namespace kiln::test
