// A computation as a sequence of kernel launches over typed tensors,
// whose scratch memory is planned by liveness before anything runs.
//
// Model forwards are built from op constructors (runtime/ops.h) that take
// and return Tensors: a dtype, a shape and a place in one of the graph's
// buffers. A buffer is either memory the graph does not own (weights, the
// KV cache, host input and output) or scratch, which the graph lays out
// when it is recorded into a Plan: two scratch buffers share bytes when no
// launch between the first and the last that touches one also touches the
// other, so a forward needs one arena of the size of its widest point, not
// one allocation per intermediate. Tensors are immutable except through
// overwrite(), which hands a buffer to an in-place kernel (RoPE, a cache
// append, an accumulating scatter) and makes the older tensor stale: using a
// stale tensor is an error naming the step, not a silent read of new data.
// Launches bind kernel parameters by name, as Plan does, and run in the
// order they were added.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "runtime/plan.h"

namespace kiln {

struct Tensor {
  int buf = -1;
  int version = 0;     // which contents of the buffer it names
  int64_t offset = 0;  // elements into the buffer
  DType dtype = DType::f32;
  Shape shape;

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const;
  std::string str() const;  // "f32[7,2048]"
  // Rows [first, first + count) along the first axis: a view, not a copy.
  Tensor rows(int64_t first, int64_t count) const;
  // The same elements under another shape of equal size.
  Tensor reshape(Shape s) const;
};

class Graph {
 public:
  // A kernel argument: a value (a buffer parameter), a fixed scalar or a
  // plan slot (set per replay).
  using Operand = std::variant<Tensor, Arg, Plan::Dynamic>;
  using Operands = std::map<std::string, Operand>;

  explicit Graph(Runtime& rt) : rt_(rt) {}
  Runtime& runtime() { return rt_; }

  // Memory the graph reads or writes but does not own.
  Tensor external(const void* data, DType dtype, Shape shape);
  // Host memory read at this point of every run: in place on host-memory
  // backends, else uploaded into scratch.
  Tensor input(const std::string& label, const void* host, DType dtype, Shape shape);
  // Host memory `v` is written to at this point of every run. On host-memory
  // backends a whole scratch buffer is placed there instead of copied.
  void output(const std::string& label, const Tensor& v, void* host);
  // A new value whose memory the graph plans.
  Tensor scratch(DType dtype, Shape shape);
  // v's memory, about to be rewritten in place by the next launch; v and
  // every other value of its buffer become stale.
  Tensor overwrite(const Tensor& v);

  // Labels of the steps added while a Scope lives are prefixed with its
  // name ("attn.rope"), so a profile tells the parts of a forward apart.
  class Scope {
   public:
    Scope(Graph& g, const std::string& name) : g_(g), saved_(g.prefix_) { g.prefix_ += name + "."; }
    ~Scope() { g_.prefix_ = saved_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Graph& g_;
    std::string saved_;
  };

  void launch(const std::string& label, const std::string& kernel,
              const std::map<std::string, DType>& dtypes, const Operands& args,
              const Sizes& sizes = {}, const std::map<std::string, int64_t>& fixed = {});

  // The values `make` returns for `key`, computed once: ops use it to share
  // work between consumers of the same input (key() names a value's
  // current contents, so an overwritten input misses).
  std::vector<Tensor> memo(const std::string& key,
                           const std::function<std::vector<Tensor>()>& make);
  static std::string key(const Tensor& v);

  // Lays out scratch, allocates it on the runtime's backend, records every
  // step into `plan` and, with `compile`, compiles its kernels
  // (Plan::compile; else its first run does). The graph owns the scratch:
  // keep it alive while the plan runs. Once only.
  void record(Plan& plan, bool compile = true);
  size_t scratch_bytes() const { return arena_.bytes(); }
  // What the scratch would take with one allocation per buffer.
  size_t unplanned_bytes() const;

 private:
  struct Buffer {
    size_t bytes = 0;
    void* external = nullptr;  // null: scratch
    int version = 0;
    size_t offset = 0;  // in the arena, once planned
    int first = -1, last = -1;
  };
  struct Node {
    std::string label, kernel;
    std::map<std::string, DType> dtypes;
    Operands args;
    Sizes sizes;
    std::map<std::string, int64_t> fixed;
    enum class Copy { none, upload, download } copy = Copy::none;
    Tensor value;  // what a copy moves
    void* host = nullptr;
  };
  int new_buffer(size_t bytes, void* external);
  void use(const Tensor& v, size_t node, const std::string& who);
  void plan_scratch();
  void* address(const Tensor& v) const;

  Runtime& rt_;
  std::vector<Buffer> buffers_;
  std::vector<Node> nodes_;
  std::map<std::string, std::vector<Tensor>> memo_;
  std::string prefix_;  // of the live Scopes
  DeviceBuffer arena_;
  bool recorded_ = false;
};

}  // namespace kiln
