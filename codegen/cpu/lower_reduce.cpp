// Reductions, argmax and dots: horizontal reductions, whole-row
// combinations, the outer-product dot and the grouped 8-bit dot.
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/Support/KnownBits.h>

#include "codegen/cpu/lowering.h"

namespace kiln::cpu_lowering {

llvm::Value* Lowering::reduce_vector(OpKind kind, DType t, llvm::Value* v) {
  if (kind == OpKind::ArgMax) return argmax_vector(t, v);
  bool f = is_float(t);
  bool s = is_signed_int(t);
  switch (kind) {
    case OpKind::ReduceSum:
      if (f) {
        llvm::Value* r = b_.CreateFAddReduce(llvm::ConstantFP::getNegativeZero(b_.getFloatTy()), v);
        llvm::cast<llvm::Instruction>(r)->setHasAllowReassoc(true);
        return r;
      }
      return b_.CreateAddReduce(v);
    case OpKind::ReduceMax: return f ? b_.CreateFPMaxReduce(v) : b_.CreateIntMaxReduce(v, s);
    default: return f ? b_.CreateFPMinReduce(v) : b_.CreateIntMinReduce(v, s);
  }
}

llvm::Value* Lowering::argmax_vector(DType t, llvm::Value* v) {
  auto* vt = llvm::cast<llvm::FixedVectorType>(v->getType());
  unsigned n = vt->getNumElements();
  llvm::Value* m =
      is_float(t) ? b_.CreateFPMaxReduce(v) : b_.CreateIntMaxReduce(v, is_signed_int(t));
  llvm::Value* ms = b_.CreateVectorSplat(n, m);
  llvm::Value* eq = is_float(t) ? b_.CreateFCmpOEQ(v, ms) : b_.CreateICmpEQ(v, ms);
  std::vector<llvm::Constant*> lanes;
  for (unsigned i = 0; i < n; ++i) lanes.push_back(b_.getInt32(i));
  llvm::Value* iota = llvm::ConstantVector::get(lanes);
  llvm::Value* none = b_.CreateVectorSplat(n, b_.getInt32(INT32_MAX));
  llvm::Value* first = b_.CreateIntMinReduce(b_.CreateSelect(eq, iota, none), true);
  // All NaN: nothing compares equal to the NaN max.
  return b_.CreateSelect(b_.CreateICmpEQ(first, b_.getInt32(INT32_MAX)), b_.getInt32(0), first);
}

// c + e, e a dot_groups or an i32 sum of them (through reshapes), each used
// only here: every dot accumulates into the running sum (vpdpbusd's
// accumulator operand), so c + (dot_a + dot_b) is two chained dots, not
// dots into zero and adds. The dots lowered on their own before are left
// unused and deleted by LLVM. Integer adds reassociate exactly. Returns
// nullptr when no dot fits.
llvm::Value* Lowering::accumulated_dot_groups(const Op& op) {
  if (op.kind != OpKind::Add || ty(op.result).dtype != DType::i32) return nullptr;
  // The right side first: in acc = acc + term the term is the new dot tree.
  for (int side = 1; side >= 0; --side) {
    bool any_dot = false;
    llvm::Value* r = accumulate_dots(v(op.args[1 - side]), op.args[side], any_dot);
    if (any_dot) return r;
  }
  return nullptr;
}

// acc + value id, with each single-use dot_groups in id's tree of i32 adds
// accumulating into acc in turn.
llvm::Value* Lowering::accumulate_dots(llvm::Value* acc, int id, bool& any_dot) {
  const Op* d = def_op_[id];
  int through = id;
  while (d && d->kind == OpKind::Reshape && uses_[through] == 1) {
    through = d->args[0];
    d = def_op_[through];
  }
  if (d && uses_[through] == 1) {
    if (d->kind == OpKind::DotGroups) {
      any_dot = true;
      return dot_groups(*d, acc);
    }
    if (d->kind == OpKind::Add && through == id && ty(id).dtype == DType::i32 &&
        ty(d->args[0]).shape == ty(id).shape && ty(d->args[1]).shape == ty(id).shape)
      return accumulate_dots(accumulate_dots(acc, d->args[0], any_dot), d->args[1], any_dot);
  }
  return b_.CreateAdd(acc, v(id));
}

// The grouped dot. With VNNI, and u8 a for bytes, exactly what x86
// vpdpbusd (bytes) or vpdpwssd (i16 pairs) computes per 32-bit lane: that
// instruction over the flat operands (512 bits per instruction). Elsewhere
// the same sum in a form LLVM's instruction selection knows: adjacent
// products summed in i32 (x86 vpmaddwd; AArch64 smull + addp), bytes widened
// to i16 first (each product fits) and those pairs added in pairs. Exact
// either way (nothing saturates; i16 pairs wrap as the op does).
llvm::Value* Lowering::dot_groups(const Op& op, llvm::Value* acc) {
  const int a = op.args[0], b = op.args[1];
  const bool words = dot_group_size(ty(a).dtype, ty(b).dtype) == 2;
  const bool a_unsigned = ty(a).dtype == DType::u8;
  const int64_t n = ty(a).numel(), per = words ? 32 : 64;  // elements per instruction
  if (!profile_.x86_vnni && !words && a_unsigned && profile_.x86_pshufb_bits > 0)
    if (llvm::Value* d = maddubs_dot(v(a), v(b), n)) return acc ? b_.CreateAdd(acc, d) : d;
  if (!profile_.x86_vnni || !(a_unsigned || words) || (n % per && n != per / 4 && n != per / 2)) {
    auto strided = [&](llvm::Value* v, int64_t count, int64_t first, int64_t step) {
      std::vector<int> idx;
      for (int64_t j = 0; j < count; ++j) idx.push_back(static_cast<int>(first + j * step));
      return b_.CreateShuffleVector(v, idx);
    };
    auto vec = [&](llvm::Type* e, int64_t count) {
      return llvm::FixedVectorType::get(e, static_cast<unsigned>(count));
    };
    llvm::Value* a16 = words        ? v(a)
                       : a_unsigned ? b_.CreateZExt(v(a), vec(b_.getInt16Ty(), n))
                                    : b_.CreateSExt(v(a), vec(b_.getInt16Ty(), n));
    llvm::Value* b16 = words ? v(b) : b_.CreateSExt(v(b), vec(b_.getInt16Ty(), n));
    auto half = [&](int64_t first) {
      llvm::Type* t = vec(b_.getInt32Ty(), n / 2);
      return b_.CreateMul(b_.CreateSExt(strided(a16, n / 2, first, 2), t),
                          b_.CreateSExt(strided(b16, n / 2, first, 2), t));
    };
    llvm::Value* pairs = b_.CreateAdd(half(0), half(1));  // [n/2]
    llvm::Value* sums =
        words ? pairs : b_.CreateAdd(strided(pairs, n / 4, 0, 2), strided(pairs, n / 4, 1, 2));
    return acc ? b_.CreateAdd(acc, sums) : sums;
  }
  const int64_t group = words ? 2 : 4;
  std::vector<llvm::Value*> parts;
  for (int64_t c = 0; c < n; c += per) {
    int64_t w = std::min<int64_t>(per, n - c);
    std::vector<int> idx;
    for (int64_t j = 0; j < w; ++j) idx.push_back(static_cast<int>(c + j));
    auto* lanes = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(w / group));
    llvm::Value* ua = b_.CreateBitCast(b_.CreateShuffleVector(v(a), idx), lanes);
    llvm::Value* sb = b_.CreateBitCast(b_.CreateShuffleVector(v(b), idx), lanes);
    const unsigned bits = static_cast<unsigned>(w / group * 32);
    auto id = words ? (bits == 512   ? llvm::Intrinsic::x86_avx512_vpdpwssd_512
                       : bits == 256 ? llvm::Intrinsic::x86_avx512_vpdpwssd_256
                                     : llvm::Intrinsic::x86_avx512_vpdpwssd_128)
                    : (bits == 512   ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
                       : bits == 256 ? llvm::Intrinsic::x86_avx512_vpdpbusd_256
                                     : llvm::Intrinsic::x86_avx512_vpdpbusd_128);
    llvm::Value* start = llvm::Constant::getNullValue(lanes);
    if (acc) {
      std::vector<int> lane_idx;
      for (int64_t j = 0; j < w / group; ++j) lane_idx.push_back(static_cast<int>(c / group + j));
      start = b_.CreateShuffleVector(acc, lane_idx);
    }
    parts.push_back(b_.CreateIntrinsic(id, {}, {start, ua, sb}));
  }
  return parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b_, parts);
}

// The byte dot without VNNI as pmaddubsw (u8 x i8 pairs summed into i16,
// saturating) + pmaddwd by ones, 32 (or 16) bytes an instruction pair, as
// llama.cpp's AVX2 dots. Exact only where LLVM's known bits keep the
// unsigned operand below 128 (4-bit codes): 2 x 127 x 128 < 2^15. Null
// otherwise, or where the length does not fit.
llvm::Value* Lowering::maddubs_dot(llvm::Value* a, llvm::Value* b, int64_t n) {
  const llvm::KnownBits known = llvm::computeKnownBits(a, m_.getDataLayout());
  if (known.getMaxValue().getZExtValue() > 127) return nullptr;
  const int64_t per = profile_.x86_pshufb_bits >= 256 && n % 32 == 0 ? 32 : 16;
  if (n % per) return nullptr;
  auto vec = [&](llvm::Type* e, int64_t count) {
    return llvm::FixedVectorType::get(e, static_cast<unsigned>(count));
  };
  const bool wide = per == 32;
  const auto pairs =
      wide ? llvm::Intrinsic::x86_avx2_pmadd_ub_sw : llvm::Intrinsic::x86_ssse3_pmadd_ub_sw_128;
  const auto quads = wide ? llvm::Intrinsic::x86_avx2_pmadd_wd : llvm::Intrinsic::x86_sse2_pmadd_wd;
  llvm::Value* ones = llvm::ConstantInt::get(vec(b_.getInt16Ty(), per / 2), 1);
  std::vector<llvm::Value*> parts;
  for (int64_t c = 0; c < n; c += per) {
    std::vector<int> idx;
    for (int64_t j = 0; j < per; ++j) idx.push_back(static_cast<int>(c + j));
    llvm::Value* p16 = b_.CreateIntrinsic(
        pairs, {}, {b_.CreateShuffleVector(a, idx), b_.CreateShuffleVector(b, idx)});
    parts.push_back(b_.CreateIntrinsic(quads, {}, {p16, ones}));
  }
  return parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b_, parts);
}

llvm::Value* Lowering::reduce(const Op& op) {
  const Type& in = ty(op.args[0]);
  const Type& out = ty(op.result);
  llvm::Value* x = v(op.args[0]);
  DType t = in.dtype;
  auto finish = [&](llvm::Value* r) { return op.kind == OpKind::ReduceSum ? round_to(r, t) : r; };
  if (in.rank() == 1) return finish(reduce_vector(op.kind, t, x));
  if (in.rank() == 3 && op.ival == 2) {
    // Each innermost row of a rank-3 tile reduces to one element.
    llvm::Value* res = llvm::PoisonValue::get(reg_type(out));
    for (int64_t o = 0; o < out.numel(); ++o)
      res = b_.CreateInsertElement(res, finish(reduce_vector(op.kind, t, row_of(op.args[0], o, 0))),
                                   static_cast<uint64_t>(o));
    return res;
  }
  if (in.rank() != 2) unsupported(op, "reductions of rank 3 other than along the last axis");
  int64_t rows = in.shape[0], cols = in.shape[1];
  bool along_rows = op.ival == 1;  // reduce each row to one element
  int64_t outer = along_rows ? rows : cols, inner = along_rows ? cols : rows;
  if (along_rows && !is_float(t) && op.kind != OpKind::ArgMax && cols > 1 && cols <= 16 &&
      (cols & (cols - 1)) == 0) {
    // Short integer rows: halve every row at once (two shuffles and one op
    // over the whole tile per step) instead of one horizontal reduction per
    // row. Integer sums, maxima and minima do not depend on the order.
    llvm::Value* v = x;
    for (int64_t w = cols; w > 1; w /= 2) {
      std::vector<int> lo, hi;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < w / 2; ++j) {
          lo.push_back(static_cast<int>(r * w + j));
          hi.push_back(static_cast<int>(r * w + w / 2 + j));
        }
      llvm::Value *a = b_.CreateShuffleVector(v, lo), *b = b_.CreateShuffleVector(v, hi);
      bool s = is_signed_int(t);
      switch (op.kind) {
        case OpKind::ReduceSum: v = b_.CreateAdd(a, b); break;
        case OpKind::ReduceMax:
          v = b_.CreateIntrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, {a->getType()},
                                 {a, b});
          break;
        default:
          v = b_.CreateIntrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, {a->getType()},
                                 {a, b});
      }
    }
    return finish(v);
  }
  if (!along_rows && op.kind != OpKind::ArgMax) {
    // Axis 0: combine whole rows elementwise.
    auto row = [&](int64_t r) {
      std::vector<int> idx;
      for (int64_t j = 0; j < cols; ++j) idx.push_back(static_cast<int>(r * cols + j));
      return b_.CreateShuffleVector(x, idx);
    };
    llvm::Value* acc = row(0);
    for (int64_t r = 1; r < rows; ++r) {
      llvm::Value* y = row(r);
      bool f = is_float(t);
      bool s = is_signed_int(t);
      switch (op.kind) {
        case OpKind::ReduceSum: acc = f ? b_.CreateFAdd(acc, y) : b_.CreateAdd(acc, y); break;
        case OpKind::ReduceMax:
          acc = b_.CreateIntrinsic(
              f ? llvm::Intrinsic::maxnum : (s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax),
              {acc->getType()}, {acc, y});
          break;
        default:
          acc = b_.CreateIntrinsic(
              f ? llvm::Intrinsic::minnum : (s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin),
              {acc->getType()}, {acc, y});
      }
    }
    return finish(acc);
  }
  llvm::Value* res = llvm::PoisonValue::get(reg_type(out));
  for (int64_t o = 0; o < outer; ++o) {
    std::vector<int> idx;
    for (int64_t i = 0; i < inner; ++i)
      idx.push_back(static_cast<int>(along_rows ? o * cols + i : i * cols + o));
    llvm::Value* slice = along_rows ? row_of(op.args[0], o, 0) : b_.CreateShuffleVector(x, idx);
    llvm::Value* r = reduce_vector(op.kind, t, slice);
    res = b_.CreateInsertElement(res, finish(r), static_cast<uint64_t>(o));
  }
  return res;
}

// Row `row` of rank-2 value `value`. An elementwise expression (arithmetic,
// bit ops, casts) over tiles of the same shape is re-emitted for that row
// alone instead of slicing its full-tile result: a per-row reduction then
// sees the narrow operands, e.g. reduce(zext(u8) * sext(i8)), which LLVM
// selects as dot-product instructions (x86 vpdpbusd, AArch64 sdot/udot).
// The ops are pure, so re-emitting them cannot change a result.
llvm::Value* Lowering::row_of(int value, int64_t row, int depth) {
  const Type& t = ty(value);
  int64_t cols = t.shape.back();
  const Op* def = def_op_[value];
  bool elementwise = def && depth < 8 &&
                     (is_binary_elementwise(def->kind) || is_unary_elementwise(def->kind) ||
                      def->kind == OpKind::Cast);
  if (elementwise)
    for (int a : def->args)
      if (ty(a).shape != t.shape) elementwise = false;
  if (!elementwise) {
    std::vector<int> idx;
    for (int64_t j = 0; j < cols; ++j) idx.push_back(static_cast<int>(row * cols + j));
    return b_.CreateShuffleVector(v(value), idx);
  }
  DType in = ty(def->args[0]).dtype;
  if (def->kind == OpKind::Cast) return cast(row_of(def->args[0], row, depth + 1), in, t.dtype);
  if (is_unary_elementwise(def->kind)) return unary(*def, in, row_of(def->args[0], row, depth + 1));
  return binary(*def, in, row_of(def->args[0], row, depth + 1),
                row_of(def->args[1], row, depth + 1));
}

llvm::Value* Lowering::dot(const Op& op) {
  const Shape& sa = ty(op.args[0]).shape;
  const Shape& sb = ty(op.args[1]).shape;
  int64_t M = sa[0], K = sa[1], N = sb[1];
  DType ta = ty(op.args[0]).dtype;
  llvm::Value* a = v(op.args[0]);
  llvm::Value* b = v(op.args[1]);
  llvm::Value* acc = v(op.args[2]);
  bool f = is_float(ta);
  if (!f) {
    llvm::Type* i32v = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(M * K));
    a = ta == DType::u8 ? b_.CreateZExt(a, i32v) : b_.CreateSExt(a, i32v);
    b = b_.CreateSExt(b, llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(K * N)));
  }
  // Outer-product form: acc += a[:, k] (x) b[k, :] for each k, as M*N-wide vectors.
  for (int64_t kk = 0; kk < K; ++kk) {
    std::vector<int> ia, ib;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        ia.push_back(static_cast<int>(m * K + kk));
        ib.push_back(static_cast<int>(kk * N + n));
      }
    llvm::Value* x = b_.CreateShuffleVector(a, ia);
    llvm::Value* y = b_.CreateShuffleVector(b, ib);
    acc = f ? b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {acc->getType()}, {x, y, acc})
            : b_.CreateAdd(acc, b_.CreateMul(x, y));
  }
  return acc;
}

}  // namespace kiln::cpu_lowering
