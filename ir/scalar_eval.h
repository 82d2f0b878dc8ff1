// Element-level semantics of the elementwise ops, shared by the interpreter
// and constant folding so that folding can never change a result.
//
// An element is held as a ScalarValue: floats (any float dtype) in `f`,
// already rounded to their dtype; ints and bool in `i`, normalised to the
// dtype (sign-extended for signed, zero-extended for unsigned, 0/1 for bool).
#pragma once

#include <cstdint>

#include "ir/op.h"

namespace kiln {

struct ScalarValue {
  double f = 0;
  int64_t i = 0;
};

// Normalises a raw integer to dtype t (wrap + sign/zero extension; bool: != 0).
int64_t normalize_int(int64_t v, DType t);
// The smallest and largest values of integer dtype t.
int64_t int_min(DType t);
int64_t int_max(DType t);

// Makes the ScalarValue of a Const op's attribute (`ival` / `fval`) in dtype t.
ScalarValue const_value(DType t, int64_t ival, double fval);

// Evaluates one element of an elementwise op: binary (Add..Shr), comparison
// (Eq..Ge), unary (Neg..Erf), Fma, Select, Cast and Bitcast. `in` is the
// dtype of the (last, for Select) operands, `out` the result dtype.
ScalarValue eval_elementwise(OpKind k, DType in, DType out, const ScalarValue* args);

// Reads/writes one element of dtype t from/to raw memory.
ScalarValue load_element(const void* base, int64_t index, DType t);
void store_element(void* base, int64_t index, DType t, const ScalarValue& v);

}  // namespace kiln
