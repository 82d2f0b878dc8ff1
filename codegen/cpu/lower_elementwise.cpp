// Elementwise arithmetic, comparisons, casts, bitcasts and broadcasts of
// tiles as LLVM vector instructions.
#include "codegen/cpu/lowering.h"
#include "codegen/cpu/vector_math.h"

namespace kiln::cpu_lowering {

// A left or logical right shift of bytes by one constant, as the same
// shift of 16-bit words with the bits that crossed from the neighbouring
// byte masked off (CpuProfile::byte_shifts_as_words). nullptr otherwise.
llvm::Value* Lowering::byte_shift_as_words(OpKind kind, bool is_signed, llvm::Value* a,
                                           llvm::Value* amt) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(a->getType());
  auto* c = llvm::dyn_cast<llvm::Constant>(amt);
  if (!profile_.byte_shifts_as_words || !vt || !c || (kind == OpKind::Shr && is_signed) ||
      !vt->getElementType()->isIntegerTy(8) || vt->getNumElements() % 2)
    return nullptr;
  auto* k = llvm::dyn_cast_or_null<llvm::ConstantInt>(c->getSplatValue());
  if (!k) return nullptr;
  unsigned n = static_cast<unsigned>(k->getZExtValue());
  auto* words = llvm::FixedVectorType::get(b_.getInt16Ty(), vt->getNumElements() / 2);
  llvm::Value* w = b_.CreateBitCast(a, words);
  w = kind == OpKind::Shl ? b_.CreateShl(w, n) : b_.CreateLShr(w, n);
  unsigned keep = (kind == OpKind::Shl ? 0xFFu << n : 0xFFu >> n) & 0xFFu;
  return b_.CreateAnd(b_.CreateBitCast(w, vt), llvm::ConstantInt::get(vt, keep));
}

llvm::Value* Lowering::binary(const Op& op, DType t, llvm::Value* a, llvm::Value* b) {
  if (is_float(t)) {
    llvm::Value* r;
    switch (op.kind) {
      case OpKind::Add: r = b_.CreateFAdd(a, b); break;
      case OpKind::Sub: r = b_.CreateFSub(a, b); break;
      case OpKind::Mul: r = b_.CreateFMul(a, b); break;
      case OpKind::Div: r = b_.CreateFDiv(a, b); break;
      case OpKind::Rem: r = b_.CreateFRem(a, b); break;
      case OpKind::Min:
        r = b_.CreateIntrinsic(llvm::Intrinsic::minnum, {a->getType()}, {a, b});
        break;
      case OpKind::Max:
        r = b_.CreateIntrinsic(llvm::Intrinsic::maxnum, {a->getType()}, {a, b});
        break;
      default: unsupported(op, "float operands");
    }
    return round_to(r, t);
  }
  bool s = is_signed_int(t);
  llvm::Type* ty = a->getType();
  auto zero = llvm::Constant::getNullValue(ty);
  switch (op.kind) {
    case OpKind::Add: return b_.CreateAdd(a, b);
    case OpKind::Sub: return b_.CreateSub(a, b);
    case OpKind::Mul: return b_.CreateMul(a, b);
    case OpKind::Div:
    case OpKind::Rem: {
      // ir/op.h: x / 0 == 0 and INT_MIN / -1 wraps; LLVM would trap on both.
      llvm::Value* bz = b_.CreateICmpEQ(b, zero);
      llvm::Value* one = llvm::ConstantInt::get(ty, 1);
      llvm::Value* safe = bz;
      llvm::Value* neg1 = nullptr;
      if (s) {
        neg1 = b_.CreateICmpEQ(b, llvm::Constant::getAllOnesValue(ty));
        safe = b_.CreateOr(bz, neg1);
      }
      llvm::Value* d = b_.CreateSelect(safe, one, b);
      llvm::Value* r = op.kind == OpKind::Div ? (s ? b_.CreateSDiv(a, d) : b_.CreateUDiv(a, d))
                                              : (s ? b_.CreateSRem(a, d) : b_.CreateURem(a, d));
      if (s) {
        llvm::Value* special = op.kind == OpKind::Div ? b_.CreateSub(zero, a) : zero;
        r = b_.CreateSelect(neg1, special, r);
      }
      return b_.CreateSelect(bz, zero, r);
    }
    case OpKind::Min:
      return b_.CreateIntrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, {ty}, {a, b});
    case OpKind::Max:
      return b_.CreateIntrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, {ty}, {a, b});
    case OpKind::And: return b_.CreateAnd(a, b);
    case OpKind::Or: return b_.CreateOr(a, b);
    case OpKind::Xor: return b_.CreateXor(a, b);
    case OpKind::Shl:
    case OpKind::Shr: {
      llvm::Value* amt = b_.CreateAnd(b, llvm::ConstantInt::get(ty, dtype_bits(t) - 1));
      if (llvm::Value* r = byte_shift_as_words(op.kind, s, a, amt)) return r;
      if (op.kind == OpKind::Shl) return b_.CreateShl(a, amt);
      return s ? b_.CreateAShr(a, amt) : b_.CreateLShr(a, amt);
    }
    default: unsupported(op, "integer operands");
  }
}

llvm::Value* Lowering::compare(const Op& op, DType t, llvm::Value* a, llvm::Value* b) {
  using P = llvm::CmpInst::Predicate;
  if (is_float(t)) {
    P p;
    switch (op.kind) {
      case OpKind::Eq: p = P::FCMP_OEQ; break;
      case OpKind::Ne: p = P::FCMP_UNE; break;
      case OpKind::Lt: p = P::FCMP_OLT; break;
      case OpKind::Le: p = P::FCMP_OLE; break;
      case OpKind::Gt: p = P::FCMP_OGT; break;
      default: p = P::FCMP_OGE; break;
    }
    return b_.CreateFCmp(p, a, b);
  }
  bool s = is_signed_int(t);
  P p;
  switch (op.kind) {
    case OpKind::Eq: p = P::ICMP_EQ; break;
    case OpKind::Ne: p = P::ICMP_NE; break;
    case OpKind::Lt: p = s ? P::ICMP_SLT : P::ICMP_ULT; break;
    case OpKind::Le: p = s ? P::ICMP_SLE : P::ICMP_ULE; break;
    case OpKind::Gt: p = s ? P::ICMP_SGT : P::ICMP_UGT; break;
    default: p = s ? P::ICMP_SGE : P::ICMP_UGE; break;
  }
  return b_.CreateICmp(p, a, b);
}

llvm::Value* Lowering::unary(const Op& op, DType t, llvm::Value* x) {
  llvm::Type* ty = x->getType();
  if (!is_float(t)) {
    switch (op.kind) {
      case OpKind::Neg: return b_.CreateSub(llvm::Constant::getNullValue(ty), x);
      case OpKind::Abs:
        if (!is_signed_int(t)) return x;
        return b_.CreateIntrinsic(llvm::Intrinsic::abs, {ty}, {x, b_.getFalse()});
      case OpKind::Not: return b_.CreateNot(x);
      case OpKind::Floor: return x;
      default: unsupported(op, "integer operand");
    }
  }
  llvm::Value* r;
  switch (op.kind) {
    case OpKind::Neg: r = b_.CreateFNeg(x); break;
    case OpKind::Abs: r = b_.CreateIntrinsic(llvm::Intrinsic::fabs, {ty}, {x}); break;
    case OpKind::Floor: r = b_.CreateIntrinsic(llvm::Intrinsic::floor, {ty}, {x}); break;
    case OpKind::Sqrt: r = b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {ty}, {x}); break;
    case OpKind::Rsqrt:
      r = b_.CreateFDiv(llvm::ConstantFP::get(ty, 1.0),
                        b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {ty}, {x}));
      break;
    case OpKind::Exp: r = cpu_math::exp(b_, x, profile_); break;
    case OpKind::Exp2: r = cpu_math::exp2(b_, x, profile_); break;
    case OpKind::Log: r = cpu_math::log(b_, x); break;
    case OpKind::Log2: r = cpu_math::log2(b_, x); break;
    case OpKind::Tanh: r = cpu_math::tanh(b_, x, profile_); break;
    case OpKind::Sigmoid: r = cpu_math::sigmoid(b_, x, profile_); break;
    case OpKind::Erf: r = cpu_math::erf(b_, x, profile_); break;
    default: unsupported(op, "float operand");
  }
  return round_to(r, t);
}

llvm::Value* Lowering::cast(llvm::Value* x, DType from, DType to) {
  if (from == to) return x;
  llvm::Type* dst = shaped_like(x, elem_type(to));
  if (to == DType::boolean) {
    if (is_float(from)) return b_.CreateFCmpUNE(x, llvm::Constant::getNullValue(x->getType()));
    return b_.CreateICmpNE(x, llvm::Constant::getNullValue(x->getType()));
  }
  if (from == DType::boolean) return is_float(to) ? b_.CreateUIToFP(x, dst) : b_.CreateZExt(x, dst);
  if (is_float(from) && is_float(to)) return round_to(x, to);  // both held as f32
  if (is_float(from)) {
    if (dtype_bytes(to) >= 4) {
      auto id = is_signed_int(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
      return b_.CreateIntrinsic(id, {dst, x->getType()}, {x});
    }
    // Narrow targets: NaN to 0, clamp in float to the target's range (its
    // bounds are exact f32 values), then a plain in-range conversion. The
    // same result as the saturating cast, but x86 selects vector
    // instructions (vmaxps/vminps, vcvttps2dq, vpmovdb) where the
    // saturating intrinsic is expanded element by element with branches.
    const double range = static_cast<double>(int64_t{1} << (8 * dtype_bytes(to)));
    const bool s = is_signed_int(to);
    auto splat = [&](double c) { return llvm::ConstantFP::get(x->getType(), c); };
    llvm::Value* v = b_.CreateSelect(b_.CreateFCmpUNO(x, x), splat(0), x);
    v = b_.CreateMaxNum(v, splat(s ? -range / 2 : 0.0));
    v = b_.CreateMinNum(v, splat(s ? range / 2 - 1 : range - 1));
    return s ? b_.CreateFPToSI(v, dst) : b_.CreateFPToUI(v, dst);
  }
  if (is_float(to))
    return round_to(is_signed_int(from) ? b_.CreateSIToFP(x, dst) : b_.CreateUIToFP(x, dst), to);
  return is_signed_int(from) ? b_.CreateSExtOrTrunc(x, dst) : b_.CreateZExtOrTrunc(x, dst);
}

// Flat row-major vectors make a view a plain LLVM bitcast of the storage bits.
llvm::Value* Lowering::bitcast(llvm::Value* x, DType from, const Type& to) {
  llvm::Value* bits = to_storage(x, from);
  llvm::Value* as = b_.CreateBitCast(bits, shaped(storage_type(to.dtype), to.shape));
  return from_storage(as, to.dtype);
}

llvm::Value* Lowering::shuffle_gather(llvm::Value* v, const std::vector<int>& idx,
                                      const Type& result) {
  llvm::Value* r = b_.CreateShuffleVector(v, idx);
  if (result.is_scalar()) return b_.CreateExtractElement(r, uint64_t{0});
  return r;
}

llvm::Value* Lowering::broadcast(llvm::Value* v, const Shape& from, const Shape& to) {
  Type t{DType::f32, to};
  int64_t n = t.numel();
  if (from.empty()) return b_.CreateVectorSplat(static_cast<unsigned>(n), v);
  // For each destination element, the source element numpy broadcasting picks.
  size_t off = to.size() - from.size();
  std::vector<int> idx(n);
  std::vector<int64_t> coord(to.size(), 0);
  for (int64_t lin = 0; lin < n; ++lin) {
    int64_t src = 0;
    for (size_t j = 0; j < from.size(); ++j)
      src = src * from[j] + (from[j] == 1 ? 0 : coord[j + off]);
    idx[lin] = static_cast<int>(src);
    for (int j = static_cast<int>(to.size()) - 1; j >= 0; --j) {
      if (++coord[j] < to[j]) break;
      coord[j] = 0;
    }
  }
  return b_.CreateShuffleVector(v, idx);
}

}  // namespace kiln::cpu_lowering
