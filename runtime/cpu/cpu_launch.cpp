#include "runtime/cpu/cpu_launch.h"

#include <cstring>

#include "ir/error.h"

namespace kiln {

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
                     const Grid& grid, ThreadPool& pool, int64_t bytes)
    : fn_(fn), pool_(pool), name_(k.name) {
  check_arg_kinds(k, args);
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
  la_ = CpuKernelArgs{buffers_.data(), scalars_.data(), {0, 0, 0}};
  for (int a = 0; a < 3; ++a) {
    if (grid[a] < 0 || grid[a] > INT32_MAX)
      throw Error("kernel '" + name_ + "': grid axis " + std::to_string(a) + " has " +
                  std::to_string(grid[a]) + " programs (0.." + std::to_string(INT32_MAX) +
                  " allowed)");
    la_.grid[a] = static_cast<int32_t>(grid[a]);
  }
  programs_ = grid[0] * grid[1] * grid[2];
  serial_ = bytes >= 0 && bytes < kSerialLaunchBytes;
}

void CpuLaunch::set_scalar(size_t index, int64_t v) {
  auto [slot, is_float_param] = slot_.at(index);
  if (slot < 0) throw Error("CpuLaunch: argument " + std::to_string(index) + " is a buffer");
  scalars_[slot] = scalar_slot(is_float_param, Arg::scalar_int(v));
}

void CpuLaunch::run() {
  if (serial_) {
    if (programs_ > 0) fn_(&la_, 0, programs_);
    return;
  }
  pool_.parallel_for(programs_, [this](int64_t b, int64_t e) { fn_(&la_, b, e); });
}

void launch_cpu(const Kernel& k, KernelRangeFn fn, const std::vector<Arg>& args, const Grid& grid,
                ThreadPool& pool, int64_t bytes) {
  CpuLaunch(k, fn, args, grid, pool, bytes).run();
}

}  // namespace kiln
