#include "kernels/attention/lane_fold.h"

#include "ir/error.h"

namespace kiln {

Value fold_last_axis(Value x, Fold op) {
  const Shape shape = x.shape();
  if (shape.empty() || shape.size() > 2 || shape.back() < 1 || (shape.back() & (shape.back() - 1)))
    throw Error("fold_last_axis: needs a rank 1 or 2 tile whose last axis is a power of two");
  const bool rank1 = shape.size() == 1;
  const int64_t rows = rank1 ? 1 : shape[0];
  int64_t w = shape.back();
  if (rank1) x = reshape(x, {1, w});
  for (; w > 1; w /= 2) {
    Value lo = slice(x, {0, 0}, {rows, w / 2}), hi = slice(x, {0, w / 2}, {rows, w / 2});
    x = op == Fold::Sum ? lo + hi : maximum(lo, hi);
  }
  return rank1 ? reshape(x, {}) : reshape(x, {rows});
}

}  // namespace kiln
