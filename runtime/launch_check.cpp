#include "runtime/launch_check.h"

#include <algorithm>
#include <cmath>

#include "ir/scalar_eval.h"

namespace kiln {

namespace {

// A unit in the last place at 1 of a float stored as t.
double storage_ulp(DType t) {
  switch (t) {
    case DType::f16: return 0x1p-10;
    case DType::bf16: return 0x1p-7;
    default: return 0;
  }
}

}  // namespace

LaunchTolerance launch_tolerance(const Kernel& k, double rtol, double atol) {
  LaunchTolerance t{std::max(rtol, 1e-4), std::max(atol, 1e-5)};
  for (const Param& p : k.params)
    if (p.kind == ParamKind::Buffer) t.rtol = std::max(t.rtol, 1e-4 + storage_ulp(p.dtype));
  return t;
}

std::string check_against_interpreter(const Kernel& k, const std::vector<Arg>& args,
                                      const Grid& grid, const LaunchTolerance& tol,
                                      const std::function<void()>& run) {
  std::vector<std::vector<char>> ref_mem;
  std::vector<Arg> ref_args = args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_buffer) continue;
    const char* src = static_cast<const char*>(args[i].data);
    ref_mem.emplace_back(src, src + args[i].count * dtype_bytes(k.params[i].dtype));
    ref_args[i].data = ref_mem.back().data();
  }
  interpret(k, ref_args, grid);
  run();
  for (size_t i = 0, b = 0; i < args.size(); ++i) {
    if (!args[i].is_buffer) continue;
    const DType t = k.params[i].dtype;
    for (int64_t j = 0; j < args[i].count; ++j) {
      ScalarValue r = load_element(ref_mem[b].data(), j, t);
      ScalarValue s = load_element(args[i].data, j, t);
      bool ok = is_float(t) ? (std::isnan(r.f) && std::isnan(s.f)) || r.f == s.f ||
                                  std::fabs(r.f - s.f) <= tol.atol + tol.rtol * std::fabs(r.f)
                            : r.i == s.i;
      if (!ok)
        return "kernel '" + k.name + "', buffer '" + k.params[i].name + "'[" + std::to_string(j) +
               "]: compiled " + (is_float(t) ? std::to_string(s.f) : std::to_string(s.i)) +
               ", interpreter " + (is_float(t) ? std::to_string(r.f) : std::to_string(r.i));
    }
    ++b;
  }
  return "";
}

}  // namespace kiln
