#include "models/packed_weights.h"

#include <cstring>
#include <vector>

#include "kernels/quant/int4w.h"
#include "kernels/quant/rows16.h"
#include "models/hf_checkpoint.h"

namespace kiln {

namespace {

// The rows of t as one [rows, k] matrix when it can be interleaved, else 0. Experts [k, m,
// n_expert] are n_expert * m rows of k: with m a multiple of 16 no group of 16 rows straddles two
// experts.
int64_t rows16_rows(const GgufTensor& t) {
  if (!is_block_quantized(t.type) || !ggml::has_rows16(static_cast<ggml::QuantType>(t.type)) ||
      t.shape.size() < 2 || t.shape.size() > 3)
    return 0;
  int64_t k = t.shape[0], m = t.shape[1];
  if (m % 16 || k % 256) return 0;
  return m * (t.shape.size() == 3 ? t.shape[2] : 1);
}

// An int4 matrix's (or stack of experts') group size when its 16-row
// interleave exists (m a multiple of 16, k of 256, a group int4w's layout
// has), else 0. A stack interleaves as its n_expert * m rows.
int64_t int4_group(const GgufFile& file, const GgufTensor& t) {
  const GgufTensor* s = file.find_tensor(t.name + kBlockScaleSuffix);
  if (t.type != GgmlType::i4 || t.shape.size() < 2 || t.shape.size() > 3 || !s ||
      s->shape.size() != t.shape.size() || s->shape[0] <= 0 ||
      !file.find_tensor(t.name + kZeroPointSuffix))
    return 0;
  const int64_t k = t.shape[0], m = t.shape[1], g = k / s->shape[0];
  return m % 16 == 0 && k % 256 == 0 && (g == 32 || g == 64 || g == 128) ? g : 0;
}

int64_t int4_rows(const GgufTensor& t) {
  return t.shape[1] * (t.shape.size() == 3 ? t.shape[2] : 1);
}

}  // namespace

PackedWeights::PackedWeights(const GgufFile& file, ThreadPool& pool) {
  // One allocation for all copies: large allocations round up to 2 MiB
  // huge pages, which per tensor would waste about 1 MiB each.
  std::vector<std::pair<const GgufTensor*, size_t>> todo;
  size_t total = 0;
  for (const GgufTensor& t : file.tensors())
    if (int64_t rows = rows16_rows(t)) {
      todo.emplace_back(&t, total);
      total += static_cast<size_t>(
          ggml::rows16_bytes(static_cast<ggml::QuantType>(t.type), rows, t.shape[0]));
      total = (total + 63) / 64 * 64;  // each copy starts on a cache line
    } else if (int64_t g = int4_group(file, t)) {
      todo.emplace_back(&t, total);
      total += static_cast<size_t>(Int4wRows16{g, true}.bytes(int4_rows(t), t.shape[0]));
      total = (total + 63) / 64 * 64;
    }
  if (todo.empty()) return;
  arena_ = HostMemory(total);
  for (auto [t, offset] : todo) {
    if (t->type == GgmlType::i4) {  // a Hugging Face folder's AWQ weights, repacked once
      const int64_t k = t->shape[0], m = int4_rows(*t), g = int4_group(file, *t);
      const GgufTensor& s = file.tensor(t->name + kBlockScaleSuffix);
      const GgufTensor& z = file.tensor(t->name + kZeroPointSuffix);
      Int4wRows r{m,
                  k,
                  g,
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
    const auto qt = static_cast<ggml::QuantType>(t->type);
    const int64_t k = t->shape[0];
    const size_t row_bytes = static_cast<size_t>(ggml_row_bytes(t->type, k));
    const size_t group_bytes = static_cast<size_t>(ggml::rows16_bytes(qt, 16, k));
    uint8_t* out = arena_.data() + offset;
    pool.parallel_for(rows16_rows(*t) / 16, [&](int64_t g0, int64_t g1) {
      ggml::interleave_rows16(qt, t->data + static_cast<size_t>(g0) * 16 * row_bytes,
                              (g1 - g0) * 16, k, out + static_cast<size_t>(g0) * group_bytes);
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
