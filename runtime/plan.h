// A recorded sequence of kernel launches and copies on one backend,
// replayed for every call of the same shape.
//
// A model forward for a given number of tokens launches the same kernels
// with the same grids on the same buffers every time; only a few scalars
// change (the position of the first token, the KV length). Choosing specs,
// compiling, binding arguments by parameter name and checking buffer sizes
// happen once, when the plan is recorded; replaying is a walk over ready
// launches whose changing scalars are patched from named slots, set by the
// caller before a replay. Host data enters and leaves through upload and
// download steps, so every step runs on every backend, and a plan on a
// host-memory backend can also be replayed through the reference
// interpreter, which makes a whole forward checkable against it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace kiln {

class Plan {
 public:
  // A scalar argument whose value is the slot's, set per replay (see
  // set()). `bound` is the largest value a replay may set: the size checks
  // made when recording use it.
  struct Dynamic {
    std::string slot;
    int64_t bound = 0;
  };
  using PlanArg = std::variant<Arg, Dynamic>;
  // Arguments by the kernel's parameter names.
  using Args = std::map<std::string, PlanArg>;

  explicit Plan(Runtime& rt) : rt_(rt) {}

  // Records a launch of `kernel`, its spec selected and its arguments
  // checked now. Every parameter must be named once in `args` (errors name
  // the kernel and the parameter). Dynamic scalars are checked at their
  // bounds.
  void launch(const std::string& label, const std::string& kernel,
              const std::map<std::string, DType>& dtypes, const Args& args, const Sizes& sizes = {},
              const std::map<std::string, int64_t>& fixed = {});
  // Compiles the launches recorded since the last call, all at once
  // (Runtime::compile_all: in parallel where the backend allows), and
  // binds them. run() calls it first; recording code calls it so that
  // compiling is over before a replay is timed.
  void compile();
  // Copies host memory into a backend buffer, or back, at this point.
  void upload(const std::string& label, void* dst, const void* src, size_t bytes);
  void download(const std::string& label, void* dst, const void* src, size_t bytes);

  void set(const std::string& slot, int64_t value) { slots_[slot] = value; }
  // Replays every step on `rt`, which must be the runtime the plan was
  // recorded on; `interpret` runs the kernels through the reference
  // interpreter instead (host-memory backends only).
  void run(Runtime& rt, bool interpret = false);

  // With a trace, every replayed step adds a span (category "kernel" or
  // "copy"; a launch's kernel, label, spec, grid and bytes as arguments),
  // timed to its completion on the device. Null: none.
  void trace(Trace* t) { trace_ = t; }
  int64_t kernel_launches() const;
  // The spec of every launch, in order (repeats included).
  std::vector<Spec> specs() const;

 private:
  struct Step {
    std::string label;
    Spec spec;                               // launches: selected when recorded
    const CompiledKernel* kernel = nullptr;  // and compiled by compile()
    std::vector<Arg> args;                   // for the interpreter
    std::unique_ptr<BoundLaunch> bound;
    int64_t launch_bytes = 0;  // Runtime::CheckedLaunch::bytes
    int64_t buffer_bytes = 0;  // and ::buffer_bytes
    struct Dynamic {
      size_t arg;
      const std::optional<int64_t>* value;  // in slots_
      std::string slot;
    };
    std::vector<Dynamic> dynamic;
    Grid grid{};
    // Copies: upload (dst is the backend's) or download.
    enum class Copy { none, upload, download } copy = Copy::none;
    bool is_launch() const { return copy == Copy::none; }
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
  };
  void add_copy(const std::string& label, Step::Copy kind, void* dst, const void* src,
                size_t bytes);
  void run_copy(Step& st);

  Runtime& rt_;
  std::vector<Step> steps_;
  // Slot values by name (empty until set); map nodes stay put, so steps
  // keep pointers to them.
  std::map<std::string, std::optional<int64_t>> slots_;
  bool ready_ = true;  // every launch compiled and bound
  Trace* trace_ = nullptr;
};

}  // namespace kiln
