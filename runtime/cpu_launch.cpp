#include "runtime/cpu_launch.h"

#include <cstring>

#include "ir/error.h"

namespace kiln {

void check_arg_kinds(const Kernel& k, const std::vector<Arg>& args) {
  const std::string who = "kernel '" + k.name + "'";
  if (args.size() != k.params.size()) {
    std::string names;
    for (const auto& p : k.params) names += (names.empty() ? "" : ", ") + p.name;
    throw Error(who + " takes " + std::to_string(k.params.size()) + " arguments (" + names +
                "), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    bool want_buffer = p.kind == ParamKind::Buffer;
    if (args[i].is_buffer != want_buffer)
      throw Error(who + ": argument " + std::to_string(i) + " ('" + p.name + "') must be a " +
                  (want_buffer ? "buffer" : "scalar"));
    if (want_buffer && args[i].count > 0 && !args[i].data)
      throw Error(who + ": buffer '" + p.name + "' is null");
    if (want_buffer && args[i].count < 0)
      throw Error(who + ": buffer '" + p.name + "' has a negative size");
    if (!want_buffer && args[i].is_float && !is_float(p.dtype))
      throw Error(who + ": scalar '" + p.name + "' is " + std::string(dtype_name(p.dtype)) +
                  " but a float was passed");
  }
}

void launch_cpu(const Kernel& k, KernelRangeFn fn, const std::vector<Arg>& args, const Grid& grid,
                ThreadPool& pool, int64_t bytes) {
  check_arg_kinds(k, args);
  for (int a = 0; a < 3; ++a)
    if (grid[a] < 0 || grid[a] > INT32_MAX)
      throw Error("kernel '" + k.name + "': grid axis " + std::to_string(a) + " has " +
                  std::to_string(grid[a]) + " programs (0.." + std::to_string(INT32_MAX) +
                  " allowed)");
  std::vector<void*> buffers;
  std::vector<int64_t> scalars;
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    if (p.kind == ParamKind::Buffer) {
      buffers.push_back(args[i].data);
    } else if (is_float(p.dtype)) {
      int64_t bits;
      std::memcpy(&bits, &args[i].f, sizeof bits);
      scalars.push_back(bits);
    } else {
      scalars.push_back(args[i].i);
    }
  }
  LaunchArgs la{buffers.data(),
                scalars.data(),
                {static_cast<int32_t>(grid[0]), static_cast<int32_t>(grid[1]),
                 static_cast<int32_t>(grid[2])}};
  int64_t programs = grid[0] * grid[1] * grid[2];
  if (bytes >= 0 && bytes < kSerialLaunchBytes) {
    if (programs > 0) fn(&la, 0, programs);
    return;
  }
  pool.parallel_for(programs, [&](int64_t b, int64_t e) { fn(&la, b, e); });
}

}  // namespace kiln
