// Writes GGUF v3 files: metadata of every type and tensors given as raw bytes
// or produced while the file is written.
//
// Kiln generates its own model files (synthetic models for tests and
// benchmarks) and its tests need valid files to start from and corrupt. The
// writer produces exactly the layout GgufFile reads: key/value pairs in the
// order added, tensor infos, then each tensor's bytes at an aligned offset,
// padded with zeros. It checks what it is given (duplicate names, byte sizes
// against shapes), so a file it writes always reads back. Offsets depend only
// on types and shapes, so a model of many gigabytes can be written with its
// tensors streamed: each is produced, in pieces, only when its turn comes.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "models/gguf.h"

namespace kiln {

class GgufWriter {
 public:
  // A metadata value in its on-disk form (the bytes after the type id).
  // Built with the factories below; arrays nest.
  struct Value {
    GgufType type = GgufType::u8;
    GgufType elem_type = GgufType::u8;  // arrays only
    std::string bytes;
  };
  static Value u8(uint8_t v) { return scalar(GgufType::u8, v); }
  static Value i8(int8_t v) { return scalar(GgufType::i8, v); }
  static Value u16(uint16_t v) { return scalar(GgufType::u16, v); }
  static Value i16(int16_t v) { return scalar(GgufType::i16, v); }
  static Value u32(uint32_t v) { return scalar(GgufType::u32, v); }
  static Value i32(int32_t v) { return scalar(GgufType::i32, v); }
  static Value u64(uint64_t v) { return scalar(GgufType::u64, v); }
  static Value i64(int64_t v) { return scalar(GgufType::i64, v); }
  static Value f32(float v) { return scalar(GgufType::f32, v); }
  static Value f64(double v) { return scalar(GgufType::f64, v); }
  static Value boolean(bool v) { return scalar(GgufType::boolean, static_cast<uint8_t>(v)); }
  static Value str(std::string_view v);
  // Numeric arrays: T is one of the fixed-size integer types, float or double.
  template <class T>
  static Value array(const std::vector<T>& v);
  static Value bool_array(const std::vector<bool>& v);
  static Value string_array(const std::vector<std::string>& v);
  // An array of values that all have type elem_type (arrays of arrays included).
  static Value array_of(GgufType elem_type, const std::vector<Value>& items);
  // A value read from another file, for copying metadata across.
  static Value copy_of(const GgufValue& v);

  // Receives a streamed tensor's bytes, piece by piece, in order.
  using ByteSink = std::function<void(const uint8_t* bytes, size_t n)>;
  // Called each time the file is written, to emit exactly the tensor's bytes.
  using TensorProducer = std::function<void(const ByteSink& sink)>;

  // Alignment other than 32 is recorded as general.alignment.
  explicit GgufWriter(uint32_t alignment = 32);

  void add(const std::string& key, Value v);  // throws on a duplicate key
  // shape in ggml order (shape[0] contiguous); bytes must be exactly the
  // tensor's size for its type.
  void add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                  std::string_view bytes);
  // A streamed tensor: `produce` runs during write_to and must emit exactly
  // tensor_bytes(type, shape) bytes (anything else is an error naming it).
  void add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                  TensorProducer produce);
  // Bytes of a tensor of this type and shape; throws naming `name` for a
  // shape that is not a whole number of rows of blocks.
  static uint64_t tensor_bytes(const std::string& name, TensorType type,
                               const std::vector<int64_t>& shape);

  void write_to(std::ostream& out) const;
  std::string bytes() const;
  // The file up to its data section (metadata, tensor directory, padding):
  // what GgufFile::open_header reads.
  std::string header() const;
  void write(const std::string& path) const;  // throws kiln::Error naming the path

 private:
  template <class T>
  static Value scalar(GgufType t, T v) {
    Value out;
    out.type = t;
    out.bytes.assign(reinterpret_cast<const char*>(&v), sizeof(T));
    return out;
  }
  template <class T>
  static GgufType type_of();

  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> shape;
    uint64_t size;
    std::string bytes;       // given in memory, or
    TensorProducer produce;  // streamed
  };
  void push_tensor(Tensor t);
  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Tensor> tensors_;
};

template <class T>
GgufType GgufWriter::type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return GgufType::u8;
  if constexpr (std::is_same_v<T, int8_t>) return GgufType::i8;
  if constexpr (std::is_same_v<T, uint16_t>) return GgufType::u16;
  if constexpr (std::is_same_v<T, int16_t>) return GgufType::i16;
  if constexpr (std::is_same_v<T, uint32_t>) return GgufType::u32;
  if constexpr (std::is_same_v<T, int32_t>) return GgufType::i32;
  if constexpr (std::is_same_v<T, uint64_t>) return GgufType::u64;
  if constexpr (std::is_same_v<T, int64_t>) return GgufType::i64;
  if constexpr (std::is_same_v<T, float>) return GgufType::f32;
  if constexpr (std::is_same_v<T, double>) return GgufType::f64;
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "GgufWriter::array takes fixed-size integers, float or double");
}

template <class T>
GgufWriter::Value GgufWriter::array(const std::vector<T>& v) {
  Value out;
  out.type = GgufType::array;
  out.elem_type = type_of<T>();
  uint32_t elem = static_cast<uint32_t>(out.elem_type);
  uint64_t n = v.size();
  out.bytes.append(reinterpret_cast<const char*>(&elem), 4);
  out.bytes.append(reinterpret_cast<const char*>(&n), 8);
  out.bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  return out;
}

}  // namespace kiln
