#include "runtime/compile_key.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>

#include <cstdio>

#include "ir/printer.h"

#ifndef KILN_IR_FINGERPRINT
#error "KILN_IR_FINGERPRINT must be defined by the build"
#endif

namespace kiln {

CompileKey make_compile_key(const Kernel& k, const Backend& backend) {
  CompileKey key;
  key.kernel = k.name;
  for (const Param& p : k.params) key.param_dtypes.emplace_back(p.name, p.dtype);
  key.constexprs = k.constexprs;
  key.backend = backend.name();
  key.target = backend.target();
  key.codegen = backend.codegen_version();
  key.ir_text = print_kernel(k);
  return key;
}

std::string spec_index_key(const Spec& spec, const Backend& backend) {
  return sha256_hex("kiln spec index\nspec " + spec.str() + "\nbackend " + backend.name() +
                    "\ntarget " + backend.target() + "\ncodegen " + backend.codegen_version() +
                    "\nir " KILN_IR_FINGERPRINT "\n");
}

std::string CompileKey::canonical() const {
  std::string s = "kernel " + kernel + "\n";
  for (const auto& [n, t] : param_dtypes)
    s += "param " + n + " " + std::string(dtype_name(t)) + "\n";
  for (const auto& [n, v] : constexprs) s += "constexpr " + n + " " + std::to_string(v) + "\n";
  s += "backend " + backend + "\ntarget " + target + "\ncodegen " + codegen + "\nir\n" + ir_text;
  return s;
}

std::string sha256_hex(std::string_view data) {
  auto h = llvm::SHA256::hash(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  std::string hex;
  char buf[3];
  for (uint8_t b : h) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    hex += buf;
  }
  return hex;
}

std::string CompileKey::digest() const { return sha256_hex(canonical()); }

}  // namespace kiln
