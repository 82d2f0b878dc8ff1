#include "models/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ir/error.h"

namespace kiln {

namespace {

void put_u32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void put_str(std::string* out, std::string_view s) {
  put_u64(out, s.size());
  out->append(s);
}

uint64_t padding(uint64_t pos, uint32_t alignment) {
  return (alignment - pos % alignment) % alignment;
}

}  // namespace

GgufWriter::Value GgufWriter::str(std::string_view v) {
  Value out;
  out.type = GgufType::string;
  put_str(&out.bytes, v);
  return out;
}

GgufWriter::Value GgufWriter::bool_array(const std::vector<bool>& v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  Value out = array(bytes);
  out.elem_type = GgufType::boolean;
  uint32_t elem = static_cast<uint32_t>(GgufType::boolean);
  std::memcpy(out.bytes.data(), &elem, 4);
  return out;
}

GgufWriter::Value GgufWriter::string_array(const std::vector<std::string>& v) {
  Value out;
  out.type = GgufType::array;
  out.elem_type = GgufType::string;
  put_u32(&out.bytes, static_cast<uint32_t>(GgufType::string));
  put_u64(&out.bytes, v.size());
  for (const std::string& s : v) put_str(&out.bytes, s);
  return out;
}

GgufWriter::Value GgufWriter::array_of(GgufType elem_type, const std::vector<Value>& items) {
  Value out;
  out.type = GgufType::array;
  out.elem_type = elem_type;
  put_u32(&out.bytes, static_cast<uint32_t>(elem_type));
  put_u64(&out.bytes, items.size());
  for (const Value& item : items) {
    if (item.type != elem_type)
      throw Error("GgufWriter: array of " + std::string(gguf_type_name(elem_type)) +
                  " given an element of type " + std::string(gguf_type_name(item.type)));
    out.bytes += item.bytes;
  }
  return out;
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error("GgufWriter: alignment " + std::to_string(alignment) + " is not a power of two");
  if (alignment != 32) kv_.emplace_back("general.alignment", u32(alignment));
}

void GgufWriter::add(const std::string& key, Value v) {
  for (const auto& [k, _] : kv_)
    if (k == key) throw Error("GgufWriter: duplicate metadata key '" + key + "'");
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                            std::string_view bytes) {
  for (const Tensor& t : tensors_)
    if (t.name == name) throw Error("GgufWriter: duplicate tensor '" + name + "'");
  if (shape.empty() || shape.size() > 4)
    throw Error("GgufWriter: tensor '" + name + "' needs 1 to 4 dimensions");
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw Error("GgufWriter: tensor '" + name + "' has a non-positive dimension");
    elements *= d;
  }
  int64_t row = ggml_row_bytes(type, shape[0]);
  if (row < 0)
    throw Error("GgufWriter: tensor '" + name + "' row of " + std::to_string(shape[0]) +
                " elements is not a whole number of " + ggml_type_name(type) + " blocks");
  uint64_t expected = static_cast<uint64_t>(row * (elements / shape[0]));
  if (bytes.size() != expected)
    throw Error("GgufWriter: tensor '" + name + "' of type " + ggml_type_name(type) + " needs " +
                std::to_string(expected) + " bytes, given " + std::to_string(bytes.size()));
  tensors_.push_back({name, type, std::move(shape), std::string(bytes)});
}

void GgufWriter::write_to(std::ostream& out) const {
  std::string head = "GGUF";
  put_u32(&head, 3);
  put_u64(&head, tensors_.size());
  put_u64(&head, kv_.size());
  for (const auto& [key, v] : kv_) {
    put_str(&head, key);
    put_u32(&head, static_cast<uint32_t>(v.type));
    head += v.bytes;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_str(&head, t.name);
    put_u32(&head, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put_u64(&head, static_cast<uint64_t>(d));
    put_u32(&head, static_cast<uint32_t>(t.type));
    put_u64(&head, offset);
    offset += t.bytes.size() + padding(t.bytes.size(), alignment_);
  }
  head.append(padding(head.size(), alignment_), '\0');
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  std::string zeros(alignment_, '\0');
  for (const Tensor& t : tensors_) {
    out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    out.write(zeros.data(), static_cast<std::streamsize>(padding(t.bytes.size(), alignment_)));
  }
}

std::string GgufWriter::bytes() const {
  std::ostringstream out;
  write_to(out);
  return out.str();
}

void GgufWriter::write(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write GGUF file '" + path + "': " + std::strerror(errno));
  write_to(out);
  out.close();
  if (!out) throw Error("cannot write GGUF file '" + path + "': " + std::strerror(errno));
}

}  // namespace kiln
