// The reference interpreter: the executable definition of every op.
//
// It runs a verified kernel over a grid on host buffers, one program
// instance after another, element by element, exactly as ir/op.h words it.
// It is slow on purpose and never clever; the CPU JIT and the CUDA path are
// tested against it. Out-of-range unmasked accesses are reported as errors
// naming the kernel, the op, the buffer and the offending index.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/kernel.h"

namespace kiln {

// One launch argument, in parameter order: a buffer (host pointer and its
// size in elements) or a scalar (held as int64 for integer/bool params,
// double for float params).
// An integer scalar may be passed for a float parameter (it converts); a
// float scalar for an integer parameter is an error.
struct Arg {
  bool is_buffer = false;
  bool is_float = false;
  void* data = nullptr;
  int64_t count = 0;  // elements, for buffers
  int64_t i = 0;
  double f = 0;

  static Arg buffer(void* p, int64_t n) { return Arg{true, false, p, n, 0, 0}; }
  static Arg scalar_int(int64_t v) {
    return Arg{false, false, nullptr, 0, v, static_cast<double>(v)};
  }
  static Arg scalar_float(double v) { return Arg{false, true, nullptr, 0, 0, v}; }
};

using Grid = std::array<int64_t, 3>;

// Throws kiln::Error on a wrong argument count or kind, or a faulting access.
void interpret(const Kernel& k, const std::vector<Arg>& args, const Grid& grid);

}  // namespace kiln
