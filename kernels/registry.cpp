#include "kernels/registry.h"

#include <algorithm>

#include "ir/error.h"

namespace kiln {

namespace {
std::vector<KernelDef>& registry() {
  static std::vector<KernelDef> defs;
  return defs;
}

template <class T>
std::string join_names(const std::vector<T>& xs) {
  std::string r;
  for (const auto& x : xs) r += (r.empty() ? "" : ", ") + std::string(x);
  return r;
}
}  // namespace

int64_t ScalarArgs::i(const std::string& name) const {
  auto it = ints_.find(name);
  if (it == ints_.end()) throw Error("launch is missing the integer scalar '" + name + "'");
  return it->second;
}

double ScalarArgs::f(const std::string& name) const {
  auto it = floats_.find(name);
  if (it == floats_.end()) throw Error("launch is missing the float scalar '" + name + "'");
  return it->second;
}

Spec KernelDef::make_spec(const std::map<std::string, DType>& dtypes,
                          const std::map<std::string, int64_t>& constexprs,
                          const TargetDesc& target) const {
  Spec s;
  s.kernel = name;
  s.target = target;
  for (const auto& [role, allowed] : dtype_roles) s.dtypes[role] = allowed.front();
  for (const auto& [c, v] : constexpr_defaults) s.constexprs[c] = v;
  for (const auto& [role, t] : dtypes) {
    auto it = std::find_if(dtype_roles.begin(), dtype_roles.end(),
                           [&](const auto& r) { return r.first == role; });
    if (it == dtype_roles.end()) {
      std::vector<std::string> roles;
      for (const auto& r : dtype_roles) roles.push_back(r.first);
      throw Error("kernel '" + name + "' has no dtype role '" + role +
                  "' (roles: " + join_names(roles) + ")");
    }
    if (std::find(it->second.begin(), it->second.end(), t) == it->second.end()) {
      std::vector<std::string_view> ok;
      for (DType d : it->second) ok.push_back(dtype_name(d));
      throw Error("kernel '" + name + "' does not support dtype " + std::string(dtype_name(t)) +
                  " for role '" + role + "' (supported: " + join_names(ok) + ")");
    }
    s.dtypes[role] = t;
  }
  if (heuristic)
    for (const auto& [c, v] : heuristic(s)) s.constexprs[c] = v;
  for (const auto& [c, v] : constexprs) {
    if (!s.constexprs.count(c)) {
      std::vector<std::string> known;
      for (const auto& d : constexpr_defaults) known.push_back(d.first);
      throw Error("kernel '" + name + "' has no constexpr '" + c +
                  "' (constexprs: " + join_names(known) + ")");
    }
    // Tunables are counts and sizes: below 1 (or below the least declared
    // value, where that is less) a kernel would divide by zero or index
    // nothing as it is built.
    if (const Tunable* tn = tunable(c); tn && v < std::min<int64_t>(tn->values.front(), 1))
      throw Error("kernel '" + name + "': " + c + " = " + std::to_string(v) + " must be at least " +
                  std::to_string(std::min<int64_t>(tn->values.front(), 1)));
    s.constexprs[c] = v;
  }
  return s;
}

const Tunable* KernelDef::tunable(const std::string& n) const {
  for (const Tunable& t : tunables)
    if (t.name == n) return &t;
  return nullptr;
}

bool register_kernel(KernelDef def) {
  for (const KernelDef& d : registry())
    if (d.name == def.name)
      throw Error("kernel '" + def.name + "' is registered already (by " +
                  (d.origin.empty() ? std::string("the library") : d.origin) + ")");
  registry().push_back(std::move(def));
  std::sort(registry().begin(), registry().end(),
            [](const KernelDef& a, const KernelDef& b) { return a.name < b.name; });
  return true;
}

bool register_library_kernel(KernelDef def) {
  def.origin = "";
  return register_kernel(std::move(def));
}

const std::vector<KernelDef>& all_kernels() { return registry(); }

const KernelDef& find_kernel(const std::string& name) {
  for (const auto& d : registry())
    if (d.name == name) return d;
  std::vector<std::string> names;
  for (const auto& d : registry()) names.push_back(d.name);
  throw Error("unknown kernel '" + name + "' (known: " + join_names(names) + ")");
}

}  // namespace kiln
