// A quantized GEMV problem for `kiln bench`: random weights quantised with
// the ggml reference quantisers, x already in quantize_q8's 8-bit blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/interpreter.h"
#include "kernels/quant/ggml_blocks.h"
#include "runtime/host_memory.h"

namespace kiln {

class QgemvWorkload {
 public:
  QgemvWorkload(int64_t m, int64_t k, ggml::QuantType fmt, uint64_t seed = 1);

  std::vector<Arg> args();
  int64_t weight_bytes() const { return static_cast<int64_t>(w_.size()); }

 private:
  int64_t m_, k_;
  HostMemory w_, xq_, xd_, xs_, y_;
};

}  // namespace kiln
