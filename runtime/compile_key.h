// The identity of a compiled kernel: everything that decides its machine
// code and nothing that does not.
//
// Two launches share compiled code exactly when their keys are equal. The
// key names the kernel, the dtype of every parameter, every constexpr, the
// target (triple, CPU, features), the IR text after the passes, the LLVM
// version and Kiln's own version plus a fingerprint of the code-generator
// sources (so a changed lowering never reuses stale objects). Runtime
// scalars (sequence lengths, sizes) are deliberately absent: they do not
// change the code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/kernel.h"
#include "targets/cpu/cpu_target.h"

namespace kiln {

struct CompileKey {
  std::string kernel;
  std::vector<std::pair<std::string, DType>> param_dtypes;
  std::vector<std::pair<std::string, int64_t>> constexprs;
  std::string target;
  std::string ir_text;
  std::string llvm_version;
  std::string kiln_version;

  std::string canonical() const;  // stable, line-oriented serialisation
  std::string digest() const;     // SHA-256 of canonical(), 64 hex digits
};

CompileKey make_compile_key(const Kernel& k, const CpuTarget& target);

// "0.1.0+<codegen fingerprint>"
std::string kiln_version();

// SHA-256 of data as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace kiln
