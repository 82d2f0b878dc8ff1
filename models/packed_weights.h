// Weights copied once, at load, into the layouts the backend's kernels read.
//
// GGUF stores each row's blocks contiguously, so the 4 codes an int8 dot
// lane multiplies belong to one row. A backend whose policy
// (runtime/kernel_policy.h) wants a lane per row gets the block-quantized
// matrices (and experts of 3-D tensors alike) interleaved across 16 rows
// (kernels/quant/rows16.h) here, tensor by tensor, and the mapped pages of
// the source are released right after, so peak memory stays about one copy
// of the weights. Each tensor's row groups are split across the host
// threads: the copy and the first touch of its fresh pages are most of a
// model's load time. The interleaved copy then serves both prefill and
// decode (ops::linear). A Hugging Face folder's int4 (AWQ) matrices get
// int4w's interleave alike. A policy that keeps the file's layout gets no
// copies at all.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "models/gguf.h"
#include "runtime/host_memory.h"
#include "runtime/runtime.h"

namespace kiln {

class PackedWeights {
 public:
  PackedWeights() = default;
  PackedWeights(const GgufFile& file, Runtime& rt);

  // Tensor t's 16-row interleaved copy (for 3-D expert tensors, the
  // experts' copies back to back), or nullptr when t was not interleaved.
  const uint8_t* rows16(const GgufTensor& t) const;
  // Host memory the copies take.
  size_t bytes() const { return arena_.size(); }

 private:
  HostMemory arena_;                      // every copy, 64-byte aligned
  std::map<std::string, size_t> rows16_;  // tensor name -> offset in arena_
};

}  // namespace kiln
