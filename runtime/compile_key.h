// The identity of a compiled kernel: everything that decides its machine
// code and nothing that does not.
//
// Two launches share compiled code exactly when their keys are equal. The
// key names the kernel, the dtype of every parameter, every constexpr, the
// backend and its target (triple, CPU, features; or the sm arch), the IR
// text after the passes, and the backend's code generator: its toolchain's
// version and Kiln's version plus a fingerprint of that backend's
// code-generator sources (so a changed lowering never reuses stale code,
// and a change to one backend's lowering leaves the others' cache alone).
// Runtime scalars (sequence lengths, sizes) are deliberately absent: they
// do not change the code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/kernel.h"
#include "runtime/backend.h"

namespace kiln {

struct CompileKey {
  std::string kernel;
  std::vector<std::pair<std::string, DType>> param_dtypes;
  std::vector<std::pair<std::string, int64_t>> constexprs;
  std::string backend;
  std::string target;
  std::string codegen;
  std::string ir_text;

  std::string canonical() const;  // stable, line-oriented serialisation
  std::string digest() const;     // SHA-256 of canonical(), 64 hex digits
};

CompileKey make_compile_key(const Kernel& k, const Backend& backend);

// What finds a spec's compiled code without building its IR: a SHA-256 of
// the spec (kernel, dtypes, constexprs, target descriptor), the backend, its
// target and code generator, and a fingerprint of everything that builds
// the IR from a spec (ir/ and kernels/ sources, the compiler that built
// them). The compile cache maps it to the digest of the CompileKey the
// spec's IR had when it was compiled (CompileCache::find_digest), so a warm
// process links cached code after building only the kernel's parameters.
std::string spec_index_key(const Spec& spec, const Backend& backend);

// SHA-256 of data as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace kiln
