// The operations of the IR and their semantics.
//
// This header is the contract between the DSL, the verifier, the reference
// interpreter and every code generator: each OpKind below documents its
// operands, attributes and exact meaning. The interpreter implements these
// words literally; backends must agree with it.
//
// General rules
// - Values are SSA: each op defines at most one value (`Op::result`), whose
//   type is `Kernel::values[result]`. Elementwise ops require operands of
//   identical shape (the DSL inserts Broadcast ops); all operands of an
//   arithmetic op share one dtype (the DSL inserts nothing: mixing dtypes is
//   a build-time error, casts are explicit).
// - Narrow floats (f16, bf16, fp8) are computed in f32 and the result is
//   rounded to the dtype after every op (round to nearest even; fp8
//   saturates to the largest finite value). f32 is computed in f32.
// - Integer arithmetic wraps (two's complement). Integer Div/Rem truncate
//   toward zero; dividing by zero yields 0 (so masked-off lanes are safe).
//   Shift amounts are taken modulo the bit width; Shr is arithmetic for
//   signed dtypes and logical for unsigned ones.
// - Float Min/Max return the non-NaN operand when one is NaN (IEEE minNum /
//   maxNum). Comparisons are ordered (false on NaN) except Ne (true on NaN).
// - Cast float->int truncates toward zero and saturates; NaN becomes 0.
//   Cast int->float rounds to nearest even. Cast x->bool is x != 0;
//   bool->x is 0 or 1. Bitcast reinterprets bits: between equal-width types
//   elementwise; between widths, as a view of each innermost row's bytes
//   (little-endian, like numpy's .view): u8[r, 2] -> u16[r, 1], i32[4] -> u8[16].
// - Memory: a buffer parameter is a flat array of its dtype. Offsets are
//   element indices (i32 or i64 tiles). A masked-off lane never touches
//   memory. An unmasked out-of-range access is an error in the interpreter
//   and undefined in compiled code (launches check buffer sizes up front).
//   A scratch array (Kernel::scratch) is memory too, private to each
//   program and undefined at its start; Load and Store reach it (not the
//   atomics or Prefetch), and within a program every access sees the
//   stores before it, whichever lanes made them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/type.h"

namespace kiln {

enum class OpKind : uint8_t {
  // ---- creation ------------------------------------------------------------
  Const,        // () -> T[shape]: every element is the constant; the value is
                // `fval` for float dtypes, `ival` for ints and bool.
  Arange,       // () -> i32[n]: 0, 1, ..., n-1 (n = result shape[0]).
  ProgramId,    // () -> i32: this program instance's index along axis `ival`
                // (0..2).
  NumPrograms,  // () -> i32: the grid size along axis `ival`.
  Param,        // () -> scalar: the runtime scalar parameter `ival` (an index
                // into Kernel::params, which must be a Scalar param).
  Broadcast,    // (x) -> x.dtype[shape]: numpy broadcasting of x to the
                // result shape (right-aligned, size-1 dims stretch).
  Reshape,      // (x) -> same dtype, same element count, row-major order.
  Transpose,    // (x: rank 2 [a,b]) -> [b,a].
  Slice,        // (x) -> x[ints[0]:ints[0]+shape[0], ints[1]:...] with step 1;
                // `ints` holds one start per axis.

  // ---- elementwise: (a, b) -> same type --------------------------------------
  Add,
  Sub,
  Mul,
  Div,
  Rem,
  Min,
  Max,
  And,
  Or,
  Xor,  // ints and bool
  Shl,
  Shr,  // ints

  // ---- comparisons: (a, b) -> bool of the same shape ------------------------
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,

  // ---- elementwise unary: (x) -> same type ----------------------------------
  Neg,
  Abs,
  Not,  // bitwise not for ints, logical not for bool
  Floor,
  Exp,
  Exp2,
  Log,
  Log2,
  Sqrt,
  Rsqrt,
  Tanh,
  Sigmoid,
  Erf,  // floats only

  // ---- other elementwise ------------------------------------------------------
  Fma,      // (a, b, c) -> a * b + c, one rounding for f32.
  Select,   // (cond: bool, a, b) -> cond ? a : b, per element.
  Cast,     // (x) -> result dtype, same shape (rules above).
  Bitcast,  // (x) -> same bits in the result dtype; a width change rescales
            // the last axis (see above).
  Lookup,   // (index: any int dtype) -> T[index.shape], T the result dtype
            // (an int dtype): table[index] per element, the table held in
            // `ints` (1 to kMaxLookupEntries entries, each a value of T; a
            // 64-bit grid's words are i64 bit patterns). An index outside
            // [0, table size) gives 0, so garbage in masked-off lanes is
            // safe. How non-linear codebooks (IQ4_NL, MXFP4, the IQ2/IQ3
            // grids) decode; each backend picks its instructions (a CPU looks
            // a byte table of up to 16 entries up with x86 pshufb or AArch64
            // tbl, anything else is a read from a constant array).

  // ---- memory (`ival` = buffer parameter index, or a scratch array's
  //      scratch_ref, ir/kernel.h) ---------------------------------------------
  Load,       // (offsets [, mask, other]) -> buf.dtype[offsets.shape]:
              // masked-off lanes take `other` (same type as the result).
  Store,      // (offsets, value [, mask]) -> nothing.
  AtomicAdd,  // (offsets, value [, mask]) -> old values; performed element
  AtomicMax,  // by element in row-major order; masked-off lanes return 0.
  AtomicMin,
  AtomicXchg,
  Prefetch,  // (offsets) -> nothing: a hint that the elements at `offsets`
             // will be read soon (a CPU emits one prefetch per element, so
             // pass one offset per cache line). No effect on any result;
             // offsets outside the buffer are allowed and ignored.

  // ---- reductions (`ival` = axis) ------------------------------------------
  ReduceSum,  // (x) -> x with axis removed. f16/bf16/fp8 accumulate in f32;
  ReduceMax,  // ints wrap. Order of float summation is unspecified (backends
  ReduceMin,  // may use a tree), so compare sums with a tolerance.
  ArgMax,     // (x) -> i32 index of the largest element along the axis; the
              // first one on ties; NaNs are ignored (all NaN -> 0).
  Dot,        // (a: [M,K], b: [K,N], acc: [M,N]) -> acc + a @ b.
              // float a/b of one dtype with f32 acc, or i8/u8 a with i8 b and
              // i32 acc (exact, wrapping).
  DotGroups,  // (a: u8|i8 [.., 4k], b: i8 [.., 4k]) -> i32 [.., k]: the sum of
              // each group of 4 adjacent products, a zero- (u8) or sign- (i8)
              // extended; exact. The grouped 8-bit dot every int8 GEMV is
              // made of; each backend picks its instruction (x86 vpdpbusd or
              // vpmaddwd, AArch64 sdot, CUDA dp4a). Kernels write it, or
              // recognize_dot_groups (ir/passes.h) finds it in
              // sum(reshape(cast(a) * cast(b), [.., 4]), last).
              // (a: i16 [.., 2k], b: i16 [.., 2k]) -> i32 [.., k]: the same
              // over groups of 2 (x86 vpdpwssd or vpmaddwd); wraps only for
              // (-2^15)^2 * 2. A group fills 32 bits either way
              // (dot_group_size).

  // ---- control flow -----------------------------------------------------------
  For,       // (lo, hi, step: one int dtype) regions[0] = body. `result` is
             // the induction variable, visible only inside the body. Runs
             // i = lo; i < hi; i += step; no iterations when step <= 0.
  If,        // (cond: bool scalar) regions[0] = then, regions[1] = else.
  VarDecl,   // (init) declares mutable variable `ival` (Kernel::vars) with
             // the initial value. Variables live until the end of the kernel.
  VarLoad,   // () -> the variable's current value.
  VarStore,  // (value) -> nothing.
};

std::string_view op_name(OpKind k);
bool try_parse_op_name(std::string_view name, OpKind* out);

bool is_binary_elementwise(OpKind k);  // Add..Shr
bool is_comparison(OpKind k);          // Eq..Ge
bool is_unary_elementwise(OpKind k);   // Neg..Erf
bool is_float_only_unary(OpKind k);    // Exp..Erf
bool is_reduction(OpKind k);           // ReduceSum..ArgMax
bool is_atomic(OpKind k);              // AtomicAdd..AtomicXchg
bool has_side_effects(OpKind k);       // Store, atomics, Prefetch, VarDecl, VarStore, For, If
// Products per DotGroups group for operand dtypes a and b: 4 (u8|i8 with
// i8), 2 (i16 with i16), 0 where DotGroups does not take them.
int dot_group_size(DType a, DType b);

// The most entries a Lookup table may hold: the largest quantization grid
// (IQ2_S, 1024 entries) with room to spare, while the constant data a
// kernel carries stays small.
constexpr size_t kMaxLookupEntries = 4096;

struct Block;

struct Op {
  OpKind kind = OpKind::Const;
  int result = -1;            // value id defined by this op, -1 if none
  std::vector<int> args;      // operand value ids
  int64_t ival = 0;           // axis, index, integer constant (see OpKind)
  double fval = 0;            // float constant
  std::vector<int64_t> ints;  // Slice starts, Lookup table
  std::vector<Block> regions;
};

struct Block {
  std::vector<Op> ops;
};

}  // namespace kiln
