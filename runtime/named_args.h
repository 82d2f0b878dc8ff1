// Launch arguments by parameter name: Kiln's one calling convention.
//
// A kernel's parameters are named in its source (`k.buffer("x", T)`,
// `k.scalar("n", i32)`); a caller names them back, in any order, and each
// argument is checked against its parameter before anything runs: a buffer
// for a buffer (its element dtype equal to the parameter's, or raw bytes or
// 16-bit words of the same width: f16, bf16 and fp8 have no C++ type), a
// number for a scalar (an integer for an integer scalar). Integer names
// that are no parameter are launch sizes (a row count the grid is derived
// from). The library API (runtime/device.h) and the Python package bind
// through it, as do the runtime's launches (runtime/runtime.h), its plans
// and tools; the errors name the kernel and the parameter.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/interpreter.h"
#include "ir/kernel.h"
#include "runtime/backend.h"

namespace kiln {

// The dtype of a C++ element type; uint8_t and uint16_t are raw storage
// and also match any dtype of their width.
template <class T>
constexpr DType dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<U, int8_t>)
    return DType::i8;
  else if constexpr (std::is_same_v<U, uint8_t>)
    return DType::u8;
  else if constexpr (std::is_same_v<U, int16_t>)
    return DType::i16;
  else if constexpr (std::is_same_v<U, uint16_t>)
    return DType::u16;
  else if constexpr (std::is_same_v<U, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<U, uint32_t>)
    return DType::u32;
  else if constexpr (std::is_same_v<U, int64_t>)
    return DType::i64;
  else if constexpr (std::is_same_v<U, bool>)
    return DType::boolean;
  else
    static_assert(sizeof(T) == 0, "no Kiln dtype for this element type");
}

// One argument: an array (host memory, or a buffer of the launch's backend)
// or a number.
class LaunchArg {
 public:
  enum class Kind { array, integer, real };

  template <class T>
  LaunchArg(std::vector<T>& v)
      : LaunchArg(v.data(), static_cast<int64_t>(v.size()), dtype_of<T>()) {}
  template <class T>
  LaunchArg(std::span<T> s) : LaunchArg(s.data(), static_cast<int64_t>(s.size()), dtype_of<T>()) {}
  // `count` elements of `dtype` at `data` (host memory).
  LaunchArg(void* data, int64_t count, DType dtype)
      : kind_(Kind::array), data_(data), count_(count), dtype_(dtype) {}
  // A buffer of the backend's own memory holding elements of `dtype`.
  LaunchArg(const DeviceBuffer& b, DType dtype)
      : LaunchArg(device(b.data(), static_cast<int64_t>(b.bytes()) / dtype_bytes(dtype), dtype)) {}
  // `count` elements of `dtype` at `data` in the backend's own memory (a
  // DLPack tensor on the GPU).
  static LaunchArg device(void* data, int64_t count, DType dtype) {
    LaunchArg a(data, count, dtype);
    a.on_device_ = true;
    return a;
  }
  template <class T>
  requires std::is_integral_v<T> LaunchArg(T v)
      : kind_(Kind::integer), i_(static_cast<int64_t>(v)) {}
  template <class T>
  requires std::is_floating_point_v<T> LaunchArg(T v)
      : kind_(Kind::real), f_(static_cast<double>(v)) {}

  Kind kind() const { return kind_; }
  void* data() const { return data_; }
  int64_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  bool on_device() const { return on_device_; }
  int64_t integer() const { return i_; }
  double real() const { return f_; }

 private:
  Kind kind_;
  void* data_ = nullptr;
  int64_t count_ = 0;
  DType dtype_ = DType::f32;
  bool on_device_ = false;
  int64_t i_ = 0;
  double f_ = 0;
};

using LaunchArgs = std::vector<std::pair<std::string, LaunchArg>>;

// Integer launch sizes that are no parameter, by name (a row count the grid
// is derived from).
using Sizes = std::map<std::string, int64_t>;

class Plan;

// Named arguments bound to one kernel's parameters: checked once, then
// launched any number of times (a benchmark's loop, the tuner's
// candidates). Only binding by name makes one; below the runtime the
// arguments travel in parameter order (ir/interpreter.h's Arg: the
// interpreter's and the backends' ABI), never written by hand above it.
class BoundArgs {
 public:
  // In parameter order.
  const std::vector<Arg>& args() const { return args_; }
  const Sizes& sizes() const { return sizes_; }
  // Indices into args() of the arrays in host memory.
  const std::vector<size_t>& host_arrays() const { return host_arrays_; }
  // The same arguments with buffer `i` at `data` instead (a copy of it: in
  // another memory, or a cold copy), `on_device` saying whose memory.
  BoundArgs with_buffer(size_t i, void* data, bool on_device) const;

 private:
  friend BoundArgs bind_named(const Kernel& k, const LaunchArgs& named);
  friend class Plan;  // binds a graph's operands by name, with its dynamic scalars
  std::vector<Arg> args_;
  Sizes sizes_;
  std::vector<size_t> host_arrays_;
};

// Binds `named` to k's parameters; throws kiln::Error naming the kernel and
// the parameter for a missing, repeated, unknown or mistyped argument.
BoundArgs bind_named(const Kernel& k, const LaunchArgs& named);

}  // namespace kiln
