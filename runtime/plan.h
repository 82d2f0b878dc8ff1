// A recorded sequence of kernel launches, replayed for every call of the
// same shape.
//
// A model forward for a given number of tokens launches the same kernels
// with the same grids on the same buffers every time; only a few scalars
// change (the position of the first token, the KV length). Choosing specs,
// compiling and checking buffer sizes happen once, when the plan is
// recorded; replaying is a walk over ready launches whose changing scalars
// are patched from named slots. Host steps (embedding lookups, routing)
// sit between launches in order. A plan can also be replayed through the
// reference interpreter, which makes a whole forward checkable against it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/cpu_launch.h"
#include "runtime/runtime.h"

namespace kiln {

class Plan {
 public:
  // A scalar argument whose value is set per replay (see set()).
  struct Dynamic {
    std::string slot;
  };
  using PlanArg = std::variant<Arg, Dynamic>;

  explicit Plan(Runtime& rt) : rt_(rt) {}

  // Records a launch of `kernel`, selected and compiled now. Dynamic
  // scalars take `probe` values for the size checks made here; callers
  // must keep every later value within what those checks allowed.
  void launch(const std::string& label, const std::string& kernel,
              const std::map<std::string, DType>& dtypes, const std::vector<PlanArg>& args,
              const Sizes& sizes = {}, const std::map<std::string, int64_t>& fixed = {},
              const std::map<std::string, int64_t>& probe = {});
  // Records host code run at this point of the sequence.
  void host(const std::string& label, std::function<void()> fn);

  void set(const std::string& slot, int64_t value) { slots_[slot] = value; }
  // Replays every step; `interpret` runs the kernels through the reference
  // interpreter instead of the JIT.
  void run(bool interpret = false);

  // Per-label time of the replays so far when profiling is on.
  void profile(bool on) { profiling_ = on; }
  const std::map<std::string, std::pair<double, int64_t>>& profile_ms() const { return prof_; }
  int64_t kernel_launches() const;

 private:
  struct Step {
    std::string label;
    const CompiledKernel* kernel = nullptr;  // null for host steps
    std::vector<Arg> args;                   // for the interpreter
    std::unique_ptr<CpuLaunch> cpu;
    struct Dynamic {
      size_t arg;
      const std::optional<int64_t>* value;  // in slots_
      std::string slot;
    };
    std::vector<Dynamic> dynamic;
    Grid grid{};
    std::function<void()> host;
  };
  Runtime& rt_;
  std::vector<Step> steps_;
  // Slot values by name (empty until set); map nodes stay put, so steps
  // keep pointers to them.
  std::map<std::string, std::optional<int64_t>> slots_;
  bool profiling_ = false;
  std::map<std::string, std::pair<double, int64_t>> prof_;  // label -> (ms, calls)
};

}  // namespace kiln
