// Which integer values of a kernel are affine in their element coordinates:
// v[i_0, .., i_n] = base + sum_d stride_d * i_d, with the base and strides
// i64 expressions over constants and the kernel's scalar values (program
// ids, parameters, loop variables).
//
// Offsets built from arange, broadcasts, reshapes and scalar arithmetic
// have this form, and a backend that knows it can load and store a tile's
// rows as contiguous vectors (unit last stride) instead of gathering
// element by element. The analysis is target-neutral: expressions are nodes
// a backend materialises in its own instructions (the CPU lowering as LLVM
// values where each value is defined, so they dominate their uses). Scalar
// constants are constants and two constants fold; nothing else is
// simplified, so a stride is a known constant exactly when it is built from
// constants (run fold_constants first to fold constant scalar arithmetic).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/kernel.h"

namespace kiln {

class AffineForms {
 public:
  using Sym = int;  // an expression node
  struct Node {
    enum class Kind { constant, value, add, sub, mul } kind = Kind::constant;
    int64_t c = 0;   // constant
    int value = -1;  // value: a scalar integer value, sign- or zero-extended by its dtype
    Sym a = -1, b = -1;
  };
  struct Form {
    bool valid = false;
    Sym base = -1;
    std::vector<Sym> strides;  // one per axis of the value
  };

  explicit AffineForms(const Kernel& k);

  const Form& of(int value) const { return forms_.at(static_cast<size_t>(value)); }
  const Node& node(Sym s) const { return nodes_.at(static_cast<size_t>(s)); }
  size_t size() const { return nodes_.size(); }
  std::optional<int64_t> constant(Sym s) const;

 private:
  void block(const Block& b);
  void visit(const Op& op);
  Sym make(Node n);
  Sym constant_sym(int64_t c) { return make({Node::Kind::constant, c, -1, -1, -1}); }
  Sym binary(Node::Kind kind, Sym a, Sym b);

  const Kernel& k_;
  std::vector<Node> nodes_;
  std::vector<Form> forms_;  // by value id
};

}  // namespace kiln
