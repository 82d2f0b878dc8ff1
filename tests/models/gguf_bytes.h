// Hand-assembled GGUF bytes, for files the writer refuses to produce.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::test {

struct GgufBytes {
  std::string b;

  GgufBytes& raw(std::string_view s) {
    b += s;
    return *this;
  }
  template <class T>
  GgufBytes& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& i64(int64_t v) { return put(v); }
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    return raw(s);
  }
  // "GGUF", version, tensor count, metadata count.
  GgufBytes& header(int64_t n_tensors, int64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).i64(n_tensors).i64(n_kv);
  }
  // A u32 key/value pair.
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  // A tensor info: name, dims, type id, offset.
  GgufBytes& tensor(std::string_view name, std::initializer_list<int64_t> shape, uint32_t type,
                    uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(shape.size()));
    for (int64_t d : shape) i64(d);
    return u32(type).u64(offset);
  }
  // Zeros up to the next multiple of `alignment`, then n data bytes.
  GgufBytes& data(size_t n, size_t alignment = 32) {
    b.append((alignment - b.size() % alignment) % alignment, '\0');
    b.append(n, '\x11');
    return *this;
  }
};

}  // namespace kiln::test
