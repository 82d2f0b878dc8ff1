// What the host and the grouped kernels agree on about MoE rows, without the
// DSL: the grouped modes (kernels/moe/expert_tiles.h) and how many rows
// moe_sort may fill. The runtime's ops size their tensors with it.
#pragma once

#include <cstdint>

namespace kiln {

// A matmul's GROUPED constexpr: plain, rows gathered from the layer input,
// or rows in moe_sort's order.
enum class Grouping : int64_t { plain = 0, gather = 1, sorted = 2 };

// The rows moe_sort may fill for tokens x k pairs over n_expert experts in
// tiles of `tile`: every pair, plus each chosen expert's padding.
inline int64_t moe_rows_bound(int64_t tokens, int64_t k, int64_t n_expert, int64_t tile) {
  const int64_t pairs = tokens * k, experts = pairs < n_expert ? pairs : n_expert;
  return (pairs + experts * (tile - 1) + tile - 1) / tile * tile;
}

}  // namespace kiln
