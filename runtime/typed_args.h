// Launch arguments checked by the compiler: each library kernel's parameters
// as typed names (kernel_params.h, generated from the registry at build
// time by tools/gen/kernel_params.cpp), so an op that names a parameter its
// kernel lacks, passes a scalar for a buffer, or a parameter of another
// kernel, does not compile. The launch still binds by name (the one calling
// convention everywhere); this only makes the names and kinds static.
//
//   using K = kernels::softmax;
//   launch<K>(g, "softmax", {{"T", x.dtype}}, {{K::x, x}, {K::y, y}, {K::n, n}}, {{"rows", rows}});
#pragma once

#include <cstdint>
#include <initializer_list>

#include "runtime/graph.h"

namespace kiln {

// A parameter of kernel K: a buffer, an integer scalar or a float scalar.
template <class K>
struct BufferParam {
  const char* name;
};
template <class K>
struct IntParam {
  const char* name;
};
template <class K>
struct FloatParam {
  const char* name;
};

// One argument of a launch of K.
template <class K>
class Bind {
 public:
  Bind(BufferParam<K> p, const Tensor& t) : name_(p.name), v_(t) {}
  Bind(IntParam<K> p, int64_t v) : name_(p.name), v_(Arg::scalar_int(v)) {}
  Bind(IntParam<K> p, const Plan::Dynamic& d) : name_(p.name), v_(d) {}
  Bind(FloatParam<K> p, double v) : name_(p.name), v_(Arg::scalar_float(v)) {}

  void add_to(Graph::Operands& args) const { args[name_] = v_; }

 private:
  const char* name_;
  Graph::Operand v_;
};

template <class K>
Graph::Operands operands(std::initializer_list<Bind<K>> args) {
  Graph::Operands out;
  for (const Bind<K>& b : args) b.add_to(out);
  return out;
}

// Adds one more argument to operands built for K (a parameter only some
// variants have).
template <class K>
void bind(Graph::Operands& args, const Bind<K>& b) {
  b.add_to(args);
}

// A launch of K (Graph::launch by K's name).
template <class K>
void launch(Graph& g, const std::string& label, const std::map<std::string, DType>& dtypes,
            std::initializer_list<Bind<K>> args, const Sizes& sizes = {},
            const std::map<std::string, int64_t>& fixed = {}) {
  g.launch(label, K::name, dtypes, operands<K>(args), sizes, fixed);
}

}  // namespace kiln
