#include "ir/affine.h"

#include "ir/scalar_eval.h"

namespace kiln {

AffineForms::AffineForms(const Kernel& k) : k_(k), forms_(k.values.size()) { block(k.body); }

std::optional<int64_t> AffineForms::constant(Sym s) const {
  const Node& n = node(s);
  if (n.kind != Node::Kind::constant) return std::nullopt;
  return n.c;
}

AffineForms::Sym AffineForms::make(Node n) {
  nodes_.push_back(n);
  return static_cast<Sym>(nodes_.size()) - 1;
}

// i64 arithmetic wraps, as the instructions a backend emits for it do.
AffineForms::Sym AffineForms::binary(Node::Kind kind, Sym a, Sym b) {
  auto ca = constant(a), cb = constant(b);
  if (ca && cb) {
    auto x = static_cast<uint64_t>(*ca), y = static_cast<uint64_t>(*cb);
    uint64_t r = kind == Node::Kind::add ? x + y : kind == Node::Kind::sub ? x - y : x * y;
    return constant_sym(static_cast<int64_t>(r));
  }
  return make({kind, 0, -1, a, b});
}

void AffineForms::block(const Block& b) {
  for (const Op& op : b.ops) {
    if (op.result >= 0 && (op.kind == OpKind::For || is_int(k_.values[op.result].dtype))) visit(op);
    for (const Block& r : op.regions) block(r);
  }
}

void AffineForms::visit(const Op& op) {
  const Type& t = k_.values[op.result];
  Form& out = forms_[op.result];
  auto zeros = [&](size_t n) {
    std::vector<Sym> z;
    for (size_t i = 0; i < n; ++i) z.push_back(constant_sym(0));
    return z;
  };
  if (t.is_scalar()) {
    // A constant scalar folds (as the instructions a backend emits for it
    // would); constant arithmetic on scalars is fold_constants' job.
    Sym s = op.kind == OpKind::Const ? constant_sym(normalize_int(op.ival, t.dtype))
                                     : make({Node::Kind::value, 0, op.result, -1, -1});
    out = {true, s, {}};
    return;
  }
  auto arg = [&](int i) -> const Form& { return forms_[op.args[i]]; };
  switch (op.kind) {
    case OpKind::Const: out = {true, constant_sym(op.ival), zeros(t.shape.size())}; return;
    case OpKind::Arange: out = {true, constant_sym(0), {constant_sym(1)}}; return;
    case OpKind::Cast: {
      DType from = k_.values[op.args[0]].dtype;
      if (is_int(from) && dtype_bits(from) <= dtype_bits(t.dtype)) out = arg(0);
      return;
    }
    case OpKind::Broadcast: {
      const Form& s = arg(0);
      if (!s.valid) return;
      const Shape& from = k_.values[op.args[0]].shape;
      size_t off = t.shape.size() - from.size();
      Form f{true, s.base, zeros(t.shape.size())};
      for (size_t j = 0; j < from.size(); ++j)
        if (from[j] == t.shape[j + off]) f.strides[j + off] = s.strides[j];
      out = f;
      return;
    }
    case OpKind::Reshape: {
      // Only size-1 axes may come or go; anything else is not a relabelling.
      const Form& s = arg(0);
      if (!s.valid) return;
      const Shape& from = k_.values[op.args[0]].shape;
      Shape f1, t1;
      std::vector<Sym> kept;
      for (size_t j = 0; j < from.size(); ++j)
        if (from[j] != 1) {
          kept.push_back(s.strides[j]);
          f1.push_back(from[j]);
        }
      for (int64_t d : t.shape)
        if (d != 1) t1.push_back(d);
      if (f1 != t1) return;
      Form f{true, s.base, {}};
      size_t next = 0;
      for (int64_t d : t.shape) f.strides.push_back(d == 1 ? constant_sym(0) : kept[next++]);
      out = f;
      return;
    }
    case OpKind::Add:
    case OpKind::Sub: {
      const Form &x = arg(0), &y = arg(1);
      if (!x.valid || !y.valid) return;
      auto kind = op.kind == OpKind::Add ? Node::Kind::add : Node::Kind::sub;
      Form f{true, binary(kind, x.base, y.base), {}};
      for (size_t j = 0; j < x.strides.size(); ++j)
        f.strides.push_back(binary(kind, x.strides[j], y.strides[j]));
      out = f;
      return;
    }
    case OpKind::Mul:
    case OpKind::Shl: {
      const Form &x = arg(0), &y = arg(1);
      if (!x.valid || !y.valid) return;
      auto uniform = [&](const Form& a) {
        for (Sym s : a.strides)
          if (constant(s) != 0) return false;
        return true;
      };
      const Form* var = &x;
      Sym scale = -1;
      if (op.kind == OpKind::Shl) {
        auto c = constant(y.base);
        if (!uniform(y) || !c) return;
        scale = constant_sym(int64_t{1} << (*c & (dtype_bits(t.dtype) - 1)));
      } else if (uniform(y)) {
        scale = y.base;
      } else if (uniform(x)) {
        var = &y;
        scale = x.base;
      } else {
        return;
      }
      Form f{true, binary(Node::Kind::mul, var->base, scale), {}};
      for (Sym s : var->strides) f.strides.push_back(binary(Node::Kind::mul, s, scale));
      out = f;
      return;
    }
    default: return;
  }
}

}  // namespace kiln
