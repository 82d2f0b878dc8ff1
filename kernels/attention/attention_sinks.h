// Attention sinks (GPT-OSS): a learned logit s_h per query head that joins
// every softmax's denominator and brings no value row:
//   out = sum_j e^(x_j) v_j / (e^(s_h) + sum_j e^(x_j)),
// x_j the scaled scores, s_h in the same units (as llama.cpp's flash
// attention reads them). The constexpr SINKS = 1 adds the f32 buffer
// `sinks` [n_heads], declared after the kernel's scalars; with SINKS = 0
// (the default) the kernels normalise by 1 / l alone, and a sink of -inf
// gives the same bits.
#pragma once

#include <optional>

#include "ir/builder.h"
#include "ir/spec.h"

namespace kiln {

// The `sinks` buffer when the spec's SINKS is 1.
std::optional<Buffer> declare_sinks(KernelBuilder& k, const Spec& s);

// Head `head`'s sink in log2 units (the kernels' scores are log2-scaled);
// an invalid Value without sinks.
Value sink_logit(const std::optional<Buffer>& sinks, const Value& head);

// What a softmax state's accumulator is multiplied by to give the output:
// m (log2 units) and l its running max and sum (scalars or [n] alike), the
// sink of sink_logit (or invalid). A state that saw no key (m = -inf) and
// no finite sink gives 0, not NaN.
Value softmax_normaliser(const Value& m, const Value& l, const Value& sink);

}  // namespace kiln
