// A kernel: parameters, the types of its values and variables, and a body.
//
// This is the unit every layer exchanges: the DSL produces it, passes
// rewrite it, the printer/parser and the structural hash read it, the
// interpreter and the code generators execute or lower it. Constexprs are
// already baked into the body as constants; they are kept in `constexprs`
// so the text form and the cache key show what the kernel was built with.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/op.h"

namespace kiln {

enum class ParamKind : uint8_t { Buffer, Scalar };

struct Param {
  std::string name;
  ParamKind kind = ParamKind::Buffer;
  DType dtype = DType::f32;  // buffer element type, or the scalar's type
};

// A program's private array of `elems` elements (Kernel::scratch): what a
// kernel stages through memory rather than registers, e.g. a block of
// attention scores read back one element at a time. Every program has its
// own; its contents are undefined when the program starts. Launches pass
// nothing for it: each backend places it in the program's own memory.
struct Scratch {
  std::string name;
  DType dtype = DType::f32;
  int64_t elems = 0;
};

// The most elements a scratch array may hold (64 KiB of f32), so that
// every backend's per-program memory has room.
constexpr int64_t kMaxScratchElems = 16384;

struct Kernel {
  std::string name;
  std::vector<Param> params;
  std::vector<Scratch> scratch;
  std::vector<std::pair<std::string, int64_t>> constexprs;  // sorted by name
  std::vector<Type> values;                                 // indexed by value id
  std::vector<Type> vars;                                   // indexed by variable id
  Block body;

  int add_value(const Type& t) {
    values.push_back(t);
    return static_cast<int>(values.size()) - 1;
  }
  const Type& type_of(int value) const { return values.at(value); }
  int num_buffers() const;
  int num_scalars() const;
};

// Memory ops (Load, Store, the atomics, Prefetch) name their memory in
// Op::ival: a buffer parameter's index (>= 0), or scratch array s as -1 - s.
constexpr int64_t scratch_ref(int s) { return -1 - static_cast<int64_t>(s); }
constexpr bool is_scratch_ref(int64_t ival) { return ival < 0; }
constexpr int scratch_index(int64_t ival) { return static_cast<int>(-1 - ival); }
// The name and element type of memory `ival` (nullptr: it names nothing).
const std::string* memory_name(const Kernel& k, int64_t ival);
DType memory_dtype(const Kernel& k, int64_t ival);

// Position of buffer/scalar parameter `param_index` among the parameters of
// the same kind (how launches and compiled code address them).
int buffer_slot(const Kernel& k, int param_index);
int scalar_slot(const Kernel& k, int param_index);

}  // namespace kiln
