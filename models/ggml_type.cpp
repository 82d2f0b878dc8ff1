#include "models/ggml_type.h"

#include <cstring>
#include <vector>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"

namespace kiln {

namespace {

// ggml's names for its type ids, so errors say what the file holds.
constexpr const char* kGgmlNames[] = {
    "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
    "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
    "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
    "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
    "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
    "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
};

struct Entry {
  uint32_t id;
  GgmlTypeInfo info;
};

// Plain floats here; the block geometry of the quantized types comes from
// the quantisers' own table (kernels/quant/ggml_blocks.h).
const std::vector<Entry>& supported() {
  static const std::vector<Entry> table = [] {
    std::vector<Entry> t = {{0, {"F32", 1, 4}},
                            {1, {"F16", 1, 2}},
                            {30, {"BF16", 1, 2}},
                            {1024, {"F8_E4M3", 1, 1, true}},
                            {1025, {"I4", 2, 1, true}},
                            {1026, {"U8", 1, 1, true}},
                            {1027, {"I8_CHANNEL", 1, 1, true}}};
    for (const ggml::BlockFormat& f : ggml::block_formats()) {
      auto id = static_cast<uint32_t>(f.type);
      t.push_back({id, {kGgmlNames[id], f.block_elems, f.block_bytes}});
    }
    return t;
  }();
  return table;
}

}  // namespace

const GgmlTypeInfo* find_ggml_type(uint32_t id) {
  for (const Entry& e : supported())
    if (e.id == id) return &e.info;
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType t) {
  const GgmlTypeInfo* info = find_ggml_type(static_cast<uint32_t>(t));
  if (!info) throw Error("unsupported ggml type id " + std::to_string(static_cast<uint32_t>(t)));
  return *info;
}

std::string ggml_type_name(uint32_t id) {
  if (id < std::size(kGgmlNames)) return kGgmlNames[id];
  if (const GgmlTypeInfo* info = find_ggml_type(id)) return info->name;
  return "type " + std::to_string(id);
}

std::string supported_ggml_type_names() {
  std::string names;
  for (const Entry& e : supported())
    if (!e.info.in_memory_only) names += (names.empty() ? "" : ", ") + std::string(e.info.name);
  return names;
}

void ggml_to_f32(GgmlType t, const uint8_t* data, int64_t n, float* out) {
  switch (t) {
    case GgmlType::f32: std::memcpy(out, data, static_cast<size_t>(n) * 4); return;
    case GgmlType::f16:
    case GgmlType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = t == GgmlType::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
      }
      return;
    default: ggml::dequantize(static_cast<ggml::QuantType>(t), data, n, out);
  }
}

void ggml_from_f32(GgmlType t, const float* x, int64_t n, uint8_t* out) {
  switch (t) {
    case GgmlType::f32: std::memcpy(out, x, static_cast<size_t>(n) * 4); return;
    case GgmlType::f16:
    case GgmlType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == GgmlType::f16 ? f32_to_f16_bits(x[i]) : f32_to_bf16_bits(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    default: ggml::quantize(static_cast<ggml::QuantType>(t), x, n, out);
  }
}

int64_t ggml_row_bytes(GgmlType t, int64_t n) {
  const GgmlTypeInfo& info = ggml_type_info(t);
  if (n < 0 || n % info.block_elems != 0) return -1;
  return n / info.block_elems * info.block_bytes;
}

bool is_block_quantized(GgmlType t) {
  const GgmlTypeInfo* info = find_ggml_type(static_cast<uint32_t>(t));
  return info && info->block_elems > 1;
}

}  // namespace kiln
