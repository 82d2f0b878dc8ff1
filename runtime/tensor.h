// A view of a contiguous row-major host tensor: what op calls take.
//
// The runtime's ops (runtime/ops.h) read dtypes and shapes from tensors,
// check that they fit together, and turn them into kernel launches; the
// tensor never owns its memory.
#pragma once

#include <cstdint>
#include <string>

#include "ir/interpreter.h"
#include "ir/type.h"

namespace kiln {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;

  int64_t numel() const { return Type{dtype, shape}.numel(); }
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i < 0 ? i + rank() : i)); }
  Arg arg() const { return Arg::buffer(data, numel()); }
  std::string str() const { return type_str(Type{dtype, shape}); }  // "f16[4096,14336]"
};

}  // namespace kiln
