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

struct Spec {
  std::string kernel;
  std::map<std::string, DType> dtypes;
  std::map<std::string, int64_t> constexprs;

  DType dtype(const std::string& role) const;
  int64_t constexpr_(const std::string& name) const;
  bool has_constexpr(const std::string& name) const { return constexprs.count(name) != 0; }

  // "gemv[T=f16,BLOCK_K=256,BLOCK_M=4]": stable, sorted, used in names and keys.
  std::string str() const;
};

}  // namespace kiln
