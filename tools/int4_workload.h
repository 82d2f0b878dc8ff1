// Int4 weight-only GEMV problems for `kiln bench`: gemv_int4w (per-group
// scales, 8 as zero point, x as quantize_q8 blocks), gemv_awq (AutoAWQ
// layout from Kiln's packer, x in f32) and AWQ repacked into int4w rows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "runtime/host_memory.h"

namespace kiln {

struct Int4Workload {
  std::string kernel;
  std::map<std::string, int64_t> fixed;  // non-tunable constexprs
  std::vector<HostMemory> memory;
  std::vector<Arg> args;
  int64_t weight_bytes = 0;  // packed weights + scales (+ zero points)
};

// y[m] = W[m, k] x with group-128 scales.
Int4Workload int4w_workload(int64_t m, int64_t k);
// y[m] = x W[k, m] in AWQ layout, group 128.
Int4Workload awq_workload(int64_t m, int64_t k);
// The same AWQ weights repacked at load into int4w rows (awq_to_int4w), run
// by gemv_int4w with their zero points, x as quantize_q8 blocks.
Int4Workload awq_int4w_workload(int64_t m, int64_t k);

}  // namespace kiln
