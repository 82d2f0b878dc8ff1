#include "models/packed_weights.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "ir/error.h"
#include "kernels/quant/int4w.h"
#include "kernels/quant/rows16.h"
#include "models/hf_checkpoint.h"

namespace kiln {

namespace {

// The matrix (or stack of experts, ne = [k, m, n_expert]) t as the policy
// sees it, when it is block-quantized or an int4 matrix with its scales and
// zero points beside it; else nothing to lay out.
std::optional<WeightCase> weight_case(const GgufFile& file, const GgufTensor& t) {
  if (t.shape.size() < 2 || t.shape.size() > 3) return std::nullopt;
  WeightCase w{std::nullopt, t.shape[1], t.shape[0], t.shape.size() == 3 ? t.shape[2] : 0, 0};
  if (is_block_quantized(t.type)) {
    w.quant = t.type;
    return w;
  }
  const GgufTensor* s = file.find_tensor(t.name + kBlockScaleSuffix);
  if (t.type != TensorType::i4 || !s || s->shape.size() != t.shape.size() || s->shape[0] <= 0 ||
      w.k % s->shape[0] || !file.find_tensor(t.name + kZeroPointSuffix))
    return std::nullopt;
  w.quant = TensorType::i4;
  w.group = w.k / s->shape[0];
  return w;
}

// With m a multiple of 16 no group of 16 rows straddles two experts, so a
// stack interleaves as its n_expert * m rows.
int64_t rows(const WeightCase& w) { return w.m * std::max<int64_t>(w.experts, 1); }

int64_t rows16_bytes(const WeightCase& w) {
  if (w.quant == TensorType::i4) return Int4wRows16{w.group, true}.bytes(rows(w), w.k);
  return ggml::rows16_bytes(*w.quant, rows(w), w.k);
}

}  // namespace

PackedWeights::PackedWeights(const GgufFile& file, Runtime& rt) {
  const KernelPolicy& policy = rt.backend().policy();
  // One allocation for all copies: large allocations round up to 2 MiB
  // huge pages, which per tensor would waste about 1 MiB each.
  struct Todo {
    const GgufTensor* t;
    WeightCase w;
    size_t offset;
  };
  std::vector<Todo> todo;
  size_t total = 0;
  for (const GgufTensor& t : file.tensors()) {
    const std::optional<WeightCase> w = weight_case(file, t);
    if (!w || policy.weight_layout(*w) != WeightLayout::rows16) continue;
    if (!layout_fits(WeightLayout::rows16, *w))
      throw Error("the " + policy.name() + " kernel policy asks a 16-row layout for tensor '" +
                  t.name + "', which it cannot hold (rows a multiple of 16, columns of 256)");
    todo.push_back({&t, *w, total});
    total += static_cast<size_t>(rows16_bytes(*w));
    total = (total + 63) / 64 * 64;  // each copy starts on a cache line
  }
  if (todo.empty()) return;
  arena_ = HostMemory(total);
  for (const auto& [t, w, offset] : todo) {
    if (w.quant == TensorType::i4) {  // a Hugging Face folder's AWQ weights, repacked once
      const GgufTensor& s = file.tensor(t->name + kBlockScaleSuffix);
      const GgufTensor& z = file.tensor(t->name + kZeroPointSuffix);
      Int4wRows r{rows(w),
                  w.k,
                  w.group,
                  std::vector<uint8_t>(t->data, t->data + t->nbytes),
                  std::vector<uint8_t>(z.data, z.data + z.nbytes),
                  std::vector<uint16_t>(s.nbytes / 2)};
      std::memcpy(r.scales.data(), s.data, s.nbytes);
      std::vector<uint8_t> packed = interleave_int4w_rows16(r);
      std::memcpy(arena_.data() + offset, packed.data(), packed.size());
      rows16_.emplace(t->name, offset);
      continue;
    }
    // Row group g is source rows 16g .. 16g + 15 and bytes g * group_bytes
    // of the copy, so ranges of groups interleave independently.
    const TensorType qt = *w.quant;
    const size_t row_bytes = static_cast<size_t>(ggml_row_bytes(t->type, w.k));
    const size_t group_bytes = static_cast<size_t>(ggml::rows16_bytes(qt, 16, w.k));
    uint8_t* out = arena_.data() + offset;
    rt.parallel_for(rows(w) / 16, [&](int64_t g0, int64_t g1) {
      ggml::interleave_rows16(qt, t->data + static_cast<size_t>(g0) * 16 * row_bytes,
                              (g1 - g0) * 16, w.k, out + static_cast<size_t>(g0) * group_bytes);
    });
    rows16_.emplace(t->name, offset);
    file.release_pages(*t);
  }
}

const uint8_t* PackedWeights::rows16(const GgufTensor& t) const {
  auto it = rows16_.find(t.name);
  return it == rows16_.end() ? nullptr : arena_.data() + it->second;
}

}  // namespace kiln
