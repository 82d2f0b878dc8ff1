// Scalar references of the MoE sort and combine (kernels/moe/moe_sort.cpp,
// moe_combine.cpp), written from their contracts, for the kernel tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln::test {

struct SortedPairs {
  std::vector<int32_t> counts, offsets, sorted, pos, tile_expert;
};

// Pairs in (token, slot) order; each expert's run padded to `tile` rows,
// runs in expert order; negative ids dropped.
inline SortedPairs sort_pairs(const std::vector<int32_t>& ids, int64_t k, int64_t n_expert,
                              int64_t tile, int64_t rows) {
  SortedPairs s;
  s.counts.assign(n_expert, 0);
  for (int32_t e : ids)
    if (e >= 0) ++s.counts[e];
  s.sorted.assign(rows, -1);
  s.pos.assign(ids.size(), -1);
  s.tile_expert.assign(rows / tile, -1);
  int32_t end = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    s.offsets.push_back(end);
    const int32_t padded = static_cast<int32_t>((s.counts[e] + tile - 1) / tile * tile);
    for (int32_t r = end; r < end + padded; r += static_cast<int32_t>(tile))
      s.tile_expert[r / tile] = static_cast<int32_t>(e);
    end += padded;
  }
  std::vector<int32_t> fill(n_expert, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) continue;
    const int32_t r = s.offsets[ids[i]] + fill[ids[i]]++;
    s.sorted[r] = static_cast<int32_t>(i / k);
    s.pos[i] = r;
  }
  return s;
}

// out[t] (+)= sum_j w[t, j] * y[pos[t, j]], one f32 fused multiply-add per slot.
inline std::vector<float> combine(const std::vector<float>& y, const std::vector<int32_t>& pos,
                                  const std::vector<float>& w, int64_t k, int64_t n,
                                  std::vector<float> out, bool add) {
  const int64_t tokens = static_cast<int64_t>(pos.size()) / k;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < n; ++c) {
      float acc = add ? out[t * n + c] : 0.0f;
      for (int64_t j = 0; j < k; ++j)
        if (pos[t * k + j] >= 0) acc = std::fma(w[t * k + j], y[pos[t * k + j] * n + c], acc);
      out[t * n + c] = acc;
    }
  return out;
}

}  // namespace kiln::test
