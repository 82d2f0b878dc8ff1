// The kernel library's table of contents: every library kernel registers a
// KernelDef, and tools, tests and the runtime find kernels here by name.
//
// A KernelDef says how to build the kernel from a Spec, which dtypes each
// role accepts (the first one is the default), the default value of each
// constexpr, and how a launch's scalar arguments determine the grid and the
// number of elements every buffer must hold, so a launch with a buffer that
// is too small is refused before any code runs. A kernel file registers
// itself with KILN_REGISTER_KERNEL; nothing else needs to change to add one.
// Kernels written outside the library (a program using Kiln, a plugin, a
// test) are added with register_kernel at run time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/interpreter.h"
#include "ir/kernel.h"
#include "ir/spec.h"

namespace kiln {

// A launch's scalar arguments by parameter name (ints as int64, floats as double).
class ScalarArgs {
 public:
  void set_int(const std::string& name, int64_t v) { ints_[name] = v; }
  void set_float(const std::string& name, double v) { floats_[name] = v; }
  int64_t i(const std::string& name) const;  // throws naming the missing scalar
  double f(const std::string& name) const;

 private:
  std::map<std::string, int64_t> ints_;
  std::map<std::string, double> floats_;
};

struct LaunchShape {
  Grid grid{1, 1, 1};
  std::map<std::string, int64_t> buffer_elems;  // required elements, by buffer name
  // The work is a loop count, not the buffers' size: the launch is spread
  // over the pool however few bytes it touches (runtime/cpu/cpu_launch.h runs
  // small launches on one thread otherwise).
  bool compute_bound = false;
};

// A constexpr `kiln tune` may search, with every value it may take.
struct Tunable {
  std::string name;
  std::vector<int64_t> values;  // ascending
};

struct KernelDef {
  std::string name;
  std::string family;
  std::string summary;
  std::vector<std::pair<std::string, std::vector<DType>>> dtype_roles;
  std::vector<std::pair<std::string, int64_t>> constexpr_defaults;
  std::function<Kernel(const Spec&)> build;
  std::function<LaunchShape(const Spec&, const ScalarArgs&)> launch_shape;
  // Optional: constexpr defaults that depend on the dtypes or the target
  // (the kernel's own heuristic). Applied to the constexprs the caller did
  // not set.
  std::function<std::map<std::string, int64_t>(const Spec&)> heuristic = nullptr;
  // Optional: constexprs that depend on the launch sizes (e.g. how many
  // tokens a program takes). Runtime::select applies it when the tuning
  // database has no entry, to the constexprs the caller did not fix.
  std::function<std::map<std::string, int64_t>(const Spec&, const ScalarArgs&)> shape_heuristic =
      nullptr;
  // What tuning may change, and the launch sizes whose power-of-two buckets
  // key the tuning database (e.g. {"m", "k"} for gemv).
  std::vector<Tunable> tunables = {};
  std::vector<std::string> shape_keys = {};
  // Outputs vs the reference interpreter when tuning (|d| <= atol + rtol*|ref|).
  double rtol = 1e-5, atol = 1e-6;
  // Where the definition comes from: "" for the library; a plugin's path, or
  // "program" for one registered by the program itself. Only the library's
  // builds are covered by the build's IR fingerprint, so only their compiled
  // code may be found by spec without building the IR (runtime/compile_key.h).
  std::string origin = "program";

  const Tunable* tunable(const std::string& name) const;

  // Fills in defaults for `target` and checks every dtype and constexpr
  // against this definition; errors name the kernel, the entry and what is
  // accepted.
  Spec make_spec(const std::map<std::string, DType>& dtypes = {},
                 const std::map<std::string, int64_t>& constexprs = {},
                 const TargetDesc& target = {}) const;
};

// Adds a kernel; throws kiln::Error if one of that name is registered already.
bool register_kernel(KernelDef def);
const std::vector<KernelDef>& all_kernels();
// Throws kiln::Error listing the known kernels.
const KernelDef& find_kernel(const std::string& name);

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)
// The library's kernels only (their origin is ""): a kernel elsewhere calls
// register_kernel, or is registered by a plugin (runtime/plugin.h).
#ifdef KILN_BUILDING_LIBRARY
bool register_library_kernel(KernelDef def);
#define KILN_REGISTER_KERNEL(def) \
  static const bool KILN_CONCAT(kiln_registered_, __LINE__) = ::kiln::register_library_kernel(def)
#endif

}  // namespace kiln
