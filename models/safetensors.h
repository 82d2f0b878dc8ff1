// Safetensors files and checkpoints, Hugging Face's tensor container.
//
// A file is an 8-byte little-endian header length, a JSON header
// ({"name": {"dtype": "BF16", "shape": [m, k], "data_offsets": [b, e]}, ...,
// optional "__metadata__": {string: string}}) and the data, offsets counted
// from the end of the header. Fine-tuned and quantized models are shipped
// this way, as one file or as shards listed by model.safetensors.index.json.
// Files are mapped read-only and every entry is checked before any pointer
// is handed out (dtype, shape, offsets within the file, byte count against
// shape, no overlaps), so a truncated or hostile file is an error naming the
// file and tensor, never a read out of bounds.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/mapped_file.h"

namespace kiln {

enum class StDtype {
  f64,
  f32,
  f16,
  bf16,
  f8_e4m3,
  f8_e5m2,
  i64,
  i32,
  i16,
  i8,
  u64,
  u32,
  u16,
  u8,
  boolean
};

// "BF16" -> StDtype::bf16; false for a name safetensors does not define.
bool parse_st_dtype(std::string_view name, StDtype* out);
const char* st_dtype_name(StDtype t);
int st_dtype_bytes(StDtype t);

struct SafeTensor {
  std::string name;
  StDtype dtype = StDtype::f32;
  std::vector<int64_t> shape;  // row-major: shape.back() is contiguous
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  const std::string* file = nullptr;  // the path it lies in, for messages

  int64_t elements() const;
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  // Bytes already in memory (copied); `name` stands in for the path.
  static SafetensorsFile open_memory(std::string_view bytes, std::string name);

  const std::string& path() const { return *path_; }
  const std::vector<SafeTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafeTensor* find(std::string_view name) const;

 private:
  void parse();
  [[noreturn]] void fail(const std::string& what) const;

  std::unique_ptr<std::string> path_;  // stable address for SafeTensor::file
  MappedFile map_;
  std::string owned_;
  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
  std::vector<SafeTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, size_t, std::less<>> index_;
};

// The tensors of a model folder: model.safetensors, or every shard that
// model.safetensors.index.json's weight_map names (each tensor must lie in
// the shard the index says).
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const SafeTensor* find(std::string_view name) const;
  // Throws naming the tensor and the folder.
  const SafeTensor& tensor(std::string_view name) const;
  std::vector<const SafeTensor*> tensors() const;  // every file's, in file order

 private:
  std::string dir_;
  std::vector<SafetensorsFile> files_;
};

}  // namespace kiln
