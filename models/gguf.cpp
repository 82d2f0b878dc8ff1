#include "models/gguf.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <numeric>
#include <utility>

#include "ir/error.h"
#include "models/mapped_file.h"

namespace kiln {

namespace {

constexpr uint32_t kNumTypes = 13;
// Arrays of arrays are legal; a file nesting them thousands deep is not a
// model, and recursing that deep would overflow the stack.
constexpr int kMaxArrayDepth = 8;
constexpr int kMaxDims = 4;
constexpr size_t kMemoryAlignment = 64;

// A name from the file, quoted for a message: control bytes escaped, long
// names cut, so a corrupt file cannot make the message unreadable.
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 80) out += "...";
  return out + "'";
}

std::string num(uint64_t v) { return std::to_string(v); }

// Reads little-endian values from the mapped bytes; every read is checked
// against the end, and `what` (a callable, built only on failure) says what
// was being read.
class Cursor {
 public:
  Cursor(const GgufFile& file, const uint8_t* bytes, uint64_t size)
      : file_(file), bytes_(bytes), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  template <class W>
  void need(uint64_t n, W what) const {
    if (n > left())
      file_.fail("truncated file: " + what() + " needs " + num(n) + " bytes at offset " +
                 num(pos_) + ", but the file ends at " + num(size_));
  }
  template <class T, class W>
  T read(W what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <class W>
  const uint8_t* take(uint64_t n, W what) {
    need(n, what);
    const uint8_t* p = bytes_ + pos_;
    pos_ += n;
    return p;
  }
  template <class W>
  std::string_view string(W what) {
    uint64_t n = read<uint64_t>([&] { return what() + " (its length)"; });
    if (n > left())
      file_.fail(what() + ": string length " + num(n) + " at offset " + num(pos_ - 8) +
                 " runs past the end of the file (" + num(left()) + " bytes left)");
    const char* p = reinterpret_cast<const char*>(bytes_ + pos_);
    pos_ += n;
    return std::string_view(p, n);
  }

 private:
  const GgufFile& file_;
  const uint8_t* bytes_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// The fewest bytes one array element of type t can occupy, to reject counts
// the rest of the file cannot hold before allocating anything.
uint64_t min_elem_bytes(GgufType t) {
  if (t == GgufType::string) return 8;  // the length
  if (t == GgufType::array) return 12;  // element type + count
  return static_cast<uint64_t>(gguf_type_size(t));
}

GgufValue read_value(Cursor& c, const GgufFile& file, GgufType type, const std::string& key,
                     int depth) {
  auto what = [&] { return "the value of metadata key " + quoted(key); };
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::u8: v.u = c.read<uint8_t>(what); break;
    case GgufType::i8: v.i = c.read<int8_t>(what); break;
    case GgufType::u16: v.u = c.read<uint16_t>(what); break;
    case GgufType::i16: v.i = c.read<int16_t>(what); break;
    case GgufType::u32: v.u = c.read<uint32_t>(what); break;
    case GgufType::i32: v.i = c.read<int32_t>(what); break;
    case GgufType::u64: v.u = c.read<uint64_t>(what); break;
    case GgufType::i64: v.i = c.read<int64_t>(what); break;
    case GgufType::f32: v.f = c.read<float>(what); break;
    case GgufType::f64: v.f = c.read<double>(what); break;
    case GgufType::boolean: v.u = c.read<uint8_t>(what) != 0; break;
    case GgufType::string: v.str = c.string(what); break;
    case GgufType::array: {
      if (depth >= kMaxArrayDepth)
        file.fail("metadata key " + quoted(key) + ": arrays nested deeper than " +
                  num(kMaxArrayDepth));
      uint32_t elem =
          c.read<uint32_t>([&] { return "the array type of metadata key " + quoted(key); });
      if (elem >= kNumTypes)
        file.fail("metadata key " + quoted(key) + ": unknown array element type " + num(elem));
      v.elem_type = static_cast<GgufType>(elem);
      v.count = c.read<uint64_t>([&] { return "the array length of metadata key " + quoted(key); });
      uint64_t min = min_elem_bytes(v.elem_type);
      if (v.count > c.left() / min)
        file.fail("metadata key " + quoted(key) + ": array of " + num(v.count) + " " +
                  std::string(gguf_type_name(v.elem_type)) + " elements at offset " +
                  num(c.pos() - 12) + " cannot fit in the " + num(c.left()) +
                  " bytes left in the file");
      if (v.elem_type == GgufType::string) {
        v.strings.reserve(v.count);
        for (uint64_t i = 0; i < v.count; ++i)
          v.strings.push_back(
              c.string([&] { return "element " + num(i) + " of metadata key " + quoted(key); }));
      } else if (v.elem_type == GgufType::array) {
        for (uint64_t i = 0; i < v.count; ++i)
          v.arrays.push_back(read_value(c, file, GgufType::array, key, depth + 1));
      } else {
        v.data = c.take(v.count * min, what);
      }
      break;
    }
  }
  return v;
}

bool is_unsigned(GgufType t) {
  return t == GgufType::u8 || t == GgufType::u16 || t == GgufType::u32 || t == GgufType::u64 ||
         t == GgufType::boolean;
}

// Element i of a numeric array, widened: unsigned types in *u, signed in *s,
// floats in *f. Returns which one was set.
enum class Kind { unsigned_int, signed_int, floating };
Kind array_element(const GgufValue& v, uint64_t i, uint64_t* u, int64_t* s, double* f) {
  const uint8_t* p = v.data + i * gguf_type_size(v.elem_type);
  auto load = [p](auto x) {
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (v.elem_type) {
    case GgufType::u8: *u = load(uint8_t{}); return Kind::unsigned_int;
    case GgufType::boolean: *u = load(uint8_t{}) != 0; return Kind::unsigned_int;
    case GgufType::u16: *u = load(uint16_t{}); return Kind::unsigned_int;
    case GgufType::u32: *u = load(uint32_t{}); return Kind::unsigned_int;
    case GgufType::u64: *u = load(uint64_t{}); return Kind::unsigned_int;
    case GgufType::i8: *s = load(int8_t{}); return Kind::signed_int;
    case GgufType::i16: *s = load(int16_t{}); return Kind::signed_int;
    case GgufType::i32: *s = load(int32_t{}); return Kind::signed_int;
    case GgufType::i64: *s = load(int64_t{}); return Kind::signed_int;
    case GgufType::f32: *f = load(float{}); return Kind::floating;
    case GgufType::f64: *f = load(double{}); return Kind::floating;
    default: throw Error("GgufValue: not a numeric array");
  }
}

template <class T>
const char* int_name() {
  if constexpr (std::is_same_v<T, uint32_t>) return "u32";
  if constexpr (std::is_same_v<T, int32_t>) return "i32";
  if constexpr (std::is_same_v<T, uint64_t>) return "u64";
  return "i64";
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::string_view kNames[kNumTypes] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                         "i32", "f32", "bool", "string", "array",
                                                         "u64", "i64", "f64"};
  uint32_t id = static_cast<uint32_t>(t);
  return id < kNumTypes ? kNames[id] : "unknown";
}

bool gguf_type_is_integer(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::u16:
    case GgufType::i16:
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::u64:
    case GgufType::i64: return true;
    default: return false;
  }
}

int gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean: return 1;
    case GgufType::u16:
    case GgufType::i16: return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32: return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64: return 8;
    default: return 0;
  }
}

double GgufValue::number_at(uint64_t index) const {
  uint64_t u = 0;
  int64_t s = 0;
  double f = 0;
  if (index >= count) throw Error("GgufValue: index " + num(index) + " out of range");
  switch (array_element(*this, index, &u, &s, &f)) {
    case Kind::unsigned_int: return static_cast<double>(u);
    case Kind::signed_int: return static_cast<double>(s);
    default: return f;
  }
}

int64_t GgufValue::int_at(uint64_t index) const {
  uint64_t u = 0;
  int64_t s = 0;
  double f = 0;
  if (index >= count) throw Error("GgufValue: index " + num(index) + " out of range");
  switch (array_element(*this, index, &u, &s, &f)) {
    case Kind::unsigned_int: return static_cast<int64_t>(u);
    case Kind::signed_int: return s;
    default: throw Error("GgufValue: not an integer array");
  }
}

int64_t GgufTensor::elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// The bytes behind a GgufFile: a read-only mapping, or an owned copy; and
// for a header opened with its tensors elsewhere, what keeps those alive.
struct GgufFile::Storage {
  MappedFile map;
  uint8_t* owned = nullptr;
  std::shared_ptr<const void> tensor_owner;
  ~Storage() {
    if (owned) ::operator delete[](owned, std::align_val_t(kMemoryAlignment));
  }
};

GgufFile::GgufFile() : storage_(std::make_unique<Storage>()) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

void GgufFile::release_pages(const GgufTensor& t) const {
  if (!storage_->tensor_owner) storage_->map.release(t.data, t.nbytes);
}

void GgufFile::fail(const std::string& what) const {
  throw Error("GGUF file '" + path_ + "': " + what);
}

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  std::string why;
  if (!f.storage_->map.open(path, &why)) f.fail(why);
  f.bytes_ = f.storage_->map.data();
  f.size_ = f.storage_->map.size();
  f.parse();
  return f;
}

// A GgufFile over a copy of `bytes`, aligned like a mapping would be, so
// aligned tensor offsets give aligned pointers; not parsed yet.
GgufFile GgufFile::copy_of(std::string_view bytes, std::string name) {
  GgufFile f;
  f.path_ = std::move(name);
  f.size_ = bytes.size();
  if (!bytes.empty()) {
    f.storage_->owned =
        static_cast<uint8_t*>(::operator new[](bytes.size(), std::align_val_t(kMemoryAlignment)));
    std::memcpy(f.storage_->owned, bytes.data(), bytes.size());
    f.bytes_ = f.storage_->owned;
  }
  return f;
}

GgufFile GgufFile::open_memory(std::string_view bytes, std::string name) {
  GgufFile f = copy_of(bytes, std::move(name));
  f.parse();
  return f;
}

GgufFile GgufFile::open_header(std::string_view header, std::string name,
                               const std::function<const uint8_t*(const GgufTensor&)>& tensor_data,
                               std::shared_ptr<const void> tensor_owner) {
  GgufFile f = copy_of(header, std::move(name));
  f.parse(/*header_only=*/true);
  for (GgufTensor& t : f.tensors_) t.data = tensor_data(t);
  f.storage_->tensor_owner = std::move(tensor_owner);
  return f;
}

void GgufFile::parse(bool header_only) {
  Cursor c(*this, bytes_, size_);
  const uint8_t* magic = c.take(4, [] { return std::string("the GGUF magic"); });
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    std::string shown = quoted(std::string_view(reinterpret_cast<const char*>(magic), 4));
    fail("not a GGUF file: it starts with " + shown + ", expected 'GGUF'");
  }
  version_ = c.read<uint32_t>([] { return std::string("the version"); });
  if (version_ != 2 && version_ != 3) {
    uint32_t swapped = __builtin_bswap32(version_);
    if (swapped >= 1 && swapped <= 3)
      fail("a big-endian GGUF file (version " + num(swapped) +
           "); Kiln reads little-endian files only");
    fail("unsupported GGUF version " + num(version_) + " (Kiln reads versions 2 and 3)");
  }
  int64_t n_tensors = c.read<int64_t>([] { return std::string("the tensor count"); });
  int64_t n_kv = c.read<int64_t>([] { return std::string("the metadata count"); });
  // A tensor info takes at least 24 bytes, a key/value pair at least 13.
  if (n_tensors < 0 || static_cast<uint64_t>(n_tensors) > c.left() / 24)
    fail("tensor count " + std::to_string(n_tensors) + " is impossible: only " + num(c.left()) +
         " bytes follow the header");
  if (n_kv < 0 || static_cast<uint64_t>(n_kv) > c.left() / 13)
    fail("metadata count " + std::to_string(n_kv) + " is impossible: only " + num(c.left()) +
         " bytes follow the header");

  // No reserve() from the counts: they are checked against the bytes left,
  // but a parsed entry is larger than its bytes on disk.
  for (int64_t k = 0; k < n_kv; ++k) {
    std::string key(c.string([&] { return "the name of metadata key " + num(k); }));
    if (kv_index_.count(key)) fail("duplicate metadata key " + quoted(key));
    uint32_t type = c.read<uint32_t>([&] { return "the type of metadata key " + quoted(key); });
    if (type >= kNumTypes)
      fail("metadata key " + quoted(key) + " has unknown value type " + num(type));
    GgufValue v = read_value(c, *this, static_cast<GgufType>(type), key, 0);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (find("general.alignment")) {
    uint32_t a = get_u32("general.alignment");
    if (a == 0 || (a & (a - 1)) != 0)
      fail("general.alignment = " + num(a) + " is not a power of two");
    alignment_ = a;
  }

  for (int64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = std::string(c.string([&] { return "the name of tensor " + num(k); }));
    std::string name = quoted(t.name);
    if (tensor_index_.count(t.name)) fail("duplicate tensor name " + name);
    uint32_t n_dims = c.read<uint32_t>([&] { return "the rank of tensor " + name; });
    if (n_dims > kMaxDims)
      fail("tensor " + name + " has " + num(n_dims) + " dimensions (at most " + num(kMaxDims) +
           ")");
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      int64_t ne = c.read<int64_t>([&] { return "dimension " + num(d) + " of tensor " + name; });
      if (ne <= 0)
        fail("tensor " + name + " dimension " + num(d) + " is " + std::to_string(ne) +
             " (must be positive)");
      if (__builtin_mul_overflow(elements, ne, &elements))
        fail("tensor " + name + " has more than 2^63 elements (its element count overflows)");
      t.shape.push_back(ne);
    }
    uint32_t type = c.read<uint32_t>([&] { return "the type of tensor " + name; });
    const TensorTypeInfo* info = find_tensor_type(type);
    if (!info)
      fail("tensor " + name + " has unsupported ggml type " + num(type) + " (" +
           tensor_type_name(type) + "); Kiln reads " + supported_tensor_type_names());
    if (info->kind == TensorKind::kiln_own && !header_only)
      fail("tensor " + name + " has type " + info->name +
           ", Kiln's in-memory form of a checkpoint's weights, which no GGUF file holds");
    t.type = static_cast<TensorType>(type);
    int64_t row = n_dims > 0 ? t.shape[0] : 1;
    if (row % info->block_elems != 0)
      fail("tensor " + name + " row size " + std::to_string(row) + " is not a multiple of the " +
           info->name + " block size " + std::to_string(info->block_elems));
    int64_t nbytes = 0;
    if (__builtin_mul_overflow(elements / info->block_elems, info->block_bytes, &nbytes))
      fail("tensor " + name + " byte size overflows");
    t.nbytes = static_cast<uint64_t>(nbytes);
    t.offset = c.read<uint64_t>([&] { return "the data offset of tensor " + name; });
    if (t.offset % alignment_ != 0)
      fail("tensor " + name + " data offset " + num(t.offset) +
           " is not a multiple of the alignment " + num(alignment_));
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment. A file
  // without tensors may end before it.
  data_offset_ = c.pos() + (alignment_ - c.pos() % alignment_) % alignment_;
  if (header_only) {
    if (data_offset_ != size_) fail("a header-only file has bytes after its header");
    return;
  }
  uint64_t data_size = data_offset_ <= size_ ? size_ - data_offset_ : 0;
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail("tensor " + quoted(t.name) + " data out of bounds: " + num(t.nbytes) +
           " bytes at offset " + num(t.offset) + " of the data section, which holds " +
           num(data_size) + " bytes (the file has " + num(size_) + ")");
    t.data = bytes_ + data_offset_ + t.offset;
  }
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset)
      fail("tensors " + quoted(by_offset[i - 1]->name) + " and " + quoted(by_offset[i]->name) +
           " overlap in the data section");
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufValue& GgufFile::require(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("missing metadata key " + quoted(key));
  return *v;
}

template <class T>
std::optional<T> GgufFile::find_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer())
    fail("metadata key " + quoted(key) + " is " + std::string(gguf_type_name(v->type)) +
         ", expected an integer");
  bool fits = is_unsigned(v->type) ? std::in_range<T>(v->u) : std::in_range<T>(v->i);
  if (!fits)
    fail("metadata key " + quoted(key) + " = " +
         (is_unsigned(v->type) ? num(v->u) : std::to_string(v->i)) + " does not fit in " +
         int_name<T>());
  return is_unsigned(v->type) ? static_cast<T>(v->u) : static_cast<T>(v->i);
}

std::optional<uint32_t> GgufFile::find_u32(std::string_view key) const {
  return find_int<uint32_t>(key);
}
std::optional<int32_t> GgufFile::find_i32(std::string_view key) const {
  return find_int<int32_t>(key);
}
std::optional<uint64_t> GgufFile::find_u64(std::string_view key) const {
  return find_int<uint64_t>(key);
}
std::optional<int64_t> GgufFile::find_i64(std::string_view key) const {
  return find_int<int64_t>(key);
}

std::optional<double> GgufFile::find_f64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::f32 || v->type == GgufType::f64) return v->f;
  if (v->is_integer())
    return is_unsigned(v->type) ? static_cast<double>(v->u) : static_cast<double>(v->i);
  fail("metadata key " + quoted(key) + " is " + std::string(gguf_type_name(v->type)) +
       ", expected a number");
}
std::optional<float> GgufFile::find_f32(std::string_view key) const {
  std::optional<double> d = find_f64(key);
  if (!d) return std::nullopt;
  return static_cast<float>(*d);
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::boolean)
    fail("metadata key " + quoted(key) + " is " + std::string(gguf_type_name(v->type)) +
         ", expected bool");
  return v->u != 0;
}

std::optional<std::string_view> GgufFile::find_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::string)
    fail("metadata key " + quoted(key) + " is " + std::string(gguf_type_name(v->type)) +
         ", expected string");
  return v->str;
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  require(key);
  return *find_u32(key);
}
int32_t GgufFile::get_i32(std::string_view key) const {
  require(key);
  return *find_i32(key);
}
uint64_t GgufFile::get_u64(std::string_view key) const {
  require(key);
  return *find_u64(key);
}
int64_t GgufFile::get_i64(std::string_view key) const {
  require(key);
  return *find_i64(key);
}
float GgufFile::get_f32(std::string_view key) const {
  require(key);
  return *find_f32(key);
}
double GgufFile::get_f64(std::string_view key) const {
  require(key);
  return *find_f64(key);
}
bool GgufFile::get_bool(std::string_view key) const {
  require(key);
  return *find_bool(key);
}
std::string_view GgufFile::get_string(std::string_view key) const {
  require(key);
  return *find_string(key);
}

std::optional<std::vector<std::string_view>> GgufFile::find_string_array(
    std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::array || v->elem_type != GgufType::string)
    fail("metadata key " + quoted(key) + " is not an array of strings");
  return v->strings;
}

std::optional<std::vector<float>> GgufFile::find_f32_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::array || !v->data)
    fail("metadata key " + quoted(key) + " is not an array of numbers");
  std::vector<float> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) out[i] = static_cast<float>(v->number_at(i));
  return out;
}

template <class T>
std::optional<std::vector<T>> GgufFile::find_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::array || !gguf_type_is_integer(v->elem_type))
    fail("metadata key " + quoted(key) + " is not an array of integers");
  std::vector<T> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    uint64_t u = 0;
    int64_t s = 0;
    double f = 0;
    bool fits = array_element(*v, i, &u, &s, &f) == Kind::unsigned_int ? std::in_range<T>(u)
                                                                       : std::in_range<T>(s);
    if (!fits)
      fail("metadata key " + quoted(key) + ": element " + num(i) + " does not fit in " +
           int_name<T>());
    out[i] = is_unsigned(v->elem_type) ? static_cast<T>(u) : static_cast<T>(s);
  }
  return out;
}

std::optional<std::vector<int32_t>> GgufFile::find_i32_array(std::string_view key) const {
  return find_int_array<int32_t>(key);
}
std::optional<std::vector<int64_t>> GgufFile::find_i64_array(std::string_view key) const {
  return find_int_array<int64_t>(key);
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  require(key);
  return *find_string_array(key);
}
std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  require(key);
  return *find_f32_array(key);
}
std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  require(key);
  return *find_i32_array(key);
}
std::vector<int64_t> GgufFile::get_i64_array(std::string_view key) const {
  require(key);
  return *find_i64_array(key);
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (!t) fail("no tensor named " + quoted(name));
  return *t;
}

}  // namespace kiln
