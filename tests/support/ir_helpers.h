// Small helpers for tests that build and inspect kernels.
#pragma once

#include <string>

#include "ir/kernel.h"
#include "ir/spec.h"

namespace kiln::test {

inline Spec spec_for(const std::string& name) {
  Spec s;
  s.kernel = name;
  return s;
}

// Ops of one kind in a block, nested regions included.
inline int count_ops(const Block& b, OpKind kind) {
  int n = 0;
  for (const Op& op : b.ops) {
    n += op.kind == kind;
    for (const Block& r : op.regions) n += count_ops(r, kind);
  }
  return n;
}
inline int count_ops(const Kernel& k, OpKind kind) { return count_ops(k.body, kind); }

}  // namespace kiln::test
