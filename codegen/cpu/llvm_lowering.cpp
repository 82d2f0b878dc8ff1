#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/cpu/lowering.h"

namespace kiln {
namespace cpu_lowering {

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
  sym_vals_.assign(forms_.size(), nullptr);
  llvm::Value* bufs = b_.CreateLoad(ptr, b_.CreateStructGEP(args_ty_, args_, 0), "buffers");
  buffers_.assign(k_.params.size(), nullptr);
  for (size_t i = 0; i < k_.params.size(); ++i) {
    if (k_.params[i].kind != ParamKind::Buffer) continue;
    llvm::Value* slot = b_.CreateConstGEP1_32(ptr, bufs, buffer_slot(k_, static_cast<int>(i)));
    buffers_[i] = b_.CreateLoad(ptr, slot, k_.params[i].name);
  }
  for (const Type& t : k_.vars) vars_.push_back(b_.CreateAlloca(reg_type(t)));
  // A program's scratch arrays live in its frame, aligned for vector access.
  for (const Scratch& sc : k_.scratch) {
    llvm::AllocaInst* a = b_.CreateAlloca(
        llvm::ArrayType::get(storage_type(sc.dtype), static_cast<uint64_t>(sc.elems)), nullptr,
        sc.name);
    a->setAlignment(llvm::Align(64));
    scratch_.push_back(a);
  }

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
    case OpKind::Lookup: r = lookup(op); break;
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

llvm::AllocaInst* Lowering::entry_alloca(llvm::Type* t) {
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
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

// A counter narrower than 64 bits steps in 64, where i + step cannot wrap:
// the loop then has one exit and a plain compare, which LLVM keeps in
// registers (a wrap check was a second exit that cost every reduction
// loop's accumulators a register copy per step). An i64 counter keeps the
// wrap check.
void Lowering::lower_for(const Op& op) {
  llvm::Value* lo = v(op.args[0]);
  llvm::Value* hi = v(op.args[1]);
  llvm::Value* step = v(op.args[2]);
  DType t = ty(op.result).dtype;
  bool s = is_signed_int(t);
  llvm::Type* ct = lo->getType();
  llvm::Value* zero = llvm::Constant::getNullValue(ct);
  llvm::Value* run = b_.CreateAnd(s ? b_.CreateICmpSGT(step, zero) : b_.CreateICmpNE(step, zero),
                                  s ? b_.CreateICmpSLT(lo, hi) : b_.CreateICmpULT(lo, hi));
  const bool widened = ct->getIntegerBitWidth() < 64;
  auto counter = [&](llvm::Value* x) {
    if (!widened) return x;
    return s ? b_.CreateSExt(x, b_.getInt64Ty()) : b_.CreateZExt(x, b_.getInt64Ty());
  };
  llvm::Value *lo_c = counter(lo), *hi_c = counter(hi), *step_c = counter(step);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "for.exit", fn_);
  b_.CreateCondBr(run, body, exit);
  b_.SetInsertPoint(body);
  llvm::PHINode* ic = b_.CreatePHI(lo_c->getType(), 2, widened ? "i.wide" : "i");
  ic->addIncoming(lo_c, pre);
  vals_[op.result] = widened ? b_.CreateTrunc(ic, ct, "i") : static_cast<llvm::Value*>(ic);
  track_affine(op);
  lower_block(op.regions[0]);
  llvm::Value *next, *ovf = nullptr;
  if (widened) {
    next = b_.CreateAdd(ic, step_c, "", /*HasNUW=*/!s, /*HasNSW=*/s);
  } else {
    auto id = s ? llvm::Intrinsic::sadd_with_overflow : llvm::Intrinsic::uadd_with_overflow;
    llvm::Value* sum = b_.CreateIntrinsic(id, {ct}, {ic, step});
    next = b_.CreateExtractValue(sum, 0);
    ovf = b_.CreateExtractValue(sum, 1);
  }
  llvm::Value* more = s ? b_.CreateICmpSLT(next, hi_c) : b_.CreateICmpULT(next, hi_c);
  if (ovf) more = b_.CreateAnd(b_.CreateNot(ovf), more);
  ic->addIncoming(next, b_.GetInsertBlock());
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

}  // namespace cpu_lowering

std::unique_ptr<llvm::Module> lower_to_llvm(const Kernel& k, llvm::LLVMContext& ctx,
                                            const std::string& symbol, const CpuProfile& profile) {
  auto m = std::make_unique<llvm::Module>(symbol, ctx);
  cpu_lowering::Lowering(k, ctx, *m, profile).run(symbol);
  return m;
}

}  // namespace kiln
