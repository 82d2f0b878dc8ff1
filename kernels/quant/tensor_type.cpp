#include "kernels/quant/tensor_type.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "ir/error.h"

namespace kiln {

namespace {

using T = TensorType;
using K = TensorKind;

constexpr TensorTypeInfo kTypes[] = {
    {T::f32, "F32", 1, 4, K::plain},
    {T::f16, "F16", 1, 2, K::plain},
    {T::bf16, "BF16", 1, 2, K::plain},
    {T::q4_0, "Q4_0", 32, 18, K::blocks},
    {T::q4_1, "Q4_1", 32, 20, K::blocks},
    {T::q5_0, "Q5_0", 32, 22, K::blocks},
    {T::q5_1, "Q5_1", 32, 24, K::blocks},
    {T::q8_0, "Q8_0", 32, 34, K::blocks},
    {T::q2_K, "Q2_K", 256, 84, K::blocks},
    {T::q3_K, "Q3_K", 256, 110, K::blocks},
    {T::q4_K, "Q4_K", 256, 144, K::blocks},
    {T::q5_K, "Q5_K", 256, 176, K::blocks},
    {T::q6_K, "Q6_K", 256, 210, K::blocks},
    {T::iq2_xxs, "IQ2_XXS", 256, 66, K::blocks},
    {T::iq2_xs, "IQ2_XS", 256, 74, K::blocks},
    {T::iq3_xxs, "IQ3_XXS", 256, 98, K::blocks},
    {T::iq4_nl, "IQ4_NL", 32, 18, K::blocks},
    {T::iq3_s, "IQ3_S", 256, 110, K::blocks},
    {T::iq2_s, "IQ2_S", 256, 82, K::blocks},
    {T::iq4_xs, "IQ4_XS", 256, 136, K::blocks},
    {T::mxfp4, "MXFP4", 32, 17, K::blocks},
    {T::f8_e4m3, "F8_E4M3", 1, 1, K::kiln_own},
    {T::i4, "I4", 2, 1, K::kiln_own},
    {T::u8, "U8", 1, 1, K::kiln_own},
    {T::i8_channel, "I8_CHANNEL", 1, 1, K::kiln_own},
};
// The block formats' run of the table (it is in kind order).
constexpr size_t kFirstBlocks =
    static_cast<size_t>(std::find_if(std::begin(kTypes), std::end(kTypes),
                                     [](const TensorTypeInfo& t) { return t.kind == K::blocks; }) -
                        std::begin(kTypes));
constexpr size_t kBlockCount =
    static_cast<size_t>(std::count_if(std::begin(kTypes), std::end(kTypes),
                                      [](const TensorTypeInfo& t) { return t.kind == K::blocks; }));
static_assert(std::all_of(kTypes + kFirstBlocks, kTypes + kFirstBlocks + kBlockCount,
                          [](const TensorTypeInfo& t) { return t.kind == K::blocks; }));

// The last field of each block ends where the block does.
static_assert(fields::Q4_0::qs + 16 == 18 && fields::Q4_1::qs + 16 == 20);
static_assert(fields::Q5_0::qs + 16 == 22 && fields::Q5_1::qs + 16 == 24);
static_assert(fields::Q8_0::qs + 32 == 34 && fields::IQ4_NL::qs + 16 == 18);
static_assert(fields::Q2_K::dmin + 2 == 84 && fields::Q3_K::d + 2 == 110);
static_assert(fields::Q4_K::qs + 128 == 144 && fields::Q5_K::qs + 128 == 176);
static_assert(fields::Q6_K::d + 2 == 210 && fields::IQ4_XS::qs + 128 == 136);
static_assert(fields::MXFP4::qs + 16 == 17 && fields::IQ2_XXS::qs + 64 == 66);
static_assert(fields::IQ2_XS::scales + 8 == 74 && fields::IQ2_S::scales + 8 == 82);
static_assert(fields::IQ3_XXS::aux + 32 == 98 && fields::IQ3_S::scales + 4 == 110);

// ggml's names for its type ids, so errors say what a file holds.
constexpr const char* kGgmlNames[] = {
    "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
    "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
    "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
    "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
    "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
    "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
};

}  // namespace

std::span<const TensorTypeInfo> tensor_types() { return kTypes; }

std::span<const TensorTypeInfo> block_types() {
  return std::span<const TensorTypeInfo>(kTypes).subspan(kFirstBlocks, kBlockCount);
}

const TensorTypeInfo* find_tensor_type(uint32_t id) {
  for (const TensorTypeInfo& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const TensorTypeInfo& tensor_type_info(TensorType t) {
  const TensorTypeInfo* info = find_tensor_type(static_cast<uint32_t>(t));
  if (!info) throw Error("unsupported tensor type id " + std::to_string(static_cast<uint32_t>(t)));
  return *info;
}

const TensorTypeInfo* find_tensor_type_named(std::string_view name) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  for (const TensorTypeInfo& t : kTypes) {
    const std::string_view n = t.name;
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(),
                                              [&](char a, char b) { return lower(a) == lower(b); }))
      return &t;
  }
  return nullptr;
}

const TensorTypeInfo& block_type_info(int64_t id) {
  for (const TensorTypeInfo& t : block_types())
    if (type_id(t.type) == id) return t;
  std::string known;
  for (const TensorTypeInfo& t : block_types())
    known +=
        (known.empty() ? "" : ", ") + std::string(t.name) + "=" + std::to_string(type_id(t.type));
  throw Error("type id " + std::to_string(id) + " is not a block format Kiln supports (" + known +
              ")");
}

std::string tensor_type_name(uint32_t id) {
  if (id < std::size(kGgmlNames)) return kGgmlNames[id];
  if (const TensorTypeInfo* info = find_tensor_type(id)) return info->name;
  return "type " + std::to_string(id);
}

std::string supported_tensor_type_names() {
  std::string names;
  for (const TensorTypeInfo& t : kTypes)
    if (t.kind != TensorKind::kiln_own) names += (names.empty() ? "" : ", ") + std::string(t.name);
  return names;
}

bool is_block_quantized(TensorType t) {
  const TensorTypeInfo* info = find_tensor_type(static_cast<uint32_t>(t));
  return info && info->kind == TensorKind::blocks;
}

}  // namespace kiln
