#include "ir/spec.h"

#include "ir/error.h"

namespace kiln {

DType Spec::dtype(const std::string& role) const {
  auto it = dtypes.find(role);
  if (it == dtypes.end())
    throw Error("kernel '" + kernel + "': missing dtype '" + role + "' in its spec");
  return it->second;
}

int64_t Spec::constexpr_(const std::string& name) const {
  auto it = constexprs.find(name);
  if (it == constexprs.end())
    throw Error("kernel '" + kernel + "': missing constexpr '" + name + "' in its spec");
  return it->second;
}

std::string Spec::str() const {
  std::string r = kernel + "[";
  bool first = true;
  for (const auto& [k, v] : dtypes) {
    r += (first ? "" : ",") + k + "=" + std::string(dtype_name(v));
    first = false;
  }
  for (const auto& [k, v] : constexprs) {
    r += (first ? "" : ",") + k + "=" + std::to_string(v);
    first = false;
  }
  r += "]";
  if (!(target == TargetDesc{})) r += "@" + target.str();
  return r;
}

std::string TargetDesc::str() const {
  return "v" + std::to_string(vector_bits) + "r" + std::to_string(vector_registers) + "w" +
         std::to_string(warp_size);
}

}  // namespace kiln
