#include "ir/type.h"

#include <algorithm>

namespace kiln {

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::string type_str(const Type& t) {
  std::string r(dtype_name(t.dtype));
  if (!t.is_scalar()) r += shape_str(t.shape);
  return r;
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    r[i] = da == 1 ? db : da;
  }
  *out = r;
  return true;
}

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t n = 1;
  for (size_t d = s.size(); d-- > 0;) {
    st[d] = n;
    n *= s[d];
  }
  return st;
}

}  // namespace kiln
