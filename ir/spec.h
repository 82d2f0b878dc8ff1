// What a kernel is built with: dtypes by role name and constexpr values.
//
// A kernel definition is a function of its Spec (`Kernel rmsnorm(const
// Spec&)`), so two kernels that differ only by a dtype or a block size are
// one definition and two Specs. Asking a Spec for a name it does not hold is
// a build-time error naming the kernel and the missing entry.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/dtype.h"

namespace kiln {

// What a kernel may assume of the machine it is built for, as numbers it
// derives tile shapes from (an attention lane count, a block of keys)
// instead of hard-coding one instruction set's. The runtime fills it in from
// its backend and `kiln inspect --target` from the named target; the
// default is an AVX-512 core.
struct TargetDesc {
  int vector_bits = 512;      // a SIMD register (CPU); a warp's 32-bit lanes (CUDA: 32 x 32)
  int vector_registers = 32;  // SIMD registers (CPU); 32-bit registers a thread may use (CUDA)
  int warp_size = 1;          // threads that run in lockstep and shuffle (CPU 1, CUDA 32)

  int64_t lanes(DType t) const { return vector_bits / dtype_bits(t); }
  bool operator==(const TargetDesc&) const = default;
  std::string str() const;  // "v512r32w1"
};

struct Spec {
  std::string kernel;
  std::map<std::string, DType> dtypes;
  std::map<std::string, int64_t> constexprs;
  TargetDesc target = {};

  DType dtype(const std::string& role) const;
  int64_t constexpr_(const std::string& name) const;
  bool has_constexpr(const std::string& name) const { return constexprs.count(name) != 0; }

  // "gemv[T=f16,BLOCK_K=256,BLOCK_M=4]", with "@v256r16w1" appended for a
  // target other than the default: stable, sorted, used in names and keys.
  std::string str() const;
};

}  // namespace kiln
