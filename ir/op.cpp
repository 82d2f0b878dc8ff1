#include "ir/op.h"

namespace kiln {

namespace {
constexpr std::string_view kNames[] = {
    "const",      "arange",     "program_id",  "num_programs", "param",      "broadcast",
    "reshape",    "transpose",  "slice",       "add",          "sub",        "mul",
    "div",        "rem",        "min",         "max",          "and",        "or",
    "xor",        "shl",        "shr",         "eq",           "ne",         "lt",
    "le",         "gt",         "ge",          "neg",          "abs",        "not",
    "floor",      "exp",        "exp2",        "log",          "log2",       "sqrt",
    "rsqrt",      "tanh",       "sigmoid",     "erf",          "fma",        "select",
    "cast",       "bitcast",    "lookup",      "load",         "store",      "atomic_add",
    "atomic_max", "atomic_min", "atomic_xchg", "prefetch",     "reduce_sum", "reduce_max",
    "reduce_min", "argmax",     "dot",         "dot_groups",   "for",        "if",
    "var",        "var_load",   "var_store",
};
constexpr int kNumOps = static_cast<int>(OpKind::VarStore) + 1;
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumOps, "op name table out of sync");

bool in(OpKind k, OpKind lo, OpKind hi) { return k >= lo && k <= hi; }
}  // namespace

std::string_view op_name(OpKind k) { return kNames[static_cast<int>(k)]; }

bool try_parse_op_name(std::string_view name, OpKind* out) {
  for (int i = 0; i < kNumOps; ++i) {
    if (kNames[i] == name) {
      *out = static_cast<OpKind>(i);
      return true;
    }
  }
  return false;
}

bool is_binary_elementwise(OpKind k) { return in(k, OpKind::Add, OpKind::Shr); }
bool is_comparison(OpKind k) { return in(k, OpKind::Eq, OpKind::Ge); }
bool is_unary_elementwise(OpKind k) { return in(k, OpKind::Neg, OpKind::Erf); }
bool is_float_only_unary(OpKind k) { return in(k, OpKind::Exp, OpKind::Erf); }
bool is_reduction(OpKind k) { return in(k, OpKind::ReduceSum, OpKind::ArgMax); }
bool is_atomic(OpKind k) { return in(k, OpKind::AtomicAdd, OpKind::AtomicXchg); }
bool has_side_effects(OpKind k) {
  return k == OpKind::Store || is_atomic(k) || k == OpKind::Prefetch || k == OpKind::VarDecl ||
         k == OpKind::VarStore || k == OpKind::For || k == OpKind::If;
}

int dot_group_size(DType a, DType b) {
  if ((a == DType::u8 || a == DType::i8) && b == DType::i8) return 4;
  return a == DType::i16 && b == DType::i16 ? 2 : 0;
}

}  // namespace kiln
