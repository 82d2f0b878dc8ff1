#include "models/matmul.h"

#include "ir/error.h"
#include "kernels/quant/rows16.h"
#include "kernels/quant/split_sums.h"

namespace kiln {

namespace {

void* mut(const void* p) { return const_cast<void*>(p); }  // kernels only read inputs

void check_room(const char* what, int64_t t, int64_t k, const QuantizedBuffers& q) {
  if (t * k > q.capacity)
    throw Error(std::string(what) + ": " + std::to_string(t) + " x " + std::to_string(k) +
                " activations do not fit the quantized buffers (room for " +
                std::to_string(q.capacity) + ")");
}

DType float_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return DType::f32;
    case GgmlType::f16: return DType::f16;
    case GgmlType::bf16: return DType::bf16;
    default: throw Error("tensor type " + ggml_type_name(t) + " is not a float type");
  }
}

}  // namespace

bool is_block_quantized(GgmlType t) {
  return t == GgmlType::q4_0 || t == GgmlType::q8_0 || t == GgmlType::q4_K || t == GgmlType::q6_K;
}

int64_t activation_block(GgmlType w) {
  return w == GgmlType::q4_K || w == GgmlType::q6_K ? 256 : 32;
}

Plan::PlanArg TokenCount::times(int64_t per_token) const {
  if (slot.empty()) return Arg::scalar_int(t * per_token);
  return Plan::Dynamic{slot, t, true, per_token};
}

LaunchDesc quantize_activations(const float* x, const TokenCount& t, int64_t k,
                                const QuantizedBuffers& q, int64_t qblock) {
  check_room("quantize_q8", t.t, k, q);
  if (k % qblock)
    throw Error("quantize_q8: row length " + std::to_string(k) + " is not a multiple of " +
                std::to_string(qblock));
  int64_t nb = t.t * k / 32;
  return {"quantize_q8",
          {},
          {{"x", Arg::buffer(mut(x), t.t * k)},
           {"q", Arg::buffer(q.q, t.t * k)},
           {"d", Arg::buffer(q.d, nb)},
           {"s", Arg::buffer(q.s, nb)},
           {"s8", Arg::buffer(q.s8, split_sum_bytes(nb))},
           {"nblocks", t.times(k / 32)}},
          {},
          {{"QBLOCK", qblock}}};
}

LaunchDesc matmul(const WeightView& w, const float* x, const QuantizedBuffers& q, float* y,
                  const TokenCount& tc) {
  const int64_t t = tc.t;
  int64_t wbytes = ggml_row_bytes(w.type, w.k) * w.m;
  if (is_block_quantized(w.type)) {
    check_room("matmul", t, w.k, q);
    Plan::Args args = {{"xq", Arg::buffer(q.q, t * w.k)},
                       {"xd", Arg::buffer(q.d, t * w.k / 32)},
                       {"xs", Arg::buffer(q.s, t * w.k / 32)},
                       {"y", Arg::buffer(y, t * w.m)},
                       {"m", Arg::scalar_int(w.m)},
                       {"k", Arg::scalar_int(w.k)},
                       {"t", tc.times(1)}};
    auto qt = static_cast<ggml::QuantType>(w.type);
    if (w.rows16) {
      if (!ggml::has_rows16(qt))
        throw Error("no 16-row interleaved layout for " + ggml_type_name(w.type));
      args["w"] = Arg::buffer(mut(w.rows16), ggml::rows16_bytes(qt, w.m, w.k));
      args["xs8"] = Arg::buffer(q.s8, split_sum_bytes(t * w.k / 32));
      return {"qgemv_rows16", {}, args, {}, {{"FMT", static_cast<int64_t>(w.type)}}};
    }
    args["w"] = Arg::buffer(mut(w.data), wbytes);
    return {"qgemv", {}, args, {}, {{"FMT", static_cast<int64_t>(w.type)}}};
  }
  if (w.rows16) throw Error("no 16-row interleaved layout for " + ggml_type_name(w.type));
  DType wt = float_dtype(w.type);
  if (t == 1 && tc.slot.empty())
    return {"gemv",
            {{"W", wt}, {"X", DType::f32}},
            {{"w", Arg::buffer(mut(w.data), w.m * w.k)},
             {"x", Arg::buffer(mut(x), w.k)},
             {"y", Arg::buffer(y, w.m)},
             {"m", Arg::scalar_int(w.m)},
             {"k", Arg::scalar_int(w.k)}},
            {},
            {}};
  return {"gemm",
          {{"W", wt}},
          {{"w", Arg::buffer(mut(w.data), w.m * w.k)},
           {"x", Arg::buffer(mut(x), t * w.k)},
           {"y", Arg::buffer(y, t * w.m)},
           {"t", tc.times(1)},
           {"n", Arg::scalar_int(w.m)},
           {"k", Arg::scalar_int(w.k)}},
          {},
          {}};
}

}  // namespace kiln
