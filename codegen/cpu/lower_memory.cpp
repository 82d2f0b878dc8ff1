// Memory: affine offsets (ir/affine.h) as plain or masked vector loads and
// stores of whole rows, gathers and scatters otherwise, prefetches,
// atomics, and reads from constant tables (Lookup).
#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <algorithm>
#include <functional>

#include "codegen/cpu/lowering.h"

namespace kiln::cpu_lowering {

// The affine form's expressions as i64 LLVM values, each emitted once, where
// the value it belongs to is defined (so it dominates every later use).
llvm::Value* Lowering::sym(AffineForms::Sym s) {
  if (sym_vals_[s]) return sym_vals_[s];
  const AffineForms::Node& n = forms_.node(s);
  llvm::Value* r = nullptr;
  switch (n.kind) {
    case AffineForms::Node::Kind::constant: r = b_.getInt64(n.c); break;
    case AffineForms::Node::Kind::value: {
      llvm::Value* x = vals_[n.value];
      r = is_signed_int(ty(n.value).dtype) ? b_.CreateSExt(x, b_.getInt64Ty())
                                           : b_.CreateZExt(x, b_.getInt64Ty());
      break;
    }
    case AffineForms::Node::Kind::add: r = b_.CreateAdd(sym(n.a), sym(n.b)); break;
    case AffineForms::Node::Kind::sub: r = b_.CreateSub(sym(n.a), sym(n.b)); break;
    case AffineForms::Node::Kind::mul: r = b_.CreateMul(sym(n.a), sym(n.b)); break;
  }
  return sym_vals_[s] = r;
}

void Lowering::track_affine(const Op& op) {
  const AffineForms::Form& f = forms_.of(op.result);
  if (!f.valid) return;
  sym(f.base);
  for (AffineForms::Sym s : f.strides) sym(s);
}

Lowering::Affine Lowering::affine(int value) {
  const AffineForms::Form& f = forms_.of(value);
  if (!f.valid) return {};
  Affine a{true, sym(f.base), {}};
  for (AffineForms::Sym s : f.strides) a.strides.push_back(sym(s));
  return a;
}

llvm::Value* Lowering::memory_base(int64_t memory) const {
  return is_scratch_ref(memory) ? scratch_[scratch_index(memory)] : buffers_[memory];
}

llvm::Value* Lowering::element_ptr(int64_t memory, llvm::Value* index_i64) {
  return b_.CreateGEP(storage_type(memory_dtype(k_, memory)), memory_base(memory), index_i64);
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
  const Affine a = affine(op.args[0]);

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
  llvm::Value* ptrs = b_.CreateGEP(st, memory_base(buf), idx);
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
  const Affine a = affine(op.args[0]);
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
  const Affine a = affine(op.args[0]);

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
  llvm::Value* ptrs = b_.CreateGEP(storage_type(dt), memory_base(buf), idx);
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

// A table of at most 16 bytes indexed by bytes is one byte shuffle per
// vector register with the table in a register (x86 pshufb, AArch64 tbl);
// any other table is read from memory.
llvm::Value* Lowering::lookup(const Op& op) {
  const Type& rt = ty(op.result);
  bool bytes = !rt.is_scalar() && dtype_bits(ty(op.args[0]).dtype) == 8 &&
               dtype_bits(rt.dtype) == 8 && op.ints.size() <= 16;
  if (bytes)
    if (llvm::Value* r = vbmi_byte_lookup(op)) return r;
  if (bytes && (profile_.x86_pshufb_bits > 0 || profile_.aarch64_tbl)) return byte_table_lookup(op);
  if (!rt.is_scalar() && ty(op.args[0]).dtype == DType::u8 && dtype_bits(rt.dtype) == 16)
    if (llvm::Value* r = vbmi_word_lookup(op)) return r;
  // Up to 16 (8) entries: one vpermd; on AVX-512 up to 256: a vpermi2d per
  // 32 entries and a select tree on the index's high bits, which beats a
  // gather from a table in L1 (Zen 4: AURA's 8-bit codebook, 2.6x).
  const int64_t entries = static_cast<int64_t>(op.ints.size());
  bool dwords = !rt.is_scalar() && dtype_bits(ty(op.args[0]).dtype) == 32 &&
                dtype_bits(rt.dtype) == 32 &&
                (entries <= profile_.x86_permd_entries ||
                 (profile_.x86_permd_entries == 16 && entries <= 256));
  if (dwords) return register_table_lookup(op, 32);
  // 16-bit entries (AVX-512BW): vpermi2w per 64 entries, 32 indices at a
  // time (AURA's 8-bit codebook as f16: 4 permutes and 3 selects per 32).
  bool words = !rt.is_scalar() && dtype_bits(ty(op.args[0]).dtype) == 32 &&
               dtype_bits(rt.dtype) == 16 && entries <= 256 && profile_.x86_permw;
  if (words) return register_table_lookup(op, 16);
  return table_lookup(op);
}

int64_t Lowering::masked_index(int id, int* inner) {
  auto int32 = [&](int v) {
    DType t = ty(v).dtype;
    return !is_float(t) && t != DType::boolean && dtype_bits(t) == 32;
  };
  const Op* d = def_op_[id];
  // Same-width casts and reshapes keep every element's bits and place.
  while (d && (d->kind == OpKind::Reshape || d->kind == OpKind::Cast) && int32(d->args[0]) &&
         int32(id)) {
    id = d->args[0];
    d = def_op_[id];
  }
  if (!d || d->kind != OpKind::And) return -1;
  for (int side = 0; side < 2; ++side) {
    int64_t c = -1;
    if (const_int(d->args[side], &c) && c >= 0) {
      *inner = d->args[1 - side];
      return c;
    }
  }
  return -1;
}

bool Lowering::const_int(int id, int64_t* c) {
  const Op* d = def_op_[id];
  while (d && d->kind == OpKind::Broadcast) d = def_op_[d->args[0]];
  if (!d || d->kind != OpKind::Const) return false;
  *c = d->ival;
  return true;
}

namespace {
// fn applied to each 64 lanes of the n (a multiple of 64) indices idx, the
// results concatenated and bitcast to `want`: the VBMI lookups' frame.
llvm::Value* by_64_lanes(llvm::IRBuilder<>& b, llvm::Value* idx, int64_t n, llvm::Type* want,
                         const std::function<llvm::Value*(llvm::Value*)>& fn) {
  std::vector<llvm::Value*> parts;
  for (int64_t c = 0; c < n; c += 64) {
    std::vector<int> chunk;
    for (int64_t j = 0; j < 64; ++j) chunk.push_back(static_cast<int>(c + j));
    parts.push_back(fn(n == 64 ? idx : b.CreateShuffleVector(idx, chunk)));
  }
  llvm::Value* all = parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b, parts);
  return all->getType() == want ? all : b.CreateBitCast(all, want);
}
}  // namespace

// vpermb reads an index byte's low 6 bits, so a table of up to 16 bytes
// repeated with period p = 2^b fills its 64 bytes, and an index that is a
// b-bit field of a byte x needs no work of its own: x & (p - 1) reads x
// itself, and an unsigned x >> (8 - b) reads the 16-bit shift that stands
// in for the missing byte shift, without the mask after it. A 4-bit code's
// low and high nibbles (IQ4_NL, IQ4_XS, MXFP4) then take 1 and 2
// instructions, against 2 and 3 with pshufb (which also needs bit 7 clear).
// nullptr where that does not apply.
llvm::Value* Lowering::vbmi_byte_lookup(const Op& op) {
  const int64_t n = ty(op.result).numel(), size = static_cast<int64_t>(op.ints.size());
  if (!profile_.x86_vbmi || n % 64) return nullptr;
  llvm::Value* raw = nullptr;
  int64_t period = 0;
  int inner = -1;
  const int64_t m = masked_index(op.args[0], &inner);
  const Op* d = def_op_[op.args[0]];
  int64_t s = 0;
  if (m >= 0 && m < 64 && ((m + 1) & m) == 0 && dtype_bits(ty(inner).dtype) == 8) {
    period = m + 1;
    raw = v(inner);
  } else if (d && d->kind == OpKind::Shr && !is_signed_int(ty(d->args[0]).dtype) &&
             const_int(d->args[1], &s) && s >= 2 && s < 8) {
    period = int64_t{1} << (8 - s);
    auto* vt = llvm::cast<llvm::FixedVectorType>(v(d->args[0])->getType());
    auto* words = llvm::FixedVectorType::get(b_.getInt16Ty(), vt->getNumElements() / 2);
    raw = b_.CreateBitCast(
        b_.CreateLShr(b_.CreateBitCast(v(d->args[0]), words), static_cast<uint64_t>(s)), vt);
  }
  if (!raw || size > period) return nullptr;
  std::vector<llvm::Constant*> entries;
  for (int64_t i = 0; i < 64; ++i) {
    const int64_t e = i % period;
    entries.push_back(b_.getInt8(e < size ? static_cast<uint8_t>(op.ints[e]) : 0));
  }
  llvm::Value* table = llvm::ConstantVector::get(entries);
  return by_64_lanes(b_, raw, n, reg_type(ty(op.result)), [&](llvm::Value* part) {
    return b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512_permvar_qi_512, {}, {table, part});
  });
}

// Up to 256 16-bit entries over u8 indices (AURA's 8-bit codebook as f16),
// 64 indices at a time: the entries' low and high bytes as two byte
// tables, each a vpermi2b per 128 entries and a select on the index's bit
// 7, then interleaved into words. That is 4 permutes and 2 selects per 64
// indices, where indices widened for vpermi2w take 8 permutes and 6
// selects after the widening. Entries past the table read 0 (the byte
// tables hold zeros there). nullptr where that does not apply.
llvm::Value* Lowering::vbmi_word_lookup(const Op& op) {
  const int64_t n = ty(op.result).numel(), size = static_cast<int64_t>(op.ints.size());
  if (!profile_.x86_vbmi || n % 64 || size > 256) return nullptr;
  // table[half][q]: byte `half` of entries 64 q .. 64 q + 63.
  llvm::Value* table[2][4];
  for (int half = 0; half < 2; ++half)
    for (int q = 0; q < 4; ++q) {
      std::vector<llvm::Constant*> entries;
      for (int64_t i = 64 * q; i < 64 * q + 64; ++i) {
        const uint64_t e = i < size ? static_cast<uint64_t>(op.ints[i]) : 0;
        entries.push_back(b_.getInt8(static_cast<uint8_t>(e >> (8 * half))));
      }
      table[half][q] = llvm::ConstantVector::get(entries);
    }
  std::vector<int> interleave;
  for (int j = 0; j < 64; ++j) interleave.push_back(j), interleave.push_back(64 + j);
  return by_64_lanes(b_, v(op.args[0]), n, reg_type(ty(op.result)), [&](llvm::Value* part) {
    llvm::Value* upper = b_.CreateICmpSLT(part, llvm::Constant::getNullValue(part->getType()));
    llvm::Value* bytes[2];
    for (int half = 0; half < 2; ++half) {
      auto look = [&](int q) {
        return b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512_vpermi2var_qi_512, {},
                                  {table[half][q], part, table[half][q + 1]});
      };
      bytes[half] = b_.CreateSelect(upper, look(2), look(0));
    }
    return b_.CreateBitCast(b_.CreateShuffleVector(bytes[0], bytes[1], interleave),
                            llvm::FixedVectorType::get(b_.getInt16Ty(), 64));
  });
}

// A table in registers of w entries of `bits` bits (32: w = 16 on AVX-512,
// 8 on AVX2; 16: w = 32), looked up w indices at a time: one register by a
// permute that reads index % w (vpermd, vpermw), more by a two-register
// permute per pair (vpermi2d, vpermi2w: index % 2w) and a tree of selects
// on the index's higher bits. An index outside the table is then set to 0
// (unsigned compare: negative ones too). A masked field (x & m, m + 1 a
// power of two up to w) needs neither its mask nor the range check: the
// permute reads x's low bits itself, and the table repeats every m + 1
// entries (zeros past its size).
llvm::Value* Lowering::register_table_lookup(const Op& op, int bits) {
  const bool dw = bits == 32;
  const int64_t w = dw ? profile_.x86_permd_entries : 32, n = ty(op.result).numel();
  const int64_t size = static_cast<int64_t>(op.ints.size());
  const int64_t padded = (n + w - 1) / w * w;
  int64_t regs = 1;  // registers of w entries: 1, 2, 4 ..
  while (regs * w < size) regs *= 2;
  int inner = -1;
  const int64_t m = regs == 1 ? masked_index(op.args[0], &inner) : -1;
  const bool periodic = m >= 0 && m + 1 <= w && ((m + 1) & m) == 0 && size <= m + 1;
  llvm::IntegerType* et = b_.getIntNTy(static_cast<unsigned>(bits));
  std::vector<llvm::Value*> table;
  for (int64_t r = 0; r < regs; ++r) {
    std::vector<llvm::Constant*> entries;
    for (int64_t i = r * w; i < (r + 1) * w; ++i) {
      const int64_t e = periodic ? (i & m) : i;
      const uint64_t bits_of = e < size ? static_cast<uint64_t>(op.ints[e]) : 0;
      entries.push_back(llvm::ConstantInt::get(et, bits_of & ((uint64_t{1} << bits) - 1)));
    }
    table.push_back(llvm::ConstantVector::get(entries));
  }
  auto lanes = [&](uint64_t c) {
    return b_.CreateVectorSplat(static_cast<unsigned>(w), llvm::ConstantInt::get(et, c));
  };
  auto look = [&](llvm::Value* part) -> llvm::Value* {
    if (regs == 1) {
      auto id = !dw       ? llvm::Intrinsic::x86_avx512_permvar_hi_512
                : w == 16 ? llvm::Intrinsic::x86_avx512_permvar_si_512
                          : llvm::Intrinsic::x86_avx2_permd;
      return b_.CreateIntrinsic(id, {}, {table[0], part});
    }
    auto id = dw ? llvm::Intrinsic::x86_avx512_vpermi2var_d_512
                 : llvm::Intrinsic::x86_avx512_vpermi2var_hi_512;
    std::vector<llvm::Value*> level;
    for (int64_t r = 0; r < regs; r += 2)
      level.push_back(b_.CreateIntrinsic(id, {}, {table[r], part, table[r + 1]}));
    for (uint64_t bit = 2 * static_cast<uint64_t>(w); level.size() > 1; bit *= 2) {
      llvm::Value* hi = b_.CreateICmpNE(b_.CreateAnd(part, lanes(bit)), lanes(0));
      std::vector<llvm::Value*> next;
      for (size_t i = 0; i < level.size(); i += 2)
        next.push_back(b_.CreateSelect(hi, level[i + 1], level[i]));
      level = next;
    }
    return level[0];
  };
  llvm::Value* idx = v(periodic ? inner : op.args[0]);
  if (padded != n) {
    std::vector<int> pad;
    for (int64_t j = 0; j < padded; ++j) pad.push_back(static_cast<int>(std::min(j, n)));
    idx = b_.CreateShuffleVector(idx, llvm::Constant::getNullValue(idx->getType()), pad);
  }
  std::vector<llvm::Value*> parts;
  for (int64_t c = 0; c < padded; c += w) {
    std::vector<int> chunk;
    for (int64_t j = 0; j < w; ++j) chunk.push_back(static_cast<int>(c + j));
    llvm::Value* index = padded == w ? idx : b_.CreateShuffleVector(idx, chunk);  // 32-bit
    llvm::Value* part =
        dw ? index
           : b_.CreateTrunc(index, llvm::FixedVectorType::get(et, static_cast<unsigned>(w)));
    llvm::Value* got = look(part);
    if (!periodic) {
      llvm::Value* inside = b_.CreateICmpULT(
          index,
          b_.CreateVectorSplat(static_cast<unsigned>(w), b_.getInt32(static_cast<uint32_t>(size))));
      got = b_.CreateSelect(inside, got, llvm::Constant::getNullValue(got->getType()));
    }
    parts.push_back(got);
  }
  llvm::Value* all = parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b_, parts);
  if (padded != n) {
    std::vector<int> first;
    for (int64_t j = 0; j < n; ++j) first.push_back(static_cast<int>(j));
    all = b_.CreateShuffleVector(all, first);
  }
  llvm::Type* want = reg_type(ty(op.result));
  return all->getType() == want ? all : b_.CreateBitCast(all, want);
}

// The table, zero-padded to 16 bytes (an index in [size, 16) reads 0),
// fills every 128-bit lane of the shuffle's table operand; the index tile
// goes through in chunks of the widest shuffle that fits.
llvm::Value* Lowering::byte_table_lookup(const Op& op) {
  const bool x86 = profile_.x86_pshufb_bits > 0;
  const int64_t n = ty(op.result).numel(), padded = (n + 15) / 16 * 16;
  std::vector<llvm::Constant*> entries(16, b_.getInt8(0));
  for (size_t i = 0; i < op.ints.size(); ++i)
    entries[i] = b_.getInt8(static_cast<uint8_t>(op.ints[i]));
  auto table = [&](int64_t bytes) {
    std::vector<llvm::Constant*> t;
    for (int64_t j = 0; j < bytes; ++j) t.push_back(entries[j % 16]);
    return llvm::ConstantVector::get(t);
  };
  llvm::Value* idx = v(op.args[0]);
  // pshufb gives 0 where an index byte has bit 7 set and reads entry
  // index & 15 otherwise. Adding 0x70 with unsigned saturation keeps 0..15
  // below 0x80 with their low bits and lifts every index from 16 up to 0x80
  // or more: the out-of-range rule in one instruction. tbl already gives 0
  // for an index past its 16 bytes.
  if (x86)
    idx = b_.CreateBinaryIntrinsic(llvm::Intrinsic::uadd_sat, idx,
                                   llvm::ConstantInt::get(idx->getType(), 0x70));
  if (padded != n) {
    std::vector<int> pad;
    for (int64_t j = 0; j < padded; ++j) pad.push_back(static_cast<int>(std::min(j, n)));
    idx = b_.CreateShuffleVector(idx, llvm::Constant::getNullValue(idx->getType()), pad);
  }
  const int64_t widest = x86 ? profile_.x86_pshufb_bits / 8 : 16;
  std::vector<llvm::Value*> parts;
  for (int64_t c = 0; c < padded;) {
    int64_t w = widest;
    while (w > padded - c) w /= 2;
    std::vector<int> chunk;
    for (int64_t j = 0; j < w; ++j) chunk.push_back(static_cast<int>(c + j));
    llvm::Value* part = w == padded ? idx : b_.CreateShuffleVector(idx, chunk);
    if (x86) {
      auto id = w == 64   ? llvm::Intrinsic::x86_avx512_pshuf_b_512
                : w == 32 ? llvm::Intrinsic::x86_avx2_pshuf_b
                          : llvm::Intrinsic::x86_ssse3_pshuf_b_128;
      parts.push_back(b_.CreateIntrinsic(id, {}, {table(w), part}));
    } else {
      parts.push_back(b_.CreateIntrinsic(llvm::Intrinsic::aarch64_neon_tbl1, {part->getType()},
                                         {table(16), part}));
    }
    c += w;
  }
  llvm::Value* all = parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b_, parts);
  if (padded == n) return all;
  std::vector<int> first;
  for (int64_t j = 0; j < n; ++j) first.push_back(static_cast<int>(j));
  return b_.CreateShuffleVector(all, first);
}

// A private constant array with a zero entry appended. An index outside
// the table is clamped to that entry by an unsigned min (a negative index
// is a huge unsigned one), so every read is in bounds and needs no mask: a
// gather, or one load for a scalar.
llvm::Value* Lowering::table_lookup(const Op& op) {
  const Type& it = ty(op.args[0]);
  const Type& rt = ty(op.result);
  llvm::Type* et = elem_type(rt.dtype);
  std::vector<llvm::Constant*> entries;
  for (int64_t e : op.ints)
    entries.push_back(
        llvm::ConstantInt::get(et, static_cast<uint64_t>(e), is_signed_int(rt.dtype)));
  entries.push_back(llvm::ConstantInt::get(et, 0));
  auto* arr = llvm::ArrayType::get(et, entries.size());
  auto* table = new llvm::GlobalVariable(m_, arr, true, llvm::GlobalValue::PrivateLinkage,
                                         llvm::ConstantArray::get(arr, entries), "lookup.table");
  table->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  // 32-bit offsets unless the index is 64-bit: twice the gather lanes per
  // register.
  llvm::Value* idx = v(op.args[0]);
  llvm::Type* wide =
      shaped_like(idx, dtype_bits(it.dtype) > 32 ? b_.getInt64Ty() : b_.getInt32Ty());
  idx = is_signed_int(it.dtype) ? b_.CreateSExt(idx, wide) : b_.CreateZExt(idx, wide);
  llvm::Value* at = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, idx,
                                             llvm::ConstantInt::get(wide, op.ints.size()));
  llvm::Value* ptrs = b_.CreateInBoundsGEP(et, table, at);
  llvm::Align align(dtype_bytes(rt.dtype));
  if (rt.is_scalar()) return b_.CreateAlignedLoad(et, ptrs, align);
  return b_.CreateMaskedGather(reg_type(rt), ptrs, align);
}

void Lowering::masked_lane_loop(llvm::Value* mask, unsigned n, const char* name,
                                const std::function<void(llvm::Value*)>& body) {
  // The bits go through memory as bytes so the loop can index them.
  llvm::AllocaInst* bits = entry_alloca(llvm::FixedVectorType::get(b_.getInt8Ty(), n));
  b_.CreateStore(b_.CreateZExt(mask, bits->getAllocatedType()), bits);
  const std::string prefix(name);
  lane_loop(n, [&](llvm::Value* i) {
    auto* on = llvm::BasicBlock::Create(ctx_, prefix + ".lane", fn_);
    auto* next = llvm::BasicBlock::Create(ctx_, prefix + ".next", fn_);
    llvm::Value* m = b_.CreateLoad(b_.getInt8Ty(), b_.CreateGEP(b_.getInt8Ty(), bits, i));
    b_.CreateCondBr(b_.CreateICmpNE(m, b_.getInt8(0)), on, next);
    b_.SetInsertPoint(on);
    body(i);
    b_.CreateBr(next);
    b_.SetInsertPoint(next);
  });
}

llvm::Value* Lowering::masked_row_load(llvm::FixedVectorType* ty, llvm::Value* p, llvm::Align align,
                                       llvm::Value* mask, llvm::Value* passthru) {
  if (profile_.native_masked_memory) return b_.CreateMaskedLoad(ty, p, align, mask, passthru);
  unsigned n = ty->getNumElements();
  llvm::Type* et = ty->getElementType();
  llvm::AllocaInst* buf = entry_alloca(ty);
  auto* all = llvm::BasicBlock::Create(ctx_, "mload.all", fn_);
  auto* partial = llvm::BasicBlock::Create(ctx_, "mload.partial", fn_);
  auto* join = llvm::BasicBlock::Create(ctx_, "mload.join", fn_);
  b_.CreateCondBr(b_.CreateAndReduce(mask), all, partial);
  b_.SetInsertPoint(all);
  llvm::Value* full = b_.CreateAlignedLoad(ty, p, align);
  b_.CreateBr(join);
  b_.SetInsertPoint(partial);
  b_.CreateStore(passthru, buf);
  masked_lane_loop(mask, n, "mload", [&](llvm::Value* i) {
    llvm::Value* x = b_.CreateAlignedLoad(et, b_.CreateGEP(et, p, i), align);
    b_.CreateStore(x, b_.CreateGEP(et, buf, i));
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
  auto* all = llvm::BasicBlock::Create(ctx_, "mstore.all", fn_);
  auto* partial = llvm::BasicBlock::Create(ctx_, "mstore.partial", fn_);
  auto* join = llvm::BasicBlock::Create(ctx_, "mstore.join", fn_);
  b_.CreateCondBr(b_.CreateAndReduce(mask), all, partial);
  b_.SetInsertPoint(all);
  b_.CreateAlignedStore(v, p, align);
  b_.CreateBr(join);
  b_.SetInsertPoint(partial);
  b_.CreateStore(v, buf);
  masked_lane_loop(mask, n, "mstore", [&](llvm::Value* i) {
    llvm::Value* x = b_.CreateLoad(et, b_.CreateGEP(et, buf, i));
    b_.CreateAlignedStore(x, b_.CreateGEP(et, p, i), align);
  });
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

}  // namespace kiln::cpu_lowering
