#include "kernels/attention/prefill_rows.h"

#include <cmath>
#include <vector>

#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/kv_walk.h"

namespace kiln {

void check_prefill_constexprs(const std::string& kernel, const Spec& s) {
  check_attention_constexprs(kernel, s.constexpr_("HEAD_DIM"), attention_lanes(s.target),
                             {{"BLOCK_M", s.constexpr_("BLOCK_M")}});
  check_kv_layout(kernel, s);
}

PrefillInputs declare_prefill_params(KernelBuilder& k, const Spec& s, DType q_dtype) {
  const DType KV = s.dtype("KV");
  auto q = k.buffer("q", q_dtype), kc = k.buffer("k", KV), vc = k.buffer("v", KV),
       out = k.buffer("out", s.dtype("T"));
  auto n_tokens = k.scalar("n_tokens", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32), n_kv = k.scalar("n_kv_heads", DType::i32);
  auto max_ctx = k.scalar("max_ctx", DType::i32);
  auto kv_len = k.scalar("kv_len", DType::i32), pos0 = k.scalar("pos0", DType::i32);
  auto scale = k.scalar("scale", DType::f32);
  auto window = k.scalar("window", DType::i32);
  KvView kv = declare_kv_view(k, s, kc, vc, max_ctx);
  auto h = k.program_id(1);
  kv.kvh = h / (n_heads / n_kv);
  return {q,
          {},
          out,
          kv,
          zeros(DType::i32, {}),
          n_tokens,
          pos0,
          kv_len,
          window,
          h,
          n_heads,
          k.program_id(0) * static_cast<int>(s.constexpr_("BLOCK_M")),
          scale,
          {}};
}

LaunchShape prefill_launch_shape(const std::string& kernel, const Spec& s, const ScalarArgs& a) {
  AttentionSizes z = attention_sizes(kernel, s, a);
  return LaunchShape{{cdiv(z.n_tokens, s.constexpr_("BLOCK_M")), z.n_heads, 1}, z.buffer_elems()};
}

void prefill_rows(KernelBuilder& k, const Spec& s, const PrefillInputs& in) {
  const int64_t D = s.constexpr_("HEAD_DIM"), BM = s.constexpr_("BLOCK_M");
  WalkInputs w{.q = in.q,
               .kv = in.kv,
               .q8 = in.q8,
               .qscale = in.scale * static_cast<float>(M_LOG2E),
               .head_dim = D,
               .key_block = kv_key_block(s.target)};
  std::vector<Value> sinks, live;
  for (int64_t r = 0; r < BM; ++r) {
    auto tok = minimum(in.t0 + static_cast<int>(r), in.n_tokens - 1);
    auto pos = in.pos0 + tok;
    w.qrow.push_back(((in.row0 + tok) * in.n_heads + in.head).to(DType::i64) * D);
    w.lo.push_back(window_begin(pos, in.window));
    w.hi.push_back(minimum(pos + 1, in.kv_len));
    sinks.push_back(in.sink);
    live.push_back(in.t0 + static_cast<int>(r) < in.n_tokens);
  }
  WalkState st = walk_start(k, static_cast<size_t>(BM), D);
  // Positions grow with the rows, and so do both ends of their ranges.
  walk_keys(k, w, w.lo.front(), w.hi.back(), st);
  walk_finish(w, st, in.out, sinks, live);
}

}  // namespace kiln
