// The type of an IR value: an element dtype and a static shape.
//
// Rank 0 is a scalar; rank 1 and 2 are tiles (rank 3 is accepted by the
// shape helpers but no library kernel uses it). Shapes are static so every
// backend can map a tile to a fixed-size register vector.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using Shape = std::vector<int64_t>;

struct Type {
  DType dtype = DType::f32;
  Shape shape;  // empty: scalar

  int rank() const { return static_cast<int>(shape.size()); }
  bool is_scalar() const { return shape.empty(); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  bool operator==(const Type& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const Type& o) const { return !(*this == o); }
};

// "f32[4,128]", "i32" for scalars.
std::string type_str(const Type& t);
std::string shape_str(const Shape& s);

// Element strides of a row-major tile of shape s (the last axis is 1).
std::vector<int64_t> row_major_strides(const Shape& s);

// numpy broadcasting: align on the right, size-1 (or missing) dims stretch.
// Returns false when the shapes are incompatible.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

}  // namespace kiln
