// Weights copied once, at load, into the layouts faster kernels read.
//
// GGUF stores each row's blocks contiguously, so the 4 codes an int8 dot
// lane multiplies belong to one row. The fast kernels want a lane per row:
// Q4_0, Q8_0, Q4_K and Q6_K interleaved across 16 rows
// (kernels/quant/rows16.h). Every such matrix whose rows are a multiple of
// 16 and columns of 256 (and experts of 3-D tensors alike) is interleaved
// here, tensor by tensor, and the mapped pages of the source are released
// right after, so peak memory stays about one copy of the weights. Each
// tensor's row groups are split across the thread pool: the copy and the
// first touch of its fresh pages are most of a model's load time. The
// interleaved copy then serves both prefill and decode (ops::linear). A
// Hugging Face folder's int4 (AWQ) matrices get int4w's interleave alike.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "models/gguf.h"
#include "runtime/host_memory.h"
#include "targets/cpu/thread_pool.h"

namespace kiln {

class PackedWeights {
 public:
  PackedWeights() = default;
  PackedWeights(const GgufFile& file, ThreadPool& pool);

  // Tensor t's 16-row interleaved copy (for 3-D expert tensors, the
  // experts' copies back to back), or nullptr when t was not interleaved.
  const uint8_t* rows16(const GgufTensor& t) const;

 private:
  HostMemory arena_;                      // every copy, 64-byte aligned
  std::map<std::string, size_t> rows16_;  // tensor name -> offset in arena_
};

}  // namespace kiln
