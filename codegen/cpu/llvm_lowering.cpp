#include "codegen/cpu/llvm_lowering.h"

#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <functional>

#include "codegen/cpu/vector_math.h"
#include "ir/error.h"

namespace kiln {

namespace {

using llvm::IRBuilder;

// Offsets of the form base + sum_i stride_i * index_i over the tile's axes,
// all in i64. Strides are llvm::Values so runtime row strides (row * n)
// still give contiguous rows; IRBuilder folds constant strides to
// ConstantInts, which is how unit strides are recognised.
struct Affine {
  bool valid = false;
  llvm::Value* base = nullptr;
  std::vector<llvm::Value*> strides;
};

bool is_const_int(llvm::Value* v, int64_t c) {
  auto* ci = llvm::dyn_cast<llvm::ConstantInt>(v);
  return ci && ci->getSExtValue() == c;
}

class Lowering {
 public:
  Lowering(const Kernel& k, llvm::LLVMContext& ctx, llvm::Module& m, const CpuProfile& profile)
      : k_(k), ctx_(ctx), m_(m), b_(ctx), profile_(profile) {}

  void run(const std::string& symbol);

 private:
  // ---- types ----
  llvm::Type* elem_type(DType t) {  // register element type
    switch (t) {
      case DType::f32:
      case DType::f16:
      case DType::bf16:
      case DType::f8e4m3:
      case DType::f8e5m2: return b_.getFloatTy();
      case DType::boolean: return b_.getInt1Ty();
      default: return b_.getIntNTy(dtype_bits(t));
    }
  }
  llvm::Type* storage_type(DType t) {  // element type in memory
    switch (t) {
      case DType::f32: return b_.getFloatTy();
      case DType::f16: return b_.getHalfTy();
      case DType::boolean: return b_.getInt8Ty();
      default: return b_.getIntNTy(dtype_bits(t));
    }
  }
  llvm::Type* shaped(llvm::Type* e, const Shape& s) {
    if (s.empty()) return e;
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return llvm::FixedVectorType::get(e, static_cast<unsigned>(n));
  }
  llvm::Type* reg_type(const Type& t) { return shaped(elem_type(t.dtype), t.shape); }
  llvm::Type* i64_like(const Shape& s) { return shaped(b_.getInt64Ty(), s); }

  [[noreturn]] void unsupported(const Op& op, const std::string& why) {
    throw Error("kernel '" + k_.name + "', op " + std::string(op_name(op.kind)) +
                ": not supported by the CPU lowering: " + why);
  }

  // ---- constants and conversions ----
  llvm::Value* constant(const Type& t, int64_t ival, double fval) {
    llvm::Type* e = elem_type(t.dtype);
    llvm::Constant* c;
    if (is_float(t.dtype))
      c = llvm::ConstantFP::get(e, round_to_float_dtype(static_cast<float>(fval), t.dtype));
    else
      c = llvm::ConstantInt::get(e, static_cast<uint64_t>(ival), is_signed_int(t.dtype));
    if (t.is_scalar()) return c;
    return llvm::ConstantVector::getSplat(
        llvm::ElementCount::getFixed(static_cast<unsigned>(t.numel())), c);
  }

  llvm::Value* splat_like(llvm::Value* scalar, llvm::Type* like) {
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like))
      return b_.CreateVectorSplat(vt->getNumElements(), scalar);
    return scalar;
  }

  llvm::Value* per_lane_call(llvm::Value* v, const char* fn, llvm::Type* ret, llvm::Type* arg) {
    llvm::FunctionCallee callee = m_.getOrInsertFunction(fn, ret, arg);
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType());
    if (!vt) return b_.CreateCall(callee, {v});
    llvm::Value* out =
        llvm::PoisonValue::get(llvm::FixedVectorType::get(ret, vt->getNumElements()));
    for (unsigned i = 0; i < vt->getNumElements(); ++i)
      out = b_.CreateInsertElement(out, b_.CreateCall(callee, {b_.CreateExtractElement(v, i)}), i);
    return out;
  }

  llvm::Type* int_like(llvm::Value* v, int bits) {
    llvm::Type* it = b_.getIntNTy(bits);
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType()))
      return llvm::FixedVectorType::get(it, vt->getNumElements());
    return it;
  }

  // f32 register value -> storage representation of a narrow float.
  llvm::Value* to_storage(llvm::Value* v, DType t) {
    switch (t) {
      case DType::f16: return b_.CreateFPTrunc(v, shaped_like(v, b_.getHalfTy()));
      case DType::bf16: {
        llvm::Type* i32 = int_like(v, 32);
        llvm::Value* u = b_.CreateBitCast(v, i32);
        llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(u, 16), 1);
        llvm::Value* r = b_.CreateAdd(u, b_.CreateAdd(lsb, llvm::ConstantInt::get(i32, 0x7FFF)));
        llvm::Value* nan = b_.CreateOr(u, llvm::ConstantInt::get(i32, 0x400000));
        r = b_.CreateSelect(b_.CreateFCmpUNO(v, v), nan, r);
        return b_.CreateTrunc(b_.CreateLShr(r, 16), int_like(v, 16));
      }
      case DType::f8e4m3:
        return per_lane_call(v, "kiln_f32_to_f8e4m3", b_.getInt8Ty(), b_.getFloatTy());
      case DType::f8e5m2:
        return per_lane_call(v, "kiln_f32_to_f8e5m2", b_.getInt8Ty(), b_.getFloatTy());
      case DType::boolean: return b_.CreateZExt(v, int_like(v, 8));
      default: return v;
    }
  }

  llvm::Value* from_storage(llvm::Value* v, DType t) {
    switch (t) {
      case DType::f16: return b_.CreateFPExt(v, shaped_like(v, b_.getFloatTy()));
      case DType::bf16:
        return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, int_like(v, 32)), 16),
                                shaped_like(v, b_.getFloatTy()));
      case DType::f8e4m3:
        return per_lane_call(v, "kiln_f8e4m3_to_f32", b_.getFloatTy(), b_.getInt8Ty());
      case DType::f8e5m2:
        return per_lane_call(v, "kiln_f8e5m2_to_f32", b_.getFloatTy(), b_.getInt8Ty());
      case DType::boolean: return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
      default: return v;
    }
  }

  llvm::Type* shaped_like(llvm::Value* v, llvm::Type* e) {
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType()))
      return llvm::FixedVectorType::get(e, vt->getNumElements());
    return e;
  }

  // Rounds an f32 register value to the narrow float dtype t (ir/op.h).
  llvm::Value* round_to(llvm::Value* v, DType t) {
    if (!is_narrow_float(t)) return v;
    return from_storage(to_storage(v, t), t);
  }

  // ---- ops ----
  void lower_block(const Block& blk);
  void lower_op(const Op& op);
  llvm::Value* binary(const Op& op, DType t, llvm::Value* a, llvm::Value* b);
  llvm::Value* byte_shift_as_words(OpKind kind, bool is_signed, llvm::Value* a, llvm::Value* amt);
  llvm::Value* compare(const Op& op, DType t, llvm::Value* a, llvm::Value* b);
  llvm::Value* unary(const Op& op, DType t, llvm::Value* x);
  llvm::Value* cast(llvm::Value* x, DType from, DType to);
  llvm::Value* bitcast(llvm::Value* x, DType from, const Type& to);
  llvm::Value* shuffle_gather(llvm::Value* v, const std::vector<int>& idx, const Type& result);
  llvm::Value* broadcast(llvm::Value* v, const Shape& from, const Shape& to);
  llvm::Value* reduce(const Op& op);
  llvm::Value* reduce_vector(OpKind kind, DType t, llvm::Value* v);
  llvm::Value* argmax_vector(DType t, llvm::Value* v);
  llvm::Value* dot(const Op& op);
  llvm::Value* row_of(int value, int64_t row, int depth);
  llvm::Value* dot_groups(const Op& op, llvm::Value* acc = nullptr);
  llvm::Value* accumulated_dot_groups(const Op& op);
  llvm::Value* load(const Op& op);
  void store(const Op& op);
  llvm::Value* atomic(const Op& op);
  void lower_for(const Op& op);
  void lower_if(const Op& op);
  void track_affine(const Op& op);
  llvm::Value* element_ptr(int buffer_param, llvm::Value* index_i64);
  void prefetch(const Op& op);
  std::vector<llvm::Value*> row_bases(const Affine& a, const Shape& s);
  llvm::Value* rows_mask(llvm::Value* mask, int64_t row, int64_t width);

  llvm::Value* v(int id) { return vals_.at(id); }
  const Type& ty(int id) { return k_.values.at(id); }

  llvm::Value* masked_row_load(llvm::FixedVectorType* ty, llvm::Value* p, llvm::Align align,
                               llvm::Value* mask, llvm::Value* passthru);
  void masked_row_store(llvm::Value* v, llvm::Value* p, llvm::Align align, llvm::Value* mask);
  llvm::AllocaInst* entry_alloca(llvm::Type* t);
  void lane_loop(int64_t n, const std::function<void(llvm::Value*)>& body);

  const Kernel& k_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  IRBuilder<> b_;
  CpuProfile profile_;
  llvm::Function* fn_ = nullptr;
  llvm::Value* args_ = nullptr;
  llvm::Value* pid_[3] = {};
  llvm::StructType* args_ty_ = nullptr;
  std::vector<llvm::Value*> vals_;
  std::vector<const Op*> def_op_;  // defining op of each value, for row_of
  std::vector<int> uses_;          // operand uses of each value
  std::vector<Affine> affine_;
  std::vector<llvm::AllocaInst*> vars_;
  std::vector<llvm::Value*> buffers_;  // by parameter index
};

void Lowering::run(const std::string& symbol) {
  llvm::Type* ptr = b_.getPtrTy();
  args_ty_ = llvm::StructType::get(ctx_, {ptr, ptr, llvm::ArrayType::get(b_.getInt32Ty(), 3)});

  // The program instance body, inlined into the range loop below.
  auto* prog_ty = llvm::FunctionType::get(
      b_.getVoidTy(), {ptr, b_.getInt32Ty(), b_.getInt32Ty(), b_.getInt32Ty()}, false);
  fn_ = llvm::Function::Create(prog_ty, llvm::Function::InternalLinkage, symbol + ".program", m_);
  fn_->addFnAttr(llvm::Attribute::AlwaysInline);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  args_ = fn_->getArg(0);
  for (int i = 0; i < 3; ++i) pid_[i] = fn_->getArg(1 + i);
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);

  vals_.assign(k_.values.size(), nullptr);
  def_op_.assign(k_.values.size(), nullptr);
  uses_.assign(k_.values.size(), 0);
  std::function<void(const Block&)> count = [&](const Block& blk) {
    for (const Op& o : blk.ops) {
      for (int id : o.args) ++uses_[id];
      for (const Block& r : o.regions) count(r);
    }
  };
  count(k_.body);
  affine_.assign(k_.values.size(), Affine{});
  llvm::Value* bufs = b_.CreateLoad(ptr, b_.CreateStructGEP(args_ty_, args_, 0), "buffers");
  buffers_.assign(k_.params.size(), nullptr);
  for (size_t i = 0; i < k_.params.size(); ++i) {
    if (k_.params[i].kind != ParamKind::Buffer) continue;
    llvm::Value* slot = b_.CreateConstGEP1_32(ptr, bufs, buffer_slot(k_, static_cast<int>(i)));
    buffers_[i] = b_.CreateLoad(ptr, slot, k_.params[i].name);
  }
  for (const Type& t : k_.vars) vars_.push_back(b_.CreateAlloca(reg_type(t)));

  lower_block(k_.body);
  b_.CreateRetVoid();

  // Exported entry: run linear program ids [begin, end), axis 0 fastest.
  auto* range_ty =
      llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), b_.getInt64Ty()}, false);
  auto* range = llvm::Function::Create(range_ty, llvm::Function::ExternalLinkage, symbol, m_);
  range->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Value* a = range->getArg(0);
  llvm::Value* begin = range->getArg(1);
  llvm::Value* end = range->getArg(2);
  auto* re = llvm::BasicBlock::Create(ctx_, "entry", range);
  auto* loop = llvm::BasicBlock::Create(ctx_, "loop", range);
  auto* done = llvm::BasicBlock::Create(ctx_, "done", range);
  b_.SetInsertPoint(re);
  llvm::Value* grid = b_.CreateStructGEP(args_ty_, a, 2);
  llvm::Value* g0 =
      b_.CreateSExt(b_.CreateLoad(b_.getInt32Ty(),
                                  b_.CreateConstGEP2_32(args_ty_->getElementType(2), grid, 0, 0)),
                    b_.getInt64Ty());
  llvm::Value* g1 =
      b_.CreateSExt(b_.CreateLoad(b_.getInt32Ty(),
                                  b_.CreateConstGEP2_32(args_ty_->getElementType(2), grid, 0, 1)),
                    b_.getInt64Ty());
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), loop, done);
  b_.SetInsertPoint(loop);
  llvm::PHINode* lin = b_.CreatePHI(b_.getInt64Ty(), 2);
  lin->addIncoming(begin, re);
  llvm::Value* p0 = b_.CreateSRem(lin, g0);
  llvm::Value* rest = b_.CreateSDiv(lin, g0);
  llvm::Value* p1 = b_.CreateSRem(rest, g1);
  llvm::Value* p2 = b_.CreateSDiv(rest, g1);
  b_.CreateCall(fn_, {a, b_.CreateTrunc(p0, b_.getInt32Ty()), b_.CreateTrunc(p1, b_.getInt32Ty()),
                      b_.CreateTrunc(p2, b_.getInt32Ty())});
  llvm::Value* next = b_.CreateAdd(lin, b_.getInt64(1));
  lin->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpSLT(next, end), loop, done);
  b_.SetInsertPoint(done);
  b_.CreateRetVoid();

  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(m_, &os))
    throw Error("kernel '" + k_.name + "': internal error, generated LLVM IR is invalid: " + err);
}

void Lowering::lower_block(const Block& blk) {
  for (const Op& op : blk.ops) lower_op(op);
}

void Lowering::lower_op(const Op& op) {
  const std::vector<int>& a = op.args;
  llvm::Value* r = nullptr;
  switch (op.kind) {
    case OpKind::Const: r = constant(ty(op.result), op.ival, op.fval); break;
    case OpKind::Arange: {
      std::vector<llvm::Constant*> lanes;
      for (int64_t i = 0; i < ty(op.result).numel(); ++i) lanes.push_back(b_.getInt32(i));
      r = llvm::ConstantVector::get(lanes);
      break;
    }
    case OpKind::ProgramId: r = pid_[op.ival]; break;
    case OpKind::NumPrograms: {
      llvm::Value* grid = b_.CreateStructGEP(args_ty_, args_, 2);
      r = b_.CreateLoad(b_.getInt32Ty(), b_.CreateConstGEP2_32(args_ty_->getElementType(2), grid, 0,
                                                               static_cast<unsigned>(op.ival)));
      break;
    }
    case OpKind::Param: {
      const Param& p = k_.params.at(op.ival);
      llvm::Value* scalars = b_.CreateLoad(b_.getPtrTy(), b_.CreateStructGEP(args_ty_, args_, 1));
      llvm::Value* slot = b_.CreateConstGEP1_32(b_.getInt64Ty(), scalars,
                                                scalar_slot(k_, static_cast<int>(op.ival)));
      if (is_float(p.dtype)) {
        llvm::Value* d = b_.CreateLoad(b_.getDoubleTy(), slot, p.name);
        r = round_to(b_.CreateFPTrunc(d, b_.getFloatTy()), p.dtype);
      } else {
        llvm::Value* i = b_.CreateLoad(b_.getInt64Ty(), slot, p.name);
        r = p.dtype == DType::boolean ? b_.CreateICmpNE(i, b_.getInt64(0))
                                      : b_.CreateTrunc(i, elem_type(p.dtype));
      }
      break;
    }
    case OpKind::Broadcast: r = broadcast(v(a[0]), ty(a[0]).shape, ty(op.result).shape); break;
    case OpKind::Reshape: {
      const Type& from = ty(a[0]);
      const Type& to = ty(op.result);
      if (from.is_scalar() && !to.is_scalar())
        r = splat_like(v(a[0]), reg_type(to));
      else if (!from.is_scalar() && to.is_scalar())
        r = b_.CreateExtractElement(v(a[0]), uint64_t{0});
      else
        r = v(a[0]);
      break;
    }
    case OpKind::Transpose: {
      const Shape& s = ty(a[0]).shape;
      std::vector<int> idx;
      for (int64_t j = 0; j < s[1]; ++j)
        for (int64_t i = 0; i < s[0]; ++i) idx.push_back(static_cast<int>(i * s[1] + j));
      r = shuffle_gather(v(a[0]), idx, ty(op.result));
      break;
    }
    case OpKind::Slice: {
      const Shape& s = ty(a[0]).shape;
      const Shape& out = ty(op.result).shape;
      std::vector<int> idx;
      if (out.size() == 1) {
        for (int64_t i = 0; i < out[0]; ++i) idx.push_back(static_cast<int>(op.ints[0] + i));
      } else {
        for (int64_t i = 0; i < out[0]; ++i)
          for (int64_t j = 0; j < out[1]; ++j)
            idx.push_back(static_cast<int>((op.ints[0] + i) * s[1] + op.ints[1] + j));
      }
      if (out.size() > 2) unsupported(op, "slices of rank > 2");
      r = shuffle_gather(v(a[0]), idx, ty(op.result));
      break;
    }
    case OpKind::Fma: {
      DType t = ty(op.result).dtype;
      r = round_to(b_.CreateIntrinsic(llvm::Intrinsic::fma, {v(a[0])->getType()},
                                      {v(a[0]), v(a[1]), v(a[2])}),
                   t);
      break;
    }
    case OpKind::Select: r = b_.CreateSelect(v(a[0]), v(a[1]), v(a[2])); break;
    case OpKind::Cast: r = cast(v(a[0]), ty(a[0]).dtype, ty(op.result).dtype); break;
    case OpKind::Bitcast: r = bitcast(v(a[0]), ty(a[0]).dtype, ty(op.result)); break;
    case OpKind::Load: r = load(op); break;
    case OpKind::Store: store(op); break;
    case OpKind::Prefetch: prefetch(op); break;
    case OpKind::AtomicAdd:
    case OpKind::AtomicMax:
    case OpKind::AtomicMin:
    case OpKind::AtomicXchg: r = atomic(op); break;
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ArgMax: r = reduce(op); break;
    case OpKind::Dot: r = dot(op); break;
    case OpKind::DotGroups: r = dot_groups(op); break;
    case OpKind::For: lower_for(op); break;
    case OpKind::If: lower_if(op); break;
    case OpKind::VarDecl: b_.CreateStore(v(a[0]), vars_.at(op.ival)); break;
    case OpKind::VarLoad:
      r = b_.CreateLoad(reg_type(k_.vars.at(op.ival)), vars_.at(op.ival));
      break;
    case OpKind::VarStore: b_.CreateStore(v(a[0]), vars_.at(op.ival)); break;
    default:
      if (is_binary_elementwise(op.kind)) {
        r = accumulated_dot_groups(op);
        if (!r) r = binary(op, ty(a[0]).dtype, v(a[0]), v(a[1]));
      } else if (is_comparison(op.kind)) {
        r = compare(op, ty(a[0]).dtype, v(a[0]), v(a[1]));
      } else if (is_unary_elementwise(op.kind)) {
        r = unary(op, ty(a[0]).dtype, v(a[0]));
      } else {
        unsupported(op, "unknown op");
      }
  }
  if (op.result >= 0 && op.kind != OpKind::For) {
    vals_[op.result] = r;
    def_op_[op.result] = &op;
    if (is_int(ty(op.result).dtype)) track_affine(op);
  }
}

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
    case OpKind::Exp: r = cpu_math::exp(b_, x); break;
    case OpKind::Exp2: r = cpu_math::exp2(b_, x); break;
    case OpKind::Log: r = cpu_math::log(b_, x); break;
    case OpKind::Log2: r = cpu_math::log2(b_, x); break;
    case OpKind::Tanh: r = cpu_math::tanh(b_, x); break;
    case OpKind::Sigmoid: r = cpu_math::sigmoid(b_, x); break;
    case OpKind::Erf: r = cpu_math::erf(b_, x); break;
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

// c + dot_groups (through reshapes), where the dot's only use is this add:
// the dot accumulates into c (vpdpbusd's accumulator operand) instead of
// into zero followed by an add. Returns nullptr when the pattern does not fit.
llvm::Value* Lowering::accumulated_dot_groups(const Op& op) {
  if (op.kind != OpKind::Add || ty(op.result).dtype != DType::i32) return nullptr;
  for (int side = 0; side < 2; ++side) {
    int id = op.args[side];
    const Op* d = def_op_[id];
    while (d && d->kind == OpKind::Reshape && uses_[id] == 1) {
      id = d->args[0];
      d = def_op_[id];
    }
    if (!d || d->kind != OpKind::DotGroups || uses_[id] != 1) continue;
    return dot_groups(*d, v(op.args[1 - side]));
  }
  return nullptr;
}

// The grouped 8-bit dot. With VNNI and u8 a, exactly what x86 vpdpbusd
// computes per 32-bit lane: that instruction over the flat operands (64
// bytes per instruction). Elsewhere the same sum in a form LLVM's
// instruction selection knows: each 8-bit product fits i16, so the operands
// widen to i16 and adjacent products are summed in i32 (x86 vpmaddwd;
// AArch64 smull + addp), then adjacent pairs are added. Exact either way
// (nothing saturates).
llvm::Value* Lowering::dot_groups(const Op& op, llvm::Value* acc) {
  const int a = op.args[0], b = op.args[1];
  const bool a_unsigned = ty(a).dtype == DType::u8;
  const int64_t n = ty(a).numel();
  if (!profile_.x86_vnni || !a_unsigned || (n % 64 && n != 16 && n != 32)) {
    auto strided = [&](llvm::Value* v, int64_t count, int64_t first, int64_t step) {
      std::vector<int> idx;
      for (int64_t j = 0; j < count; ++j) idx.push_back(static_cast<int>(first + j * step));
      return b_.CreateShuffleVector(v, idx);
    };
    auto vec = [&](llvm::Type* e, int64_t count) {
      return llvm::FixedVectorType::get(e, static_cast<unsigned>(count));
    };
    llvm::Value* a16 = a_unsigned ? b_.CreateZExt(v(a), vec(b_.getInt16Ty(), n))
                                  : b_.CreateSExt(v(a), vec(b_.getInt16Ty(), n));
    llvm::Value* b16 = b_.CreateSExt(v(b), vec(b_.getInt16Ty(), n));
    auto half = [&](int64_t first) {
      llvm::Type* t = vec(b_.getInt32Ty(), n / 2);
      return b_.CreateMul(b_.CreateSExt(strided(a16, n / 2, first, 2), t),
                          b_.CreateSExt(strided(b16, n / 2, first, 2), t));
    };
    llvm::Value* pairs = b_.CreateAdd(half(0), half(1));  // [n/2]
    llvm::Value* sums = b_.CreateAdd(strided(pairs, n / 4, 0, 2), strided(pairs, n / 4, 1, 2));
    return acc ? b_.CreateAdd(acc, sums) : sums;
  }
  std::vector<llvm::Value*> parts;
  for (int64_t c = 0; c < n; c += 64) {
    int64_t w = std::min<int64_t>(64, n - c);
    std::vector<int> idx;
    for (int64_t j = 0; j < w; ++j) idx.push_back(static_cast<int>(c + j));
    auto* lanes = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(w / 4));
    llvm::Value* ua = b_.CreateBitCast(b_.CreateShuffleVector(v(a), idx), lanes);
    llvm::Value* sb = b_.CreateBitCast(b_.CreateShuffleVector(v(b), idx), lanes);
    auto id = w == 64   ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
              : w == 32 ? llvm::Intrinsic::x86_avx512_vpdpbusd_256
                        : llvm::Intrinsic::x86_avx512_vpdpbusd_128;
    llvm::Value* start = llvm::Constant::getNullValue(lanes);
    if (acc) {
      std::vector<int> lane_idx;
      for (int64_t j = 0; j < w / 4; ++j) lane_idx.push_back(static_cast<int>(c / 4 + j));
      start = b_.CreateShuffleVector(acc, lane_idx);
    }
    parts.push_back(b_.CreateIntrinsic(id, {}, {start, ua, sb}));
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

void Lowering::track_affine(const Op& op) {
  const Type& t = ty(op.result);
  Affine& out = affine_[op.result];
  llvm::Type* i64 = b_.getInt64Ty();
  auto zeros = [&](size_t n) { return std::vector<llvm::Value*>(n, b_.getInt64(0)); };
  if (t.is_scalar()) {
    llvm::Value* x = vals_[op.result];
    out = {true, is_signed_int(t.dtype) ? b_.CreateSExt(x, i64) : b_.CreateZExt(x, i64), {}};
    return;
  }
  auto arg = [&](int i) -> const Affine& { return affine_[op.args[i]]; };
  switch (op.kind) {
    case OpKind::Const: out = {true, b_.getInt64(op.ival), zeros(t.shape.size())}; return;
    case OpKind::Arange: out = {true, b_.getInt64(0), {b_.getInt64(1)}}; return;
    case OpKind::Cast:
      if (is_int(ty(op.args[0]).dtype) && dtype_bits(ty(op.args[0]).dtype) <= dtype_bits(t.dtype))
        out = arg(0);
      return;
    case OpKind::Broadcast: {
      const Affine& s = arg(0);
      if (!s.valid) return;
      const Shape& from = ty(op.args[0]).shape;
      size_t off = t.shape.size() - from.size();
      out = {true, s.base, zeros(t.shape.size())};
      for (size_t j = 0; j < from.size(); ++j)
        if (from[j] == t.shape[j + off]) out.strides[j + off] = s.strides[j];
      return;
    }
    case OpKind::Reshape: {
      const Affine& s = arg(0);
      if (!s.valid) return;
      const Shape& from = ty(op.args[0]).shape;
      std::vector<llvm::Value*> kept;
      for (size_t j = 0; j < from.size(); ++j)
        if (from[j] != 1) kept.push_back(s.strides[j]);
      out = {true, s.base, {}};
      size_t next = 0;
      for (int64_t d : t.shape) {
        if (d == 1) {
          out.strides.push_back(b_.getInt64(0));
        } else {
          if (next >= kept.size()) return void(out = {});
          out.strides.push_back(kept[next++]);
        }
      }
      // Only size-1 axes may differ; anything else is not a pure relabelling.
      Shape f1, t1;
      for (int64_t d : from)
        if (d != 1) f1.push_back(d);
      for (int64_t d : t.shape)
        if (d != 1) t1.push_back(d);
      if (f1 != t1) out = {};
      return;
    }
    case OpKind::Add:
    case OpKind::Sub: {
      const Affine &x = arg(0), &y = arg(1);
      if (!x.valid || !y.valid) return;
      bool add = op.kind == OpKind::Add;
      out = {true, add ? b_.CreateAdd(x.base, y.base) : b_.CreateSub(x.base, y.base), {}};
      for (size_t j = 0; j < x.strides.size(); ++j)
        out.strides.push_back(add ? b_.CreateAdd(x.strides[j], y.strides[j])
                                  : b_.CreateSub(x.strides[j], y.strides[j]));
      return;
    }
    case OpKind::Mul:
    case OpKind::Shl: {
      const Affine &x = arg(0), &y = arg(1);
      if (!x.valid || !y.valid) return;
      auto uniform = [&](const Affine& a) {
        for (llvm::Value* s : a.strides)
          if (!is_const_int(s, 0)) return false;
        return true;
      };
      const Affine* var = &x;
      llvm::Value* scale = nullptr;
      if (op.kind == OpKind::Shl) {
        auto* c = llvm::dyn_cast<llvm::ConstantInt>(y.base);
        if (!uniform(y) || !c) return;
        scale = b_.getInt64(int64_t{1} << (c->getSExtValue() & (dtype_bits(t.dtype) - 1)));
      } else if (uniform(y)) {
        scale = y.base;
      } else if (uniform(x)) {
        var = &y;
        scale = x.base;
      } else {
        return;
      }
      out = {true, b_.CreateMul(var->base, scale), {}};
      for (llvm::Value* s : var->strides) out.strides.push_back(b_.CreateMul(s, scale));
      return;
    }
    default: return;
  }
}

llvm::Value* Lowering::element_ptr(int buffer_param, llvm::Value* index_i64) {
  return b_.CreateGEP(storage_type(k_.params[buffer_param].dtype), buffers_[buffer_param],
                      index_i64);
}

// Start offsets of each innermost row of an affine access (loads and stores
// use them with a unit last stride; prefetch steps by any).
std::vector<llvm::Value*> Lowering::row_bases(const Affine& a, const Shape& s) {
  int64_t rows = 1;
  for (size_t j = 0; j + 1 < s.size(); ++j) rows *= s[j];
  std::vector<llvm::Value*> out;
  std::vector<int64_t> coord(s.size(), 0);
  for (int64_t r = 0; r < rows; ++r) {
    llvm::Value* off = a.base;
    for (size_t j = 0; j + 1 < s.size(); ++j)
      if (coord[j]) off = b_.CreateAdd(off, b_.CreateMul(a.strides[j], b_.getInt64(coord[j])));
    out.push_back(off);
    for (int j = static_cast<int>(s.size()) - 2; j >= 0; --j) {
      if (++coord[j] < s[j]) break;
      coord[j] = 0;
    }
  }
  return out;
}

llvm::Value* Lowering::rows_mask(llvm::Value* mask, int64_t row, int64_t width) {
  std::vector<int> idx;
  for (int64_t j = 0; j < width; ++j) idx.push_back(static_cast<int>(row * width + j));
  return b_.CreateShuffleVector(mask, idx);
}

llvm::Value* Lowering::load(const Op& op) {
  const Type& rt = ty(op.result);
  DType dt = rt.dtype;
  int buf = static_cast<int>(op.ival);
  llvm::Type* st = storage_type(dt);
  llvm::Align align(dtype_bytes(dt));
  bool masked = op.args.size() == 3;
  llvm::Value* mask = masked ? v(op.args[1]) : nullptr;
  llvm::Value* other = masked ? to_storage(v(op.args[2]), dt) : nullptr;
  llvm::Value* off = v(op.args[0]);
  const Affine& a = affine_[op.args[0]];

  if (rt.is_scalar()) {
    llvm::Value* p = element_ptr(buf, a.base);
    if (!masked) return from_storage(b_.CreateAlignedLoad(st, p, align), dt);
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* yes = llvm::BasicBlock::Create(ctx_, "ld", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "ld.join", fn_);
    b_.CreateCondBr(mask, yes, join);
    b_.SetInsertPoint(yes);
    llvm::Value* x = b_.CreateAlignedLoad(st, p, align);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(st, 2);
    phi->addIncoming(x, yes);
    phi->addIncoming(other, from);
    return from_storage(phi, dt);
  }

  int64_t width = rt.shape.back();
  if (a.valid && is_const_int(a.strides.back(), 1)) {
    std::vector<llvm::Value*> parts;
    auto* row_ty = llvm::FixedVectorType::get(st, static_cast<unsigned>(width));
    std::vector<llvm::Value*> bases = row_bases(a, rt.shape);
    for (size_t r = 0; r < bases.size(); ++r) {
      llvm::Value* p = element_ptr(buf, bases[r]);
      if (!masked) {
        parts.push_back(b_.CreateAlignedLoad(row_ty, p, align));
      } else {
        parts.push_back(masked_row_load(row_ty, p, align, rows_mask(mask, r, width),
                                        rows_mask(other, r, width)));
      }
    }
    llvm::Value* all = parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b_, parts);
    return from_storage(all, dt);
  }
  // General case: one pointer per lane.
  llvm::Value* idx = b_.CreateSExt(off, i64_like(rt.shape));
  llvm::Value* ptrs = b_.CreateGEP(st, buffers_[buf], idx);
  llvm::Value* m =
      masked ? mask : llvm::Constant::getAllOnesValue(shaped(b_.getInt1Ty(), rt.shape));
  llvm::Type* vty = shaped(st, rt.shape);
  return from_storage(
      b_.CreateMaskedGather(vty, ptrs, align, m, masked ? other : llvm::PoisonValue::get(vty)), dt);
}

// One prefetch per element, its address from the affine form where known
// (constant offsets fold into the instruction). The GEP is not inbounds: a
// prefetch past the buffer is allowed and never faults. Locality 2 fetches
// into L2 (x86 prefetcht1): kernels prefetch a block of work ahead, and
// pulling that into the 32 KiB L1 evicts the block being worked on
// (attention_decode, Zen 4: t1 0.56-0.67 ms where t0 takes 0.75-0.78).
void Lowering::prefetch(const Op& op) {
  const Type& ot = ty(op.args[0]);
  const Affine& a = affine_[op.args[0]];
  int buf = static_cast<int>(op.ival);
  auto fetch = [&](llvm::Value* index) {
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                       {element_ptr(buf, index), b_.getInt32(0), b_.getInt32(2), b_.getInt32(1)});
  };
  if (a.valid && ot.is_scalar()) return fetch(a.base);
  if (a.valid) {
    for (llvm::Value* row : row_bases(a, ot.shape))
      for (int64_t j = 0; j < ot.shape.back(); ++j)
        fetch(j ? b_.CreateAdd(row, b_.CreateMul(a.strides.back(), b_.getInt64(j))) : row);
    return;
  }
  llvm::Value* off = b_.CreateSExt(v(op.args[0]), i64_like(ot.shape));
  if (ot.is_scalar()) return fetch(off);
  for (int64_t e = 0; e < ot.numel(); ++e)
    fetch(b_.CreateExtractElement(off, static_cast<uint64_t>(e)));
}

void Lowering::store(const Op& op) {
  const Type& vt = ty(op.args[1]);
  DType dt = vt.dtype;
  int buf = static_cast<int>(op.ival);
  llvm::Align align(dtype_bytes(dt));
  bool masked = op.args.size() == 3;
  llvm::Value* mask = masked ? v(op.args[2]) : nullptr;
  llvm::Value* val = to_storage(v(op.args[1]), dt);
  const Affine& a = affine_[op.args[0]];

  if (vt.is_scalar()) {
    llvm::Value* p = element_ptr(buf, a.base);
    if (!masked) {
      b_.CreateAlignedStore(val, p, align);
      return;
    }
    auto* yes = llvm::BasicBlock::Create(ctx_, "st", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "st.join", fn_);
    b_.CreateCondBr(mask, yes, join);
    b_.SetInsertPoint(yes);
    b_.CreateAlignedStore(val, p, align);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    return;
  }
  int64_t width = vt.shape.back();
  if (a.valid && is_const_int(a.strides.back(), 1)) {
    std::vector<llvm::Value*> bases = row_bases(a, vt.shape);
    for (size_t r = 0; r < bases.size(); ++r) {
      llvm::Value* p = element_ptr(buf, bases[r]);
      llvm::Value* row = bases.size() == 1 ? val : rows_mask(val, r, width);
      if (!masked)
        b_.CreateAlignedStore(row, p, align);
      else
        masked_row_store(row, p, align, rows_mask(mask, r, width));
    }
    return;
  }
  llvm::Value* idx = b_.CreateSExt(v(op.args[0]), i64_like(vt.shape));
  llvm::Value* ptrs = b_.CreateGEP(storage_type(dt), buffers_[buf], idx);
  llvm::Value* m =
      masked ? mask : llvm::Constant::getAllOnesValue(shaped(b_.getInt1Ty(), vt.shape));
  b_.CreateMaskedScatter(val, ptrs, align, m);
}

llvm::Value* Lowering::atomic(const Op& op) {
  const Type& vt = ty(op.args[1]);
  DType dt = vt.dtype;
  if (is_narrow_float(dt)) unsupported(op, "atomics on narrow floats (use f32)");
  bool f = is_float(dt);
  bool s = is_signed_int(dt);
  llvm::AtomicRMWInst::BinOp kind;
  switch (op.kind) {
    case OpKind::AtomicAdd: kind = f ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add; break;
    case OpKind::AtomicMax:
      kind = f ? llvm::AtomicRMWInst::FMax
               : (s ? llvm::AtomicRMWInst::Max : llvm::AtomicRMWInst::UMax);
      break;
    case OpKind::AtomicMin:
      kind = f ? llvm::AtomicRMWInst::FMin
               : (s ? llvm::AtomicRMWInst::Min : llvm::AtomicRMWInst::UMin);
      break;
    default: kind = llvm::AtomicRMWInst::Xchg;
  }
  if (dt == DType::boolean && kind != llvm::AtomicRMWInst::Xchg)
    unsupported(op, "arithmetic atomics on bool");
  int buf = static_cast<int>(op.ival);
  llvm::Type* st = storage_type(dt);
  bool masked = op.args.size() == 3;
  llvm::Value* off = v(op.args[0]);
  llvm::Value* val = to_storage(v(op.args[1]), dt);
  llvm::Value* mask = masked ? v(op.args[2]) : nullptr;
  int64_t n = vt.is_scalar() ? 1 : vt.numel();
  llvm::Value* result = vt.is_scalar() ? nullptr : llvm::PoisonValue::get(shaped(st, vt.shape));
  // Lane by lane in row-major order, as ir/op.h defines; masked-off lanes give 0.
  for (int64_t i = 0; i < n; ++i) {
    auto lane = [&](llvm::Value* x) {
      return vt.is_scalar() ? x : b_.CreateExtractElement(x, static_cast<uint64_t>(i));
    };
    llvm::Value* p = element_ptr(buf, b_.CreateSExt(lane(off), b_.getInt64Ty()));
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* yes = llvm::BasicBlock::Create(ctx_, "atomic", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "atomic.join", fn_);
    b_.CreateCondBr(masked ? lane(mask) : b_.getTrue(), yes, join);
    b_.SetInsertPoint(yes);
    llvm::Value* old = b_.CreateAtomicRMW(kind, p, lane(val), llvm::Align(dtype_bytes(dt)),
                                          llvm::AtomicOrdering::Monotonic);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(st, 2);
    phi->addIncoming(old, yes);
    phi->addIncoming(llvm::Constant::getNullValue(st), from);
    result = vt.is_scalar() ? static_cast<llvm::Value*>(phi)
                            : b_.CreateInsertElement(result, phi, static_cast<uint64_t>(i));
  }
  return from_storage(result, dt);
}

llvm::AllocaInst* Lowering::entry_alloca(llvm::Type* t) {
  IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  return eb.CreateAlloca(t);
}

// for (i = 0; i < n; ++i) body(i) as a real loop, so its size does not grow
// with the tile width.
void Lowering::lane_loop(int64_t n, const std::function<void(llvm::Value*)>& body) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx_, "lanes", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "lanes.done", fn_);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
  i->addIncoming(b_.getInt64(0), pre);
  body(i);
  llvm::Value* next = b_.CreateAdd(i, b_.getInt64(1));
  i->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpSLT(next, b_.getInt64(n)), loop, done);
  b_.SetInsertPoint(done);
}

llvm::Value* Lowering::masked_row_load(llvm::FixedVectorType* ty, llvm::Value* p, llvm::Align align,
                                       llvm::Value* mask, llvm::Value* passthru) {
  if (profile_.native_masked_memory) return b_.CreateMaskedLoad(ty, p, align, mask, passthru);
  unsigned n = ty->getNumElements();
  llvm::Type* et = ty->getElementType();
  llvm::AllocaInst* buf = entry_alloca(ty);
  llvm::AllocaInst* bits = entry_alloca(llvm::FixedVectorType::get(b_.getInt8Ty(), n));
  auto* all = llvm::BasicBlock::Create(ctx_, "mload.all", fn_);
  auto* partial = llvm::BasicBlock::Create(ctx_, "mload.partial", fn_);
  auto* join = llvm::BasicBlock::Create(ctx_, "mload.join", fn_);
  b_.CreateCondBr(b_.CreateAndReduce(mask), all, partial);
  b_.SetInsertPoint(all);
  llvm::Value* full = b_.CreateAlignedLoad(ty, p, align);
  b_.CreateBr(join);
  b_.SetInsertPoint(partial);
  b_.CreateStore(passthru, buf);
  b_.CreateStore(b_.CreateZExt(mask, bits->getAllocatedType()), bits);
  lane_loop(n, [&](llvm::Value* i) {
    auto* on = llvm::BasicBlock::Create(ctx_, "mload.lane", fn_);
    auto* next = llvm::BasicBlock::Create(ctx_, "mload.next", fn_);
    llvm::Value* m = b_.CreateLoad(b_.getInt8Ty(), b_.CreateGEP(b_.getInt8Ty(), bits, i));
    b_.CreateCondBr(b_.CreateICmpNE(m, b_.getInt8(0)), on, next);
    b_.SetInsertPoint(on);
    llvm::Value* x = b_.CreateAlignedLoad(et, b_.CreateGEP(et, p, i), align);
    b_.CreateStore(x, b_.CreateGEP(et, buf, i));
    b_.CreateBr(next);
    b_.SetInsertPoint(next);
  });
  llvm::Value* some = b_.CreateLoad(ty, buf);
  llvm::BasicBlock* partial_end = b_.GetInsertBlock();
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
  llvm::PHINode* phi = b_.CreatePHI(ty, 2);
  phi->addIncoming(full, all);
  phi->addIncoming(some, partial_end);
  return phi;
}

void Lowering::masked_row_store(llvm::Value* v, llvm::Value* p, llvm::Align align,
                                llvm::Value* mask) {
  if (profile_.native_masked_memory) {
    b_.CreateMaskedStore(v, p, align, mask);
    return;
  }
  auto* ty = llvm::cast<llvm::FixedVectorType>(v->getType());
  unsigned n = ty->getNumElements();
  llvm::Type* et = ty->getElementType();
  llvm::AllocaInst* buf = entry_alloca(ty);
  llvm::AllocaInst* bits = entry_alloca(llvm::FixedVectorType::get(b_.getInt8Ty(), n));
  auto* all = llvm::BasicBlock::Create(ctx_, "mstore.all", fn_);
  auto* partial = llvm::BasicBlock::Create(ctx_, "mstore.partial", fn_);
  auto* join = llvm::BasicBlock::Create(ctx_, "mstore.join", fn_);
  b_.CreateCondBr(b_.CreateAndReduce(mask), all, partial);
  b_.SetInsertPoint(all);
  b_.CreateAlignedStore(v, p, align);
  b_.CreateBr(join);
  b_.SetInsertPoint(partial);
  b_.CreateStore(v, buf);
  b_.CreateStore(b_.CreateZExt(mask, bits->getAllocatedType()), bits);
  lane_loop(n, [&](llvm::Value* i) {
    auto* on = llvm::BasicBlock::Create(ctx_, "mstore.lane", fn_);
    auto* next = llvm::BasicBlock::Create(ctx_, "mstore.next", fn_);
    llvm::Value* m = b_.CreateLoad(b_.getInt8Ty(), b_.CreateGEP(b_.getInt8Ty(), bits, i));
    b_.CreateCondBr(b_.CreateICmpNE(m, b_.getInt8(0)), on, next);
    b_.SetInsertPoint(on);
    llvm::Value* x = b_.CreateLoad(et, b_.CreateGEP(et, buf, i));
    b_.CreateAlignedStore(x, b_.CreateGEP(et, p, i), align);
    b_.CreateBr(next);
    b_.SetInsertPoint(next);
  });
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

void Lowering::lower_for(const Op& op) {
  llvm::Value* lo = v(op.args[0]);
  llvm::Value* hi = v(op.args[1]);
  llvm::Value* step = v(op.args[2]);
  DType t = ty(op.result).dtype;
  bool s = is_signed_int(t);
  llvm::Value* zero = llvm::Constant::getNullValue(lo->getType());
  llvm::Value* run = b_.CreateAnd(s ? b_.CreateICmpSGT(step, zero) : b_.CreateICmpNE(step, zero),
                                  s ? b_.CreateICmpSLT(lo, hi) : b_.CreateICmpULT(lo, hi));
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "for.exit", fn_);
  b_.CreateCondBr(run, body, exit);
  b_.SetInsertPoint(body);
  llvm::PHINode* iv = b_.CreatePHI(lo->getType(), 2, "i");
  iv->addIncoming(lo, pre);
  vals_[op.result] = iv;
  track_affine(op);
  lower_block(op.regions[0]);
  auto id = s ? llvm::Intrinsic::sadd_with_overflow : llvm::Intrinsic::uadd_with_overflow;
  llvm::Value* sum = b_.CreateIntrinsic(id, {lo->getType()}, {iv, step});
  llvm::Value* next = b_.CreateExtractValue(sum, 0);
  llvm::Value* ovf = b_.CreateExtractValue(sum, 1);
  llvm::Value* more =
      b_.CreateAnd(b_.CreateNot(ovf), s ? b_.CreateICmpSLT(next, hi) : b_.CreateICmpULT(next, hi));
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(more, body, exit);
  b_.SetInsertPoint(exit);
}

void Lowering::lower_if(const Op& op) {
  auto* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
  auto* else_bb = llvm::BasicBlock::Create(ctx_, "if.else", fn_);
  auto* join = llvm::BasicBlock::Create(ctx_, "if.join", fn_);
  b_.CreateCondBr(v(op.args[0]), then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  lower_block(op.regions[0]);
  b_.CreateBr(join);
  b_.SetInsertPoint(else_bb);
  if (op.regions.size() > 1) lower_block(op.regions[1]);
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

}  // namespace

std::unique_ptr<llvm::Module> lower_to_llvm(const Kernel& k, llvm::LLVMContext& ctx,
                                            const std::string& symbol, const CpuProfile& profile) {
  auto m = std::make_unique<llvm::Module>(symbol, ctx);
  Lowering(k, ctx, *m, profile).run(symbol);
  return m;
}

}  // namespace kiln
