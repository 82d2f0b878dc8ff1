#include "runtime/ops.h"

#include "ir/error.h"

namespace kiln::ops {

namespace {

[[noreturn]] void mismatch(const std::string& op, const std::string& why) {
  throw Error("op " + op + ": " + why);
}

void same_dtype(const std::string& op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype != (*ts.begin())->dtype)
      mismatch(op, "dtypes differ (" + (*ts.begin())->str() + " vs " + t->str() + ")");
}

// Rows and row length of a tensor normalised over its last axis.
std::pair<int64_t, int64_t> rows_of(const std::string& op, const Tensor& t) {
  if (t.rank() < 1) mismatch(op, "needs a tensor of rank >= 1, got " + t.str());
  int64_t n = t.dim(-1);
  return {n ? t.numel() / n : 0, n};
}

}  // namespace

void add(Runtime& rt, const Tensor& x, const Tensor& y, const Tensor& z) {
  same_dtype("add", {&x, &y, &z});
  if (x.numel() != y.numel() || x.numel() != z.numel())
    mismatch("add", "element counts differ: " + x.str() + " + " + y.str() + " -> " + z.str());
  rt.call("add", {{"T", x.dtype}}, {x.arg(), y.arg(), z.arg(), Arg::scalar_int(x.numel())});
}

void gemv(Runtime& rt, const Tensor& w, const Tensor& x, const Tensor& y) {
  if (w.rank() != 2) mismatch("gemv", "W must be [m, k], got " + w.str());
  same_dtype("gemv", {&x, &y});
  int64_t m = w.dim(0), k = w.dim(1);
  if (x.numel() != k) mismatch("gemv", "W is " + w.str() + " but x is " + x.str());
  if (y.numel() != m) mismatch("gemv", "W is " + w.str() + " but y is " + y.str());
  rt.call("gemv", {{"W", w.dtype}, {"X", x.dtype}},
          {w.arg(), x.arg(), y.arg(), Arg::scalar_int(m), Arg::scalar_int(k)});
}

void rmsnorm(Runtime& rt, const Tensor& x, const Tensor& w, const Tensor& y, double eps) {
  same_dtype("rmsnorm", {&x, &w, &y});
  auto [rows, n] = rows_of("rmsnorm", x);
  if (w.numel() != n) mismatch("rmsnorm", "x is " + x.str() + " but the weight is " + w.str());
  if (y.shape != x.shape) mismatch("rmsnorm", "x is " + x.str() + " but y is " + y.str());
  rt.call("rmsnorm", {{"T", x.dtype}},
          {x.arg(), w.arg(), y.arg(), Arg::scalar_int(n), Arg::scalar_float(eps)},
          {{"rows", rows}});
}

void softmax(Runtime& rt, const Tensor& x, const Tensor& y) {
  same_dtype("softmax", {&x, &y});
  auto [rows, n] = rows_of("softmax", x);
  if (y.shape != x.shape) mismatch("softmax", "x is " + x.str() + " but y is " + y.str());
  rt.call("softmax", {{"T", x.dtype}}, {x.arg(), y.arg(), Arg::scalar_int(n)}, {{"rows", rows}});
}

void silu_mul(Runtime& rt, const Tensor& gate, const Tensor& up, const Tensor& out) {
  same_dtype("silu_mul", {&gate, &up, &out});
  if (gate.numel() != up.numel() || gate.numel() != out.numel())
    mismatch("silu_mul",
             "element counts differ: " + gate.str() + ", " + up.str() + ", " + out.str());
  rt.call("silu_mul", {{"T", gate.dtype}},
          {gate.arg(), up.arg(), out.arg(), Arg::scalar_int(gate.numel())});
}

}  // namespace kiln::ops
