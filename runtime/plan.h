// A recorded sequence of kernel launches and copies on one backend,
// replayed for every call of the same shape.
//
// A model forward for a given number of tokens launches the same kernels
// with the same grids on the same buffers every time; only a few scalars
// change (the position of the first token, the KV length, the tokens each
// MoE expert was routed). Choosing specs, compiling, binding arguments by
// parameter name and checking buffer sizes happen once, when the plan is
// recorded; replaying is a walk over ready launches whose changing scalars
// are patched from named slots. Slots are set by the caller before a
// replay or, for sizes only the data decides, read back from a device
// buffer by a step of the plan. Host data enters and leaves through upload
// and download steps, so every step runs on every backend, and a plan on a
// host-memory backend can also be replayed through the reference
// interpreter, which makes a whole forward checkable against it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/runtime.h"

namespace kiln {

class Plan {
 public:
  // A scalar argument whose value is the slot's times `scale`, set per
  // replay (see set() and read_slots()). `bound` is the largest slot value
  // a replay may set: the size checks made when recording use it. With
  // `grid`, the launch's grid follows the value: the launch is re-shaped at
  // replay, and skipped while the value is 0.
  struct Dynamic {
    std::string slot;
    int64_t bound = 0;
    bool grid = false;
    int64_t scale = 1;
  };
  using PlanArg = std::variant<Arg, Dynamic>;
  // Arguments by the kernel's parameter names.
  using Args = std::map<std::string, PlanArg>;

  explicit Plan(Runtime& rt) : rt_(rt) {}

  // Records a launch of `kernel`, selected and compiled now. Every
  // parameter must be named once in `args` (errors name the kernel and the
  // parameter). Dynamic scalars are checked at their bounds.
  void launch(const std::string& label, const std::string& kernel,
              const std::map<std::string, DType>& dtypes, const Args& args, const Sizes& sizes = {},
              const std::map<std::string, int64_t>& fixed = {});
  // Copies host memory into a backend buffer, or back, at this point.
  void upload(const std::string& label, void* dst, const void* src, size_t bytes);
  void download(const std::string& label, void* dst, const void* src, size_t bytes);
  // Reads `slots.size()` int32 values from backend buffer `src` into the
  // named slots, for the launches after it.
  void read_slots(const std::string& label, const void* src, std::vector<std::string> slots);

  void set(const std::string& slot, int64_t value) { slots_[slot] = value; }
  // Replays every step on `rt`, which must be the runtime the plan was
  // recorded on; `interpret` runs the kernels through the reference
  // interpreter instead (host-memory backends only).
  void run(Runtime& rt, bool interpret = false);

  // Per-label time of the replays so far when profiling is on.
  void profile(bool on) { profiling_ = on; }
  const std::map<std::string, std::pair<double, int64_t>>& profile_ms() const { return prof_; }
  int64_t kernel_launches() const;

 private:
  struct Step {
    std::string label;
    const CompiledKernel* kernel = nullptr;  // null for copies
    const KernelDef* def = nullptr;          // re-shapes the launch
    std::vector<Arg> args;                   // for the interpreter and re-shaping
    Sizes sizes;
    std::unique_ptr<BoundLaunch> bound;
    struct Dynamic {
      size_t arg;
      const std::optional<int64_t>* value;  // in slots_
      std::string slot;
      bool grid;
      int64_t scale;
    };
    std::vector<Dynamic> dynamic;
    bool reshape = false;  // some dynamic scalar sets the grid
    Grid grid{};
    // Copies: upload (dst is the backend's), download, or slot read-back.
    enum class Copy { none, upload, download, slots } copy = Copy::none;
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
    std::vector<std::optional<int64_t>*> read_into;
  };
  void add_copy(const std::string& label, Step::Copy kind, void* dst, const void* src,
                size_t bytes);
  void run_copy(Step& st);

  Runtime& rt_;
  std::vector<Step> steps_;
  // Slot values by name (empty until set); map nodes stay put, so steps
  // keep pointers to them.
  std::map<std::string, std::optional<int64_t>> slots_;
  std::vector<int32_t> read_buffer_;
  bool profiling_ = false;
  std::map<std::string, std::pair<double, int64_t>> prof_;  // label -> (ms, calls)
};

}  // namespace kiln
