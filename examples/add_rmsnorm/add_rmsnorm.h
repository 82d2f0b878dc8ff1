// A residual add fused with the RMSNorm that follows it, as a transformer
// block does between its sublayers: h = x + res is written back to res (the
// residual stream), and y = h * rsqrt(mean(h^2) + eps) * w, one row per
// program. One pass reads x and res once instead of twice.
#pragma once

#include <kiln/kiln.h>

const kiln::KernelDef& add_rmsnorm_def();
