// A quantized GEMV/GEMM problem for `kiln bench`: random weights quantised
// with the ggml reference quantisers and `tokens` random activations in f32,
// with room for their quantize_q8 blocks (so a benchmark can time the
// activation quantisation together with the product, as a forward pays it).
// `rows16` interleaves Q4_K/Q6_K weights across 16 rows for qgemv_rows16,
// as a model load does.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant/ggml_blocks.h"
#include "runtime/host_memory.h"
#include "runtime/named_args.h"

namespace kiln {

class QgemvWorkload {
 public:
  QgemvWorkload(int64_t m, int64_t k, TensorType fmt, int64_t tokens = 1, bool rows16 = false,
                uint64_t seed = 1);

  // quantize_q8's arguments (x f32 -> xq, xd, xs, xs8) and the GEMV's
  // (qgemv_rows16 also takes xs8).
  LaunchArgs quantize_args();
  LaunchArgs args();
  // The weights as a stack of `experts` matrices of m / experts rows, the
  // one token routed to every expert: the arguments of the kernel's
  // GROUPED 1 launch (kernels/moe/expert_tiles.h), tiles of one row.
  LaunchArgs grouped_args(int64_t experts);
  int64_t weight_bytes() const { return static_cast<int64_t>(w_.size()); }

 private:
  LaunchArgs operands(int64_t tokens);

  int64_t m_, k_, t_;
  bool rows16_;
  HostMemory w_, x_, xq_, xd_, xs_, xs8_, y_;
  std::vector<int32_t> tile_expert_, sorted_;
};

}  // namespace kiln
