#include "ir/passes.h"

#include <bit>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "ir/scalar_eval.h"
#include "ir/verifier.h"

namespace kiln {

namespace {

// ---- constant folding ----------------------------------------------------------

bool foldable_elementwise(OpKind k) {
  return is_binary_elementwise(k) || is_comparison(k) || is_unary_elementwise(k) ||
         k == OpKind::Fma || k == OpKind::Select || k == OpKind::Cast || k == OpKind::Bitcast;
}

// Every value is a splat, so shape-only ops of a constant are the same
// constant in the new shape.
bool shape_only(OpKind k) {
  return k == OpKind::Broadcast || k == OpKind::Reshape || k == OpKind::Transpose ||
         k == OpKind::Slice;
}

class Folder {
 public:
  explicit Folder(Kernel* k) : k_(k), const_op_(k->values.size(), nullptr) {}

  void block(Block* b) {
    for (Op& op : b->ops) {
      for (Block& r : op.regions) block(&r);
      fold(&op);
      if (op.kind == OpKind::Const) const_op_[op.result] = &op;
    }
  }

 private:
  // Pointers into the kernel stay valid: folding never inserts or erases ops.
  void fold(Op* op) {
    if (op->result < 0 || op->args.empty()) return;
    for (int a : op->args)
      if (!const_op_[a]) return;
    const Type& rt = k_->values[op->result];
    if (shape_only(op->kind)) {
      const Op* c = const_op_[op->args[0]];
      make_const(op, c->ival, c->fval);
      return;
    }
    if (!foldable_elementwise(op->kind)) return;
    if (op->kind == OpKind::Bitcast &&
        dtype_bits(k_->values[op->args[0]].dtype) != dtype_bits(rt.dtype))
      return;  // a view of a splat is not a splat in general
    ScalarValue in[3];
    for (size_t i = 0; i < op->args.size(); ++i) {
      const Op* c = const_op_[op->args[i]];
      in[i] = const_value(k_->values[c->result].dtype, c->ival, c->fval);
    }
    DType in_dtype = k_->values[op->args.back()].dtype;
    ScalarValue r = eval_elementwise(op->kind, in_dtype, rt.dtype, in);
    if (is_float(rt.dtype))
      make_const(op, 0, r.f);
    else
      make_const(op, r.i, 0);
  }

  static void make_const(Op* op, int64_t ival, double fval) {
    op->kind = OpKind::Const;
    op->args.clear();
    op->ints.clear();
    op->ival = ival;
    op->fval = fval;
  }

  Kernel* k_;
  std::vector<const Op*> const_op_;  // by value id: the Const op defining it
};

// ---- grouped 8-bit dots -------------------------------------------------------------

// Rewrites sum(reshape*(cast(a) * cast(b)) [.., 4], last axis), a u8|i8 and
// b i8 widened to i32, into dot_groups of a and b flattened, reshaped to the
// sum's shape. The products and their order of addition do not matter for
// an exact integer sum, so the result is the same; the widened operands are
// left to dce.
class DotGroupFinder {
 public:
  explicit DotGroupFinder(Kernel* k) : k_(k), def_(k->values.size()) {}

  void block(Block* b) {
    std::vector<Op> out;
    out.reserve(b->ops.size());
    for (Op& op : b->ops) {
      for (Block& r : op.regions) block(&r);
      if (op.result >= 0) def_[op.result] = {op.kind, op.args};
      if (!rewrite(op, &out)) out.push_back(std::move(op));
    }
    b->ops = std::move(out);
  }

 private:
  struct Def {
    OpKind kind = OpKind::Param;
    std::vector<int> args;
  };

  const Type& ty(int id) const { return k_->values[id]; }

  // The source of a cast from `want` to i32, or -1.
  int widened(int id, DType want) const {
    const Def& d = def_[id];
    return d.kind == OpKind::Cast && !d.args.empty() && ty(d.args[0]).dtype == want ? d.args[0]
                                                                                    : -1;
  }

  int emit(std::vector<Op>* out, OpKind kind, std::vector<int> args, const Type& t,
           int result = -1) {
    if (result < 0) {
      result = static_cast<int>(k_->values.size());
      k_->values.push_back(t);
      def_.push_back({kind, args});
    }
    Op op;
    op.kind = kind;
    op.result = result;
    op.args = std::move(args);
    out->push_back(std::move(op));
    return result;
  }

  int flat(std::vector<Op>* out, int id) {
    const Type& t = ty(id);
    if (t.rank() == 1) return id;
    return emit(out, OpKind::Reshape, {id}, Type{t.dtype, {t.numel()}});
  }

  bool rewrite(const Op& op, std::vector<Op>* out) {
    if (op.kind != OpKind::ReduceSum) return false;
    const Type& in = ty(op.args[0]);
    if (in.dtype != DType::i32 || in.rank() < 2 || op.ival != in.rank() - 1 || in.shape.back() != 4)
      return false;
    int src = op.args[0];
    while (def_[src].kind == OpKind::Reshape) src = def_[src].args[0];
    const Def& mul = def_[src];
    if (mul.kind != OpKind::Mul) return false;
    int a = -1, b = -1;
    for (int side = 0; side < 2 && b < 0; ++side) {
      int x = mul.args[side], y = mul.args[1 - side];
      b = widened(y, DType::i8);
      a = widened(x, DType::u8);
      if (a < 0) a = widened(x, DType::i8);
      if (a < 0) b = -1;
    }
    if (a < 0 || b < 0) return false;
    const Type result = ty(op.result);  // a copy: emit() grows the table
    const int64_t groups = result.numel();
    int fa = flat(out, a), fb = flat(out, b);
    if (result.rank() == 1) {
      emit(out, OpKind::DotGroups, {fa, fb}, result, op.result);
    } else {
      int d = emit(out, OpKind::DotGroups, {fa, fb}, Type{DType::i32, {groups}});
      emit(out, OpKind::Reshape, {d}, result, op.result);
    }
    return true;
  }

  Kernel* k_;
  std::vector<Def> def_;  // by value id
};

// ---- common subexpression elimination ----------------------------------------------

bool cse_candidate(const Op& op) {
  return op.result >= 0 && op.regions.empty() && !has_side_effects(op.kind) &&
         op.kind != OpKind::Load && op.kind != OpKind::VarLoad;
}

// fval compares bitwise so -0.0 and 0.0 stay distinct constants and a NaN
// matches only itself.
using CseKey =
    std::tuple<OpKind, std::vector<int>, int64_t, uint64_t, std::vector<int64_t>, DType, Shape>;

class Cse {
 public:
  explicit Cse(Kernel* k) : k_(k), rename_(k->values.size()) {
    for (size_t i = 0; i < rename_.size(); ++i) rename_[i] = static_cast<int>(i);
  }

  // Scopes nest like blocks, so a lookup only finds ops that dominate.
  void block(Block* b) {
    scopes_.emplace_back();
    std::vector<Op> kept;
    kept.reserve(b->ops.size());
    for (Op& op : b->ops) {
      for (int& a : op.args) a = rename_[a];
      if (cse_candidate(op)) {
        const Type& t = k_->values[op.result];
        CseKey key{op.kind, op.args, op.ival, std::bit_cast<uint64_t>(op.fval),
                   op.ints, t.dtype, t.shape};
        if (int prev = lookup(key); prev >= 0) {
          rename_[op.result] = prev;
          continue;
        }
        scopes_.back().emplace(std::move(key), op.result);
      }
      for (Block& r : op.regions) block(&r);
      kept.push_back(std::move(op));
    }
    b->ops = std::move(kept);
    scopes_.pop_back();
  }

 private:
  int lookup(const CseKey& key) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end()) return f->second;
    }
    return -1;
  }

  Kernel* k_;
  std::vector<int> rename_;
  std::vector<std::map<CseKey, int>> scopes_;
};

// ---- dead code elimination -----------------------------------------------------------

// Mark and sweep: an op is live when it writes memory, when a live op uses
// its result, when it stores to or declares a variable that a live op reads,
// or when it is a loop/if holding a live op. Variables that are only read to
// update themselves (a dead accumulator) therefore die with their loops.
class Dce {
 public:
  explicit Dce(Kernel* k) : k_(k) {}

  void run() {
    live_value_.assign(k_->values.size(), false);
    live_var_.assign(k_->vars.size(), false);
    do {
      changed_ = false;
      mark(k_->body);
    } while (changed_);
    sweep(&k_->body);
    compact_vars();
  }

 private:
  static bool is_var_op(OpKind k) {
    return k == OpKind::VarDecl || k == OpKind::VarLoad || k == OpKind::VarStore;
  }

  void set(std::vector<bool>* v, size_t i) {
    if (!(*v)[i]) {
      (*v)[i] = true;
      changed_ = true;
    }
  }

  bool live(const Op& op) const {
    switch (op.kind) {
      case OpKind::Store:
      case OpKind::Prefetch: return true;
      case OpKind::VarDecl:
      case OpKind::VarStore: return live_var_[op.ival];
      default: break;
    }
    if (is_atomic(op.kind)) return true;
    return op.result >= 0 && live_value_[op.result];
  }

  // Backwards, so uses are usually marked before their definitions and one
  // round suffices; loops need more when a value flows around a back edge.
  // Returns whether the block holds a live op.
  bool mark(const Block& b) {
    bool any = false;
    for (auto it = b.ops.rbegin(); it != b.ops.rend(); ++it) {
      const Op& op = *it;
      bool is_live = live(op);
      for (auto r = op.regions.rbegin(); r != op.regions.rend(); ++r) is_live |= mark(*r);
      if (!is_live) continue;
      any = true;
      for (int a : op.args) set(&live_value_, a);
      if (op.kind == OpKind::VarLoad) set(&live_var_, op.ival);
    }
    return any;
  }

  void sweep(Block* b) {
    std::vector<Op> kept;
    kept.reserve(b->ops.size());
    for (Op& op : b->ops) {
      for (Block& r : op.regions) sweep(&r);
      bool keep = live(op);
      for (const Block& r : op.regions) keep |= !r.ops.empty();
      if (keep) kept.push_back(std::move(op));
    }
    b->ops = std::move(kept);
  }

  // Renumbers the surviving variables densely so backends do not allocate
  // storage for dead ones.
  void compact_vars() {
    std::vector<bool> used(k_->vars.size(), false);
    mark_vars(k_->body, &used);
    std::vector<int> remap(k_->vars.size(), -1);
    std::vector<Type> vars;
    for (size_t i = 0; i < used.size(); ++i) {
      if (!used[i]) continue;
      remap[i] = static_cast<int>(vars.size());
      vars.push_back(k_->vars[i]);
    }
    if (vars.size() == k_->vars.size()) return;
    renumber_vars(&k_->body, remap);
    k_->vars = std::move(vars);
  }

  void mark_vars(const Block& b, std::vector<bool>* used) const {
    for (const Op& op : b.ops) {
      if (is_var_op(op.kind)) (*used)[op.ival] = true;
      for (const Block& r : op.regions) mark_vars(r, used);
    }
  }

  void renumber_vars(Block* b, const std::vector<int>& remap) const {
    for (Op& op : b->ops) {
      if (is_var_op(op.kind)) op.ival = remap[op.ival];
      for (Block& r : op.regions) renumber_vars(&r, remap);
    }
  }

  Kernel* k_;
  std::vector<bool> live_value_, live_var_;
  bool changed_ = false;
};

// ---- fixed-point detection --------------------------------------------------------------

bool same_block(const Block& a, const Block& b);

bool same_op(const Op& a, const Op& b) {
  if (a.kind != b.kind || a.result != b.result || a.args != b.args || a.ival != b.ival ||
      std::bit_cast<uint64_t>(a.fval) != std::bit_cast<uint64_t>(b.fval) || a.ints != b.ints ||
      a.regions.size() != b.regions.size())
    return false;
  for (size_t i = 0; i < a.regions.size(); ++i)
    if (!same_block(a.regions[i], b.regions[i])) return false;
  return true;
}

bool same_block(const Block& a, const Block& b) {
  if (a.ops.size() != b.ops.size()) return false;
  for (size_t i = 0; i < a.ops.size(); ++i)
    if (!same_op(a.ops[i], b.ops[i])) return false;
  return true;
}

bool same_kernel(const Kernel& a, const Kernel& b) {
  return a.vars == b.vars && a.values == b.values && same_block(a.body, b.body);
}

}  // namespace

Kernel fold_constants(const Kernel& k) {
  Kernel out = k;
  Folder(&out).block(&out.body);
  verify(out);
  return out;
}

Kernel cse(const Kernel& k) {
  Kernel out = k;
  Cse(&out).block(&out.body);
  verify(out);
  return out;
}

Kernel dce(const Kernel& k) {
  Kernel out = k;
  Dce(&out).run();
  verify(out);
  return out;
}

Kernel recognize_dot_groups(const Kernel& k) {
  Kernel out = k;
  DotGroupFinder(&out).block(&out.body);
  verify(out);
  return out;
}

Kernel run_pipeline(const Kernel& k, std::vector<PassDump>* dumps) {
  verify(k);
  constexpr int kMaxRounds = 4;
  Kernel cur = recognize_dot_groups(k);
  if (dumps) dumps->push_back({"recognize_dot_groups", cur});
  for (int round = 0; round < kMaxRounds; ++round) {
    Kernel next = fold_constants(cur);
    if (round == 0 && dumps) dumps->push_back({"fold_constants", next});
    next = cse(next);
    if (round == 0 && dumps) dumps->push_back({"cse", next});
    next = dce(next);
    if (round == 0 && dumps) dumps->push_back({"dce", next});
    bool stable = same_kernel(next, cur);
    cur = std::move(next);
    if (stable) break;
  }
  return cur;
}

}  // namespace kiln
