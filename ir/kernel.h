// A kernel: parameters, the types of its values and variables, and a body.
//
// This is the unit every layer exchanges: the DSL produces it, passes
// rewrite it, the printer/parser and the structural hash read it, the
// interpreter and the code generators execute or lower it. Constexprs are
// already baked into the body as constants; they are kept in `constexprs`
// so the text form and the cache key show what the kernel was built with.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/op.h"

namespace kiln {

enum class ParamKind : uint8_t { Buffer, Scalar };

struct Param {
  std::string name;
  ParamKind kind = ParamKind::Buffer;
  DType dtype = DType::f32;  // buffer element type, or the scalar's type
};

struct Kernel {
  std::string name;
  std::vector<Param> params;
  std::vector<std::pair<std::string, int64_t>> constexprs;  // sorted by name
  std::vector<Type> values;                                 // indexed by value id
  std::vector<Type> vars;                                   // indexed by variable id
  Block body;

  int add_value(const Type& t) {
    values.push_back(t);
    return static_cast<int>(values.size()) - 1;
  }
  const Type& type_of(int value) const { return values.at(value); }
  int num_buffers() const;
  int num_scalars() const;
};

// Position of buffer/scalar parameter `param_index` among the parameters of
// the same kind (how launches and compiled code address them).
int buffer_slot(const Kernel& k, int param_index);
int scalar_slot(const Kernel& k, int param_index);

}  // namespace kiln
