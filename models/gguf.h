// A GGUF (v2 and v3) reader: metadata, tensor directory, tensors in place.
//
// Model files are large and their quantized weights are consumed as they lie
// on disk, so the file is mapped read-only and kept mapped for the lifetime of
// the GgufFile: tensor data, strings and numeric arrays are pointers into the
// mapping, never copies. Everything is validated up front (counts against the
// bytes that remain, shapes, types, offsets, bounds), so once open() returns,
// every pointer it hands out is in bounds. Any malformed input is a
// kiln::Error naming the file and the problem; no input makes the reader
// crash, hang or allocate more than a small multiple of the file's size.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/string_map.h"
#include "models/tensor_codec.h"

namespace kiln {

enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

std::string_view gguf_type_name(GgufType t);  // "u32", "string", "array", ...
bool gguf_type_is_integer(GgufType t);
int gguf_type_size(GgufType t);  // bytes of a scalar on disk; 0 for string and array

// One metadata value as stored. Only the fields of its type are set.
struct GgufValue {
  GgufType type = GgufType::u8;
  uint64_t u = 0;        // u8 u16 u32 u64, and bool (0 or 1)
  int64_t i = 0;         // i8 i16 i32 i64
  double f = 0;          // f32 f64
  std::string_view str;  // string
  // Arrays: `count` elements of `elem_type`. Numeric and bool elements stay
  // in the file (`data`, little-endian, unaligned); strings and nested arrays
  // are listed.
  GgufType elem_type = GgufType::u8;
  uint64_t count = 0;
  const uint8_t* data = nullptr;
  std::vector<std::string_view> strings;
  std::vector<GgufValue> arrays;

  bool is_integer() const { return gguf_type_is_integer(type); }
  // Numeric array element i converted to double (integers exactly up to 2^53).
  double number_at(uint64_t index) const;
  int64_t int_at(uint64_t index) const;  // integer arrays; u64 above 2^63 wraps
};

struct GgufTensor {
  std::string name;
  TensorType type = TensorType::f32;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous dimension
  uint64_t offset = 0;         // from the start of the data section
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;

  int64_t elements() const;
};

class GgufFile {
 public:
  // Maps and validates the file. Throws kiln::Error naming `path`.
  static GgufFile open(const std::string& path);
  // The same for bytes already in memory (copied); `name` stands in for the
  // path in messages. Fuzzers and tests use it.
  static GgufFile open_memory(std::string_view bytes, std::string name);

  // A header (metadata and tensor directory, no data section) whose
  // tensors lie elsewhere: tensor_data gives each one's bytes (it has
  // checked them: tensor.nbytes of them, alive while tensor_owner is).
  // Model formats that are not GGUF (models/hf_checkpoint.h) are read
  // through this, so the loader and the forward see one kind of file.
  static GgufFile open_header(std::string_view header, std::string name,
                              const std::function<const uint8_t*(const GgufTensor&)>& tensor_data,
                              std::shared_ptr<const void> tensor_owner);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  uint64_t size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters. find_* return nullopt for a missing key; get_* throw a
  // kiln::Error naming the key and the file. Both throw when the key holds
  // another type. Integer getters accept any integer type whose value fits;
  // float getters accept f32 and f64.
  std::optional<uint32_t> find_u32(std::string_view key) const;
  std::optional<int32_t> find_i32(std::string_view key) const;
  std::optional<uint64_t> find_u64(std::string_view key) const;
  std::optional<int64_t> find_i64(std::string_view key) const;
  std::optional<float> find_f32(std::string_view key) const;
  std::optional<double> find_f64(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  std::optional<std::string_view> find_string(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int32_t get_i32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::string_view get_string(std::string_view key) const;

  // Arrays. String views point into the mapping. Numeric arrays are converted
  // (integer elements must fit; float arrays accept any numeric elements).
  std::optional<std::vector<std::string_view>> find_string_array(std::string_view key) const;
  std::optional<std::vector<float>> find_f32_array(std::string_view key) const;
  std::optional<std::vector<int32_t>> find_i32_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> find_i64_array(std::string_view key) const;
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;
  std::vector<int64_t> get_i64_array(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  const GgufTensor& tensor(std::string_view name) const;  // throws naming the tensor and file

  // Drops the mapped pages that lie wholly inside tensor t's bytes from this
  // process's memory (madvise MADV_DONTNEED on the read-only mapping): for
  // a tensor the loader has copied into another layout. The bytes stay
  // readable; a later read faults them back in from the file. No-op for
  // files opened from memory.
  void release_pages(const GgufTensor& t) const;

  // "GGUF file '<path>': <what>", the prefix of every message about this file.
  [[noreturn]] void fail(const std::string& what) const;

 private:
  struct Storage;
  GgufFile();
  static GgufFile copy_of(std::string_view bytes, std::string name);
  void parse(bool header_only = false);
  template <class T>
  std::optional<T> find_int(std::string_view key) const;
  template <class T>
  std::optional<std::vector<T>> find_int_array(std::string_view key) const;
  const GgufValue& require(std::string_view key) const;

  std::string path_;
  std::unique_ptr<Storage> storage_;
  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  StringMap<size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  StringMap<size_t> tensor_index_;
};

}  // namespace kiln
