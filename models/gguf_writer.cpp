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

GgufWriter::Value GgufWriter::copy_of(const GgufValue& v) {
  Value out;
  out.type = v.type;
  switch (v.type) {
    case GgufType::string: return str(v.str);
    case GgufType::array:
      if (v.elem_type == GgufType::string) {
        out = string_array(std::vector<std::string>(v.strings.begin(), v.strings.end()));
      } else if (v.elem_type == GgufType::array) {
        std::vector<Value> items;
        items.reserve(v.arrays.size());
        for (const GgufValue& item : v.arrays) items.push_back(copy_of(item));
        out = array_of(GgufType::array, items);
      } else {
        out.elem_type = v.elem_type;
        put_u32(&out.bytes, static_cast<uint32_t>(v.elem_type));
        put_u64(&out.bytes, v.count);
        if (v.count)
          out.bytes.append(reinterpret_cast<const char*>(v.data),
                           v.count * static_cast<uint64_t>(gguf_type_size(v.elem_type)));
      }
      return out;
    case GgufType::f32: return f32(static_cast<float>(v.f));
    case GgufType::f64: return f64(v.f);
    case GgufType::boolean: return boolean(v.u != 0);
    case GgufType::u8: return u8(static_cast<uint8_t>(v.u));
    case GgufType::u16: return u16(static_cast<uint16_t>(v.u));
    case GgufType::u32: return u32(static_cast<uint32_t>(v.u));
    case GgufType::u64: return u64(v.u);
    case GgufType::i8: return i8(static_cast<int8_t>(v.i));
    case GgufType::i16: return i16(static_cast<int16_t>(v.i));
    case GgufType::i32: return i32(static_cast<int32_t>(v.i));
    case GgufType::i64: return i64(v.i);
  }
  throw Error("GgufWriter: cannot copy a value of unknown type " +
              std::to_string(static_cast<uint32_t>(v.type)));
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

uint64_t GgufWriter::tensor_bytes(const std::string& name, TensorType type,
                                  const std::vector<int64_t>& shape) {
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
                " elements is not a whole number of " + tensor_type_name(type) + " blocks");
  return static_cast<uint64_t>(row * (elements / shape[0]));
}

void GgufWriter::push_tensor(Tensor t) {
  for (const Tensor& have : tensors_)
    if (have.name == t.name) throw Error("GgufWriter: duplicate tensor '" + t.name + "'");
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                            std::string_view bytes) {
  uint64_t expected = tensor_bytes(name, type, shape);
  if (bytes.size() != expected)
    throw Error("GgufWriter: tensor '" + name + "' of type " + tensor_type_name(type) + " needs " +
                std::to_string(expected) + " bytes, given " + std::to_string(bytes.size()));
  push_tensor(Tensor{name, type, std::move(shape), expected, std::string(bytes), nullptr});
}

void GgufWriter::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                            TensorProducer produce) {
  if (!produce) throw Error("GgufWriter: tensor '" + name + "' has no producer");
  uint64_t size = tensor_bytes(name, type, shape);
  push_tensor(Tensor{name, type, std::move(shape), size, std::string(), std::move(produce)});
}

std::string GgufWriter::header() const {
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
    offset += t.size + padding(t.size, alignment_);
  }
  head.append(padding(head.size(), alignment_), '\0');
  return head;
}

void GgufWriter::write_to(std::ostream& out) const {
  for (const Tensor& t : tensors_)
    if (tensor_type_info(t.type).kind == TensorKind::kiln_own)
      throw Error("GgufWriter: tensor '" + t.name + "' has type " + tensor_type_name(t.type) +
                  ", Kiln's in-memory form of a checkpoint's weights, which no GGUF file holds");
  const std::string head = header();
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  std::string zeros(alignment_, '\0');
  for (const Tensor& t : tensors_) {
    if (t.produce) {
      uint64_t written = 0;
      t.produce([&](const uint8_t* bytes, size_t n) {
        if (written + n > t.size)
          throw Error("GgufWriter: tensor '" + t.name + "' produced more than its " +
                      std::to_string(t.size) + " bytes");
        out.write(reinterpret_cast<const char*>(bytes), static_cast<std::streamsize>(n));
        written += n;
      });
      if (written != t.size)
        throw Error("GgufWriter: tensor '" + t.name + "' produced " + std::to_string(written) +
                    " of its " + std::to_string(t.size) + " bytes");
    } else {
      out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    }
    out.write(zeros.data(), static_cast<std::streamsize>(padding(t.size, alignment_)));
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
