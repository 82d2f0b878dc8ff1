#include "codegen/cpu/vector_math.h"

#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <initializer_list>
#include <limits>

namespace kiln::cpu_math {

namespace {

llvm::Value* c(llvm::IRBuilder<>& b, llvm::Value* like, double v) {
  (void)b;
  return llvm::ConstantFP::get(like->getType(), v);
}

llvm::Value* ci(llvm::IRBuilder<>& b, llvm::Type* ity, int64_t v) {
  (void)b;
  return llvm::ConstantInt::get(ity, v, true);
}

llvm::Type* int_like(llvm::Value* x) {
  llvm::Type* i32 = llvm::Type::getInt32Ty(x->getContext());
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType()))
    return llvm::FixedVectorType::get(i32, vt->getNumElements());
  return i32;
}

// a * x + y, fused where the target has FMA (half the ops and latency of
// a polynomial step), a multiply and an add where it has not.
llvm::Value* mul_add(llvm::IRBuilder<>& b, llvm::Value* a, llvm::Value* x, llvm::Value* y) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {a, x, y});
}

// Horner evaluation of sum coeffs[i] * x^(n-1-i).
llvm::Value* poly(llvm::IRBuilder<>& b, llvm::Value* x, std::initializer_list<double> coeffs) {
  llvm::Value* acc = nullptr;
  for (double k : coeffs) acc = acc ? mul_add(b, acc, x, c(b, x, k)) : c(b, x, k);
  return acc;
}

llvm::Value* is_nan(llvm::IRBuilder<>& b, llvm::Value* x) { return b.CreateFCmpUNO(x, x); }

// 2^n for integral-valued float n in [-126, 127].
llvm::Value* pow2i(llvm::IRBuilder<>& b, llvm::Value* n) {
  llvm::Type* ity = int_like(n);
  llvm::Value* e = b.CreateAdd(b.CreateFPToSI(n, ity), ci(b, ity, 127));
  return b.CreateBitCast(b.CreateShl(e, ci(b, ity, 23)), n->getType());
}

// x - n ln2, ln2 split in two so that n * ln2 is exact for |n| < 2^9.
llvm::Value* minus_n_ln2(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* n) {
  llvm::Value* r = b.CreateFSub(x, b.CreateFMul(n, c(b, x, 0.693359375)));
  return b.CreateFSub(r, b.CreateFMul(n, c(b, x, -2.12194440e-4)));
}

// e^r for |r| <= ln2/2 (Cephes expf polynomial).
llvm::Value* exp_reduced(llvm::IRBuilder<>& b, llvm::Value* r) {
  llvm::Value* p = poly(b, r,
                        {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2,
                         1.6666665459E-1, 5.0000001201E-1});
  llvm::Value* r2 = b.CreateFMul(r, r);
  return b.CreateFAdd(mul_add(b, p, r2, r), c(b, r, 1.0));
}

// Scales y by 2^n where n may be as large as 128 or as small as -149: split
// into two factors so neither exponent leaves the normal range.
llvm::Value* ldexp(llvm::IRBuilder<>& b, llvm::Value* y, llvm::Value* n) {
  llvm::Value* half =
      b.CreateIntrinsic(llvm::Intrinsic::floor, {n->getType()}, {b.CreateFMul(n, c(b, n, 0.5))});
  llvm::Value* rest = b.CreateFSub(n, half);
  return b.CreateFMul(b.CreateFMul(y, pow2i(b, half)), pow2i(b, rest));
}

// y * 2^n in one vscalefps per 16 lanes (a shorter vector or a scalar is
// padded): exact before its single rounding, so overflow to inf and
// gradual underflow come out right with no range split and no selects.
llvm::Value* scalef(llvm::IRBuilder<>& b, llvm::Value* y, llvm::Value* n) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(y->getType());
  unsigned lanes = vt ? vt->getNumElements() : 1, padded = (lanes + 15) / 16 * 16;
  auto widen = [&](llvm::Value* v) {
    if (!vt)
      return b.CreateInsertElement(
          llvm::PoisonValue::get(llvm::FixedVectorType::get(v->getType(), padded)), v, uint64_t{0});
    llvm::SmallVector<int> m(padded, -1);
    for (unsigned i = 0; i < lanes; ++i) m[i] = static_cast<int>(i);
    return lanes == padded ? v : b.CreateShuffleVector(v, m);
  };
  llvm::Value *yw = widen(y), *nw = widen(n);
  llvm::SmallVector<llvm::Value*> parts;
  for (unsigned at = 0; at < padded; at += 16) {
    llvm::SmallVector<int> m(16);
    for (unsigned i = 0; i < 16; ++i) m[i] = static_cast<int>(at + i);
    llvm::Value* yp = padded == 16 ? yw : b.CreateShuffleVector(yw, m);
    llvm::Value* np = padded == 16 ? nw : b.CreateShuffleVector(nw, m);
    parts.push_back(b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
                                      {yp, np, yp, b.getInt16(0xffff), b.getInt32(4)}));
  }
  llvm::Value* all = parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b, parts);
  if (!vt) return b.CreateExtractElement(all, uint64_t{0});
  llvm::SmallVector<int> m(lanes);
  for (unsigned i = 0; i < lanes; ++i) m[i] = static_cast<int>(i);
  return lanes == padded ? all : b.CreateShuffleVector(all, m);
}

// x limited to [lo, hi] with a NaN kept (the compare-selects are x86's
// vminps/vmaxps with x second), so NaN flows through to the result.
llvm::Value* clamp_keep_nan(llvm::IRBuilder<>& b, llvm::Value* x, double lo, double hi) {
  x = b.CreateSelect(b.CreateFCmpOGT(x, c(b, x, hi)), c(b, x, hi), x);
  return b.CreateSelect(b.CreateFCmpOLT(x, c(b, x, lo)), c(b, x, lo), x);
}

llvm::Value* round_even(llvm::IRBuilder<>& b, llvm::Value* x) {
  return b.CreateIntrinsic(llvm::Intrinsic::roundeven, {x->getType()}, {x});
}

}  // namespace

llvm::Value* exp(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile) {
  if (profile.x86_scalef) {
    llvm::Value* xc = clamp_keep_nan(b, x, -104.0, 89.0);
    llvm::Value* n = round_even(b, b.CreateFMul(xc, c(b, x, 1.44269504088896341)));
    return scalef(b, exp_reduced(b, minus_n_ln2(b, xc, n)), n);
  }
  // x = n ln2 + r.
  llvm::Value* xc = b.CreateIntrinsic(llvm::Intrinsic::minnum, {x->getType()}, {x, c(b, x, 89.0)});
  xc = b.CreateIntrinsic(llvm::Intrinsic::maxnum, {x->getType()}, {xc, c(b, x, -104.0)});
  llvm::Value* n = b.CreateIntrinsic(
      llvm::Intrinsic::floor, {x->getType()},
      {b.CreateFAdd(b.CreateFMul(xc, c(b, x, 1.44269504088896341)), c(b, x, 0.5))});
  llvm::Value* y = ldexp(b, exp_reduced(b, minus_n_ln2(b, xc, n)), n);
  y = b.CreateSelect(b.CreateFCmpOGT(x, c(b, x, 88.72283935546875)),
                     c(b, x, std::numeric_limits<double>::infinity()), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, c(b, x, -103.972084045410)), c(b, x, 0.0), y);
  return b.CreateSelect(is_nan(b, x), x, y);
}

llvm::Value* exp2(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile) {
  if (profile.x86_scalef) {
    llvm::Value* xc = clamp_keep_nan(b, x, -151.0, 129.0);
    llvm::Value* n = round_even(b, xc);
    llvm::Value* r = b.CreateFMul(b.CreateFSub(xc, n), c(b, x, 0.693147180559945309));
    return scalef(b, exp_reduced(b, r), n);
  }
  llvm::Value* xc = b.CreateIntrinsic(llvm::Intrinsic::minnum, {x->getType()}, {x, c(b, x, 129.0)});
  xc = b.CreateIntrinsic(llvm::Intrinsic::maxnum, {x->getType()}, {xc, c(b, x, -151.0)});
  llvm::Value* n =
      b.CreateIntrinsic(llvm::Intrinsic::floor, {x->getType()}, {b.CreateFAdd(xc, c(b, x, 0.5))});
  llvm::Value* r = b.CreateFMul(b.CreateFSub(xc, n), c(b, x, 0.693147180559945309));
  llvm::Value* y = ldexp(b, exp_reduced(b, r), n);
  y = b.CreateSelect(b.CreateFCmpOGE(x, c(b, x, 128.0)),
                     c(b, x, std::numeric_limits<double>::infinity()), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, c(b, x, -150.0)), c(b, x, 0.0), y);
  return b.CreateSelect(is_nan(b, x), x, y);
}

llvm::Value* log(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* ity = int_like(x);
  // Subnormals: scale into the normal range first.
  llvm::Value* tiny = b.CreateFCmpOLT(x, c(b, x, 1.17549435e-38));
  llvm::Value* xs = b.CreateSelect(tiny, b.CreateFMul(x, c(b, x, 8388608.0)), x);
  llvm::Value* bits = b.CreateBitCast(xs, ity);
  llvm::Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, ci(b, ity, 23)), ci(b, ity, 0xff)),
                               ci(b, ity, 126));
  e = b.CreateSub(e, b.CreateSelect(tiny, ci(b, ity, 23), ci(b, ity, 0)));
  llvm::Value* m = b.CreateBitCast(
      b.CreateOr(b.CreateAnd(bits, ci(b, ity, 0x807fffff)), ci(b, ity, 0x3f000000)), x->getType());
  // m in [0.5, 1): fold to [sqrt(1/2), sqrt(2)) - 1.
  llvm::Value* small = b.CreateFCmpOLT(m, c(b, x, 0.707106781186547524));
  llvm::Value* ef = b.CreateSIToFP(e, x->getType());
  ef = b.CreateFSub(ef, b.CreateSelect(small, c(b, x, 1.0), c(b, x, 0.0)));
  m = b.CreateFSub(b.CreateSelect(small, b.CreateFAdd(m, m), m), c(b, x, 1.0));
  llvm::Value* z = b.CreateFMul(m, m);
  llvm::Value* y =
      poly(b, m,
           {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
            -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  y = b.CreateFMul(b.CreateFMul(y, m), z);
  y = b.CreateFAdd(y, b.CreateFMul(ef, c(b, x, -2.12194440e-4)));
  y = b.CreateFSub(y, b.CreateFMul(z, c(b, x, 0.5)));
  llvm::Value* r = b.CreateFAdd(b.CreateFAdd(m, y), b.CreateFMul(ef, c(b, x, 0.693359375)));
  double inf = std::numeric_limits<double>::infinity();
  r = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, x, inf)), x, r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, x, 0.0)), c(b, x, -inf), r);
  r = b.CreateSelect(b.CreateFCmpOLT(x, c(b, x, 0.0)),
                     c(b, x, std::numeric_limits<double>::quiet_NaN()), r);
  return b.CreateSelect(is_nan(b, x), x, r);
}

llvm::Value* log2(llvm::IRBuilder<>& b, llvm::Value* x) {
  return b.CreateFMul(log(b, x), c(b, x, 1.44269504088896341));
}

llvm::Value* tanh(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile) {
  llvm::Value* ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {x->getType()}, {x});
  // Small |x|: odd polynomial (Cephes tanhf); large: 1 - 2 / (e^{2|x|} + 1).
  llvm::Value* z = b.CreateFMul(x, x);
  llvm::Value* p = poly(b, z,
                        {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1,
                         -3.33332819422E-1});
  llvm::Value* small = b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, z), x), x);
  llvm::Value* e = exp(b, b.CreateFAdd(ax, ax), profile);
  llvm::Value* big =
      b.CreateFSub(c(b, x, 1.0), b.CreateFDiv(c(b, x, 2.0), b.CreateFAdd(e, c(b, x, 1.0))));
  big = b.CreateIntrinsic(llvm::Intrinsic::copysign, {x->getType()}, {big, x});
  llvm::Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, c(b, x, 0.625)), small, big);
  return b.CreateSelect(is_nan(b, x), x, r);
}

llvm::Value* sigmoid(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile) {
  llvm::Value* e = exp(b, b.CreateFNeg(x), profile);
  return b.CreateFDiv(c(b, x, 1.0), b.CreateFAdd(c(b, x, 1.0), e));
}

llvm::Value* erf(llvm::IRBuilder<>& b, llvm::Value* x, const CpuProfile& profile) {
  llvm::Value* ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {x->getType()}, {x});
  // |x| < 0.84375: Maclaurin series of erf up to x^17 (relative error < 1e-7).
  llvm::Value* z = b.CreateFMul(x, x);
  llvm::Value* s = poly(b, z,
                        {1.0 / 685440, -1.0 / 75600, 1.0 / 9360, -1.0 / 1320, 1.0 / 216, -1.0 / 42,
                         1.0 / 10, -1.0 / 3, 1.0});
  llvm::Value* small = b.CreateFMul(b.CreateFMul(s, x), c(b, x, 1.12837916709551257));
  // Otherwise Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7).
  llvm::Value* t =
      b.CreateFDiv(c(b, x, 1.0), b.CreateFAdd(c(b, x, 1.0), b.CreateFMul(ax, c(b, x, 0.3275911))));
  llvm::Value* q = poly(b, t, {1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592});
  q = b.CreateFMul(q, t);
  llvm::Value* big = b.CreateFSub(c(b, x, 1.0), b.CreateFMul(q, exp(b, b.CreateFNeg(z), profile)));
  big = b.CreateIntrinsic(llvm::Intrinsic::copysign, {x->getType()}, {big, x});
  llvm::Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, c(b, x, 0.84375)), small, big);
  return b.CreateSelect(is_nan(b, x), x, r);
}

}  // namespace kiln::cpu_math
