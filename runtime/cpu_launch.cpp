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

namespace {
// A scalar's 8-byte slot (launch_abi.h): integers as int64, floats as the
// bits of a double.
int64_t scalar_slot(bool float_param, const Arg& a) {
  if (!float_param) return a.i;
  int64_t bits;
  std::memcpy(&bits, &a.f, sizeof bits);
  return bits;
}
}  // namespace

CpuLaunch::CpuLaunch(const Kernel& k, KernelRangeFn fn, const std::vector<Arg>& args,
                     const Grid& grid, int64_t bytes)
    : fn_(fn) {
  check_arg_kinds(k, args);
  for (int a = 0; a < 3; ++a)
    if (grid[a] < 0 || grid[a] > INT32_MAX)
      throw Error("kernel '" + k.name + "': grid axis " + std::to_string(a) + " has " +
                  std::to_string(grid[a]) + " programs (0.." + std::to_string(INT32_MAX) +
                  " allowed)");
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    if (p.kind == ParamKind::Buffer) {
      buffers_.push_back(args[i].data);
      slot_.emplace_back(-1, false);
      continue;
    }
    slot_.emplace_back(static_cast<int>(scalars_.size()), is_float(p.dtype));
    scalars_.push_back(scalar_slot(is_float(p.dtype), args[i]));
  }
  la_ = LaunchArgs{buffers_.data(),
                   scalars_.data(),
                   {static_cast<int32_t>(grid[0]), static_cast<int32_t>(grid[1]),
                    static_cast<int32_t>(grid[2])}};
  programs_ = grid[0] * grid[1] * grid[2];
  serial_ = bytes >= 0 && bytes < kSerialLaunchBytes;
}

void CpuLaunch::set_scalar(size_t index, int64_t v) {
  auto [slot, is_float_param] = slot_.at(index);
  if (slot < 0) throw Error("CpuLaunch: argument " + std::to_string(index) + " is a buffer");
  scalars_[slot] = scalar_slot(is_float_param, Arg::scalar_int(v));
}

void CpuLaunch::run(ThreadPool& pool) {
  if (serial_) {
    if (programs_ > 0) fn_(&la_, 0, programs_);
    return;
  }
  pool.parallel_for(programs_, [this](int64_t b, int64_t e) { fn_(&la_, b, e); });
}

void launch_cpu(const Kernel& k, KernelRangeFn fn, const std::vector<Arg>& args, const Grid& grid,
                ThreadPool& pool, int64_t bytes) {
  CpuLaunch(k, fn, args, grid, bytes).run(pool);
}

}  // namespace kiln
