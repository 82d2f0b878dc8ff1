#include "kernels/attention/attention_sinks.h"

#include <cmath>
#include <limits>

namespace kiln {

std::optional<Buffer> declare_sinks(KernelBuilder& k, const Spec& s) {
  if (!s.constexpr_("SINKS")) return std::nullopt;
  return k.buffer("sinks", DType::f32);
}

Value sink_logit(const std::optional<Buffer>& sinks, const Value& head) {
  if (!sinks) return {};
  return load(*sinks + head.to(DType::i64)) * static_cast<float>(M_LOG2E);
}

Value softmax_normaliser(const Value& m, const Value& l, const Value& sink) {
  const Shape& shape = l.shape();
  auto zero = zeros(DType::f32, shape);
  if (!sink.valid()) return where(l > zero, 1.0f / l, zero);
  // Both terms relative to M = max(m, sink): the state's accumulator and sum
  // are relative to m, so they gain 2^(m - M), and the sink adds 2^(s - M).
  // With s = -inf, M = m and the factor is 2^0 = 1: the bits of 1 / l.
  auto s = broadcast_to(sink, shape);
  auto top = maximum(m, s);
  auto top_sub = where(top > -std::numeric_limits<double>::infinity(), top, zero);
  auto f = exp2(m - top_sub);
  auto den = l * f + exp2(s - top_sub);
  return where(den > zero, f / den, zero);
}

}  // namespace kiln
