// The CPU lowering's state and its parts, shared by the files that
// implement them (Halide's CodeGen_LLVM split by concern): the driver and
// control flow (llvm_lowering.cpp), elementwise arithmetic and conversions
// (lower_elementwise.cpp), reductions and dots (lower_reduce.cpp), and
// memory: affine offsets as vector loads and stores, gathers, atomics,
// constant-table lookups (lower_memory.cpp). Private to codegen/cpu; the
// interface is llvm_lowering.h.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <string>
#include <vector>

#include "codegen/cpu/llvm_lowering.h"
#include "ir/affine.h"
#include "ir/error.h"

namespace kiln::cpu_lowering {

inline bool is_const_int(llvm::Value* v, int64_t c) {
  auto* ci = llvm::dyn_cast<llvm::ConstantInt>(v);
  return ci && ci->getSExtValue() == c;
}

class Lowering {
 public:
  Lowering(const Kernel& k, llvm::LLVMContext& ctx, llvm::Module& m, const CpuProfile& profile)
      : k_(k), ctx_(ctx), m_(m), b_(ctx), profile_(profile), forms_(k) {}

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
      case DType::f8e4m3: return f8e4m3_to_f32(v);
      case DType::f8e5m2:  // the top byte of an f16, specials included
        return b_.CreateFPExt(b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, int_like(v, 16)), 8),
                                               shaped_like(v, b_.getHalfTy())),
                              shaped_like(v, b_.getFloatTy()));
      case DType::boolean: return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
      default: return v;
    }
  }

  // E4M3FN bytes widened without a call per byte (FP8 weights are read a
  // vector at a time): sign-extended to 16 bits and shifted by 7, a byte's
  // exponent and mantissa sit in an f16's, clearing bit 14 leaves the sign
  // alone on top, and that f16 is the value times 2^-8 (bias 15 for 7),
  // subnormals included. So: f16 -> f32 (one instruction with F16C), times
  // 256, and 0x7F, E4M3FN's only NaN, made a NaN of its sign.
  llvm::Value* f8e4m3_to_f32(llvm::Value* v) {
    llvm::Type* i16 = int_like(v, 16);
    llvm::Type* f32 = shaped_like(v, b_.getFloatTy());
    llvm::Value* h =
        b_.CreateAnd(b_.CreateShl(b_.CreateSExt(v, i16), 7), llvm::ConstantInt::get(i16, 0xBFFF));
    llvm::Value* f =
        b_.CreateFMul(b_.CreateFPExt(b_.CreateBitCast(h, shaped_like(v, b_.getHalfTy())), f32),
                      llvm::ConstantFP::get(f32, 256.0));
    llvm::Type* i32 = int_like(v, 32);
    llvm::Value* bits = b_.CreateBitCast(f, i32);
    llvm::Value* nan = b_.CreateICmpEQ(b_.CreateAnd(v, llvm::ConstantInt::get(v->getType(), 0x7F)),
                                       llvm::ConstantInt::get(v->getType(), 0x7F));
    bits = b_.CreateSelect(nan, b_.CreateOr(bits, llvm::ConstantInt::get(i32, 0x7FC00000)), bits);
    return b_.CreateBitCast(bits, f32);
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
  llvm::Value* maddubs_dot(llvm::Value* a, llvm::Value* b, int64_t n);
  llvm::Value* dot_groups(const Op& op, llvm::Value* acc = nullptr);
  llvm::Value* accumulated_dot_groups(const Op& op);
  llvm::Value* accumulate_dots(llvm::Value* acc, int id, bool& any_dot);
  llvm::Value* load(const Op& op);
  void store(const Op& op);
  llvm::Value* atomic(const Op& op);
  llvm::Value* lookup(const Op& op);
  llvm::Value* byte_table_lookup(const Op& op);
  llvm::Value* vbmi_byte_lookup(const Op& op);
  llvm::Value* vbmi_word_lookup(const Op& op);
  llvm::Value* register_table_lookup(const Op& op, int bits);
  // Whether value `id` is x & m for a constant m (through same-width
  // integer casts and reshapes): m, with x's id in *inner; else -1.
  int64_t masked_index(int id, int* inner);
  // Whether value `id` is a constant (through broadcasts): its value in
  // *c.
  bool const_int(int id, int64_t* c);
  llvm::Value* table_lookup(const Op& op);
  void lower_for(const Op& op);
  void lower_if(const Op& op);
  void track_affine(const Op& op);
  // Where memory `memory` (a buffer parameter or scratch_ref, ir/kernel.h)
  // starts, and its element at index_i64.
  llvm::Value* memory_base(int64_t memory) const;
  llvm::Value* element_ptr(int64_t memory, llvm::Value* index_i64);
  void prefetch(const Op& op);
  // An offsets value's affine form (ir/affine.h) as LLVM values: base +
  // sum_i stride_i * index_i over the tile's axes, in i64. Strides stay
  // values, so runtime row strides (row * n) still give contiguous rows; a
  // stride built from constants is a ConstantInt, which is how unit strides
  // are recognised.
  struct Affine {
    bool valid = false;
    llvm::Value* base = nullptr;
    std::vector<llvm::Value*> strides;
  };
  Affine affine(int value);
  llvm::Value* sym(AffineForms::Sym s);
  std::vector<llvm::Value*> row_bases(const Affine& a, const Shape& s);
  llvm::Value* rows_mask(llvm::Value* mask, int64_t row, int64_t width);

  llvm::Value* v(int id) { return vals_.at(id); }
  const Type& ty(int id) { return k_.values.at(id); }

  llvm::Value* masked_row_load(llvm::FixedVectorType* ty, llvm::Value* p, llvm::Align align,
                               llvm::Value* mask, llvm::Value* passthru);
  void masked_row_store(llvm::Value* v, llvm::Value* p, llvm::Align align, llvm::Value* mask);
  llvm::AllocaInst* entry_alloca(llvm::Type* t);
  void lane_loop(int64_t n, const std::function<void(llvm::Value*)>& body);
  // body(i) for each lane i < n whose bit of the i1 vector `mask` is set:
  // the partial path of masked_row_load / masked_row_store.
  void masked_lane_loop(llvm::Value* mask, unsigned n, const char* name,
                        const std::function<void(llvm::Value*)>& body);

  const Kernel& k_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  CpuProfile profile_;
  llvm::Function* fn_ = nullptr;
  llvm::Value* args_ = nullptr;
  llvm::Value* pid_[3] = {};
  llvm::StructType* args_ty_ = nullptr;
  std::vector<llvm::Value*> vals_;
  std::vector<const Op*> def_op_;  // defining op of each value, for row_of
  std::vector<int> uses_;          // operand uses of each value
  AffineForms forms_;
  std::vector<llvm::Value*> sym_vals_;  // by AffineForms::Sym, once emitted
  std::vector<llvm::AllocaInst*> vars_;
  std::vector<llvm::Value*> buffers_;       // by parameter index
  std::vector<llvm::AllocaInst*> scratch_;  // by scratch index
};

}  // namespace kiln::cpu_lowering
