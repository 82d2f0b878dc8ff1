#include "models/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/error.h"
#include "models/read_file.h"

namespace kiln {

namespace {

struct DtypeInfo {
  StDtype t;
  const char* name;
  int bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {StDtype::f64, "F64", 8},   {StDtype::f32, "F32", 4},         {StDtype::f16, "F16", 2},
    {StDtype::bf16, "BF16", 2}, {StDtype::f8_e4m3, "F8_E4M3", 1}, {StDtype::f8_e5m2, "F8_E5M2", 1},
    {StDtype::i64, "I64", 8},   {StDtype::i32, "I32", 4},         {StDtype::i16, "I16", 2},
    {StDtype::i8, "I8", 1},     {StDtype::u64, "U64", 8},         {StDtype::u32, "U32", 4},
    {StDtype::u16, "U16", 2},   {StDtype::u8, "U8", 1},           {StDtype::boolean, "BOOL", 1},
};

// The reference implementation's limit: a larger header is not a model's.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

const DtypeInfo& info(StDtype t) {
  for (const DtypeInfo& d : kDtypes)
    if (d.t == t) return d;
  throw Error("unknown safetensors dtype");
}

std::string q(std::string_view s) { return "'" + std::string(s) + "'"; }

}  // namespace

bool parse_st_dtype(std::string_view name, StDtype* out) {
  for (const DtypeInfo& d : kDtypes)
    if (name == d.name) {
      *out = d.t;
      return true;
    }
  return false;
}

const char* st_dtype_name(StDtype t) { return info(t).name; }
int st_dtype_bytes(StDtype t) { return info(t).bytes; }

int64_t SafeTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void SafetensorsFile::fail(const std::string& what) const {
  throw Error("safetensors file '" + *path_ + "': " + what);
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = std::make_unique<std::string>(path);
  std::string why;
  if (!f.map_.open(path, &why)) f.fail(why);
  f.bytes_ = f.map_.data();
  f.size_ = f.map_.size();
  f.parse();
  return f;
}

SafetensorsFile SafetensorsFile::open_memory(std::string_view bytes, std::string name) {
  SafetensorsFile f;
  f.path_ = std::make_unique<std::string>(std::move(name));
  f.owned_.assign(bytes);
  f.bytes_ = reinterpret_cast<const uint8_t*>(f.owned_.data());
  f.size_ = f.owned_.size();
  f.parse();
  return f;
}

const SafeTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse() {
  if (size_ < 8)
    fail("it is " + std::to_string(size_) + " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes_, 8);
  if (n > kMaxHeaderBytes)
    fail("its header of " + std::to_string(n) + " bytes exceeds the 100 MiB limit");
  if (n > size_ - 8)
    fail("its header of " + std::to_string(n) + " bytes runs past the end of the file (" +
         std::to_string(size_) + " bytes): truncated?");
  const char* text = reinterpret_cast<const char*>(bytes_ + 8);
  nlohmann::json j = nlohmann::json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail("its header is not a JSON object");
  const uint64_t data_size = size_ - 8 - n;
  const uint8_t* data = bytes_ + 8 + n;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) fail("__metadata__ value " + q(k) + " is not a string");
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string what = "tensor " + q(name);
    if (!v.is_object()) fail(what + " is not an object");
    SafeTensor t;
    t.name = name;
    t.file = path_.get();
    auto dtype = v.find("dtype");
    if (dtype == v.end() || !dtype->is_string()) fail(what + " has no dtype");
    if (!parse_st_dtype(dtype->get<std::string>(), &t.dtype))
      fail(what + " has unknown dtype " + q(dtype->get<std::string>()));
    auto shape = v.find("shape");
    if (shape == v.end() || !shape->is_array()) fail(what + " has no shape");
    uint64_t elems = 1;
    for (const nlohmann::json& d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 62))
        fail(what + " has a dimension that is not a non-negative integer: " + d.dump());
      uint64_t dim = d.get<uint64_t>();
      if (__builtin_mul_overflow(elems, dim, &elems) || elems > (uint64_t{1} << 62))
        fail(what + " has too many elements");
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    auto offs = v.find("data_offsets");
    if (offs == v.end() || !offs->is_array() || offs->size() != 2 ||
        !(*offs)[0].is_number_unsigned() || !(*offs)[1].is_number_unsigned())
      fail(what + " has no data_offsets [begin, end]");
    uint64_t b = (*offs)[0].get<uint64_t>(), e = (*offs)[1].get<uint64_t>();
    if (b > e || e > data_size)
      fail(what + " data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
           "] lie outside the data section of " + std::to_string(data_size) + " bytes");
    uint64_t want = elems * static_cast<uint64_t>(st_dtype_bytes(t.dtype));
    if (e - b != want)
      fail(what + " holds " + std::to_string(e - b) + " bytes; its " + st_dtype_name(t.dtype) +
           " shape " + shape->dump() + " needs " + std::to_string(want));
    t.data = data + b;
    t.nbytes = e - b;
    index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  std::vector<const SafeTensor*> by_offset;
  for (const SafeTensor& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafeTensor* a, const SafeTensor* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->data + by_offset[i - 1]->nbytes > by_offset[i]->data)
      fail("tensors " + q(by_offset[i - 1]->name) + " and " + q(by_offset[i]->name) + " overlap");
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint c;
  c.dir_ = dir;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (!fs::exists(index)) {
    if (!fs::exists(single))
      throw Error("Hugging Face folder '" + dir +
                  "': no model.safetensors or model.safetensors.index.json");
    c.files_.push_back(SafetensorsFile::open(single.string()));
    return c;
  }
  auto fail = [&](const std::string& what) {
    throw Error("safetensors index '" + index.string() + "': " + what);
  };
  const nlohmann::json j = read_json_object(index.string());
  auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object()) fail("no weight_map object");
  std::map<std::string, size_t> shard_of;
  for (auto& [tensor, shard] : map->items()) {
    if (!shard.is_string()) fail("tensor '" + tensor + "' maps to a non-string");
    const std::string s = shard.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
      fail("tensor '" + tensor + "' names shard '" + s + "', which is not a file name");
    if (!shard_of.count(s)) {
      shard_of[s] = c.files_.size();
      if (!fs::exists(fs::path(dir) / s)) fail("it names shard '" + s + "', which is missing");
      c.files_.push_back(SafetensorsFile::open((fs::path(dir) / s).string()));
    }
    if (!c.files_[shard_of[s]].find(tensor))
      fail("tensor '" + tensor + "' is not in shard '" + s + "', where the index puts it");
  }
  return c;
}

const SafeTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  for (const SafetensorsFile& f : files_)
    if (const SafeTensor* t = f.find(name)) return t;
  return nullptr;
}

const SafeTensor& SafetensorsCheckpoint::tensor(std::string_view name) const {
  const SafeTensor* t = find(name);
  if (!t) throw Error("Hugging Face folder '" + dir_ + "': no tensor '" + std::string(name) + "'");
  return *t;
}

std::vector<const SafeTensor*> SafetensorsCheckpoint::tensors() const {
  std::vector<const SafeTensor*> out;
  for (const SafetensorsFile& f : files_)
    for (const SafeTensor& t : f.tensors()) out.push_back(&t);
  return out;
}

}  // namespace kiln
