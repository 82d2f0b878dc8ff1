// Int4 weight-only GEMV and prompt-GEMM problems for `kiln bench`, group 128:
// - int4w: gemv_int4w on the row-major form (zero point 8);
// - int4w-rows16: the same weights interleaved, gemv_int4w_rows16;
// - awq: gemv_awq on AutoAWQ's layout from Kiln's packer, x in f32;
// - awq-int4w, awq-rows16: those AWQ weights repacked at load
//   (awq_to_int4w) into int4w rows with zero points, row-major or
//   interleaved.
// The int4w kernels take x as quantize_q8 blocks, for t tokens (gemv_awq
// takes one f32 x).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/host_memory.h"
#include "runtime/named_args.h"

namespace kiln {

struct Int4Workload {
  std::string kernel;
  std::map<std::string, int64_t> fixed;  // non-tunable constexprs
  std::vector<HostMemory> memory;
  LaunchArgs args;
  // quantize_q8 (QBLOCK 32) of an f32 x [t, k] into the kernel's x blocks;
  // empty for awq.
  LaunchArgs quantize_args;
  // Packed weights + scales (+ zero points), without the interleave's
  // alignment padding: the bytes the format needs, not what Kiln reads.
  int64_t weight_bytes = 0;
};

// The formats above, in that order.
const std::vector<std::string>& int4_formats();
// y[t, m] = x[t, k] W[m, k]^T in `format`; throws kiln::Error for other
// names, and for t > 1 with awq (its kernel is a GEMV).
Int4Workload int4_workload(const std::string& format, int64_t m, int64_t k, int64_t t = 1);

}  // namespace kiln
