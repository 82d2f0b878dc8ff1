#include "kernels/attention/kv_walk.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/lane_fold.h"
#include "kernels/aura/aura_codes.h"

namespace kiln {

namespace {

// Independent partial sums of the scores, over all the block's heads: 8
// FMA chains hide the FMA latency, and more would take the accumulators'
// registers.
constexpr int64_t kScoreChains = 8;
// Dims per step of the score loop.
constexpr int64_t kDimChunk = 16;

// Vector registers add_values keeps accumulators in, for all rows at once
// (half the AVX-512 file: V rows and weights take the rest).
constexpr int64_t kValueRegisters = 16;

// The part of HEAD_DIM whose accumulators add_values keeps in registers
// for all rows at once: at most kValueRegisters of them (of KB f32 lanes
// each), a power of two dividing HEAD_DIM.
int64_t walk_value_part(int64_t rows, int64_t head_dim, int64_t key_block) {
  int64_t part = head_dim;
  while (part > key_block && rows * (part / key_block) > kValueRegisters) part /= 2;
  return part;
}

// A call for each step of a loop over a K block or its V rows: the step
// (an i32 scalar) and the number of steps. A walk's unmasked blocks
// prefetch the block PREFETCH ahead through it (kv_cache.h).
using BlockStep = std::function<void(const Value& step, int64_t steps)>;
const BlockStep kNoStep = [](const Value&, int64_t) {};

// Offsets into the weights' scratch array (WalkState::scratch) of row
// `row`'s lanes lane .. lane + n - 1 (lane an i32 scalar; a scalar offset
// for n = 1).
Value weight_at(size_t row, const Value& lane, int64_t n) {
  auto first = lane.to(DType::i64) + static_cast<int64_t>(row) * kChunkKeys;
  return n == 1 ? first : broadcast_to(first, {n}) + arange(n).to(DType::i64);
}

// V row `key` widened to f32 [head_dim] (an AURA row in its codes' lane
// order, without its norm: the row's weight carries it), not read outside
// vmask.
Value load_value_row(const KvView& kv, const Value& key, const Value& vmask, int64_t head_dim) {
  if (!kv.vbits) return reshape(load_v_rows(kv, key, 1, vmask), {head_dim});
  return reshape(load_aura_v_rows(kv, key, 1, true, vmask).values, {head_dim});
}

// The weights p of a block's KB keys from first on (an i32 scalar) as P V
// takes them: over an AURA cache times each key's V norm (0 outside
// key_mask), once per key and row, so that add_values' FMAs read them as
// they are; a multiply there would be paid again per part of HEAD_DIM, as
// a scalar multiply and a broadcast per row and key (as many instructions
// as the FMAs).
Value value_weights(const WalkInputs& in, const Value& p, const Value& first,
                    const Value& key_mask) {
  if (!in.kv.vbits) return p;
  return p * load_aura_norms(pin_block_page(in.kv, first), false, first, in.key_block, key_mask);
}

// Each row's scores against K block `block` of a q8_0 cache, [KB] (before
// the softmax scale): per 32-dim block, an i32 sum of u8 x i8 dots (4 dims
// of 16 keys per instruction on AVX-512 VNNI) of the K codes, made unsigned
// by adding 128, and the q codes broadcast from memory; minus 128 times the
// block's q sum, then scaled by q's and the keys' scales. The loop over the
// blocks runs at run time, so q's addresses move with it (see block_scores).
std::vector<Value> q8_block_scores(KernelBuilder& k, const WalkInputs& in, const Value& block,
                                   const Value& key_mask, size_t rows, const BlockStep& step) {
  const int64_t D = in.head_dim, KB = in.key_block, QB = kKvQuantBlock;
  std::vector<Var> score;
  for (size_t h = 0; h < rows; ++h) score.push_back(k.var(zeros(DType::f32, {KB})));
  std::vector<Value> srow;  // each row's first scale/sum index (i64)
  for (size_t h = 0; h < rows; ++h) srow.push_back(in.qrow[h] / QB);
  k.for_(0, static_cast<int>(D / QB), 1, [&](Value b) {
    step(b, D / QB);
    auto bi = b.to(DType::i64);
    std::vector<Var> dots;
    for (size_t h = 0; h < rows; ++h)
      dots.push_back(k.var(broadcast_to(load(*in.q8.sum + (srow[h] + bi)) * -128, {KB})));
    // The block's 8 groups of 4 dims, also a loop at run time: unrolled,
    // the CUDA source grows 8-fold for no speed on the CPU.
    k.for_(b * static_cast<int>(QB), (b + 1) * static_cast<int>(QB), 4, [&](Value d) {
      auto codes = load_k_rows(in.kv, block, d, 4, key_mask);  // [4, KB]
      auto ku =
          reshape(transpose(codes), {4 * KB}).bitcast(DType::u8) ^ full({4 * KB}, 128, DType::u8);
      for (size_t h = 0; h < rows; ++h) {
        auto q4 = load(in.q + (in.qrow[h] + d.to(DType::i64) + arange(4).to(DType::i64)));
        auto qb = reshape(broadcast_to(expand_dims(q4, 0), {KB, 4}), {4 * KB});
        dots[h] = Value(dots[h]) + dot_groups(ku, qb);
      }
    });
    auto kscale = reshape(load_k_scales(in.kv, block, b, key_mask), {KB});
    for (size_t h = 0; h < rows; ++h) {
      auto qs = broadcast_to(load(*in.q8.scale + (srow[h] + bi)), {KB});
      score[h] = fma(Value(dots[h]).to(DType::f32), kscale * qs, Value(score[h]));
    }
  });
  std::vector<Value> sc;
  for (size_t h = 0; h < rows; ++h) sc.push_back(Value(score[h]) * in.qscale);
  return sc;
}

// Each row's scores against K block `block` of an AURA cache, [KB]: per
// group of 32 rotated dims (a run-time loop, so q's addresses move with
// it), the KB keys' code words of the group loaded and transposed, so that
// each dim's codes of all the keys are one vector (shifts by constants),
// looked up in the codebook and FMA'd with the row's q element broadcast
// from memory, as over a float cache; then times the keys' norms.
std::vector<Value> aura_block_scores(KernelBuilder& k, const WalkInputs& in, const Value& block,
                                     const Value& key_mask, size_t rows, const BlockStep& step) {
  const int64_t D = in.head_dim, KB = in.key_block;
  const int bits = in.kv.kbits;
  const int64_t W = packed_words(D, bits);
  const int64_t parts =
      std::clamp<int64_t>(kScoreChains / static_cast<int64_t>(rows), 1, std::min<int64_t>(4, D));
  std::vector<std::vector<Var>> part(rows);
  for (auto& ph : part)
    for (int64_t i = 0; i < parts; ++i) ph.push_back(k.var(zeros(DType::f32, {KB})));
  auto first_key = block * static_cast<int>(KB);
  auto key_rows = aura_rows(in.kv, first_key, KB);
  auto first_words = expand_dims(key_rows * W, 1) + expand_dims(arange(bits).to(DType::i64), 0);
  k.for_(0, static_cast<int>(D / 32), 1, [&](Value g) {
    step(g, D / 32);
    auto off = first_words + g.to(DType::i64) * bits;  // [KB, bits]
    auto words = key_mask.valid()
                     ? load(in.kv.k + off, broadcast_to(expand_dims(key_mask, 1), {KB, bits}), 0.0)
                     : load(in.kv.k + off);
    auto group = transpose(words);  // [bits, KB]
    auto d0 = (g * 32).to(DType::i64);
    // Several dims' codes per lookup where they share a word: 8-bit codes a
    // word's 4 as bytes (64 lanes at KB 16: one byte-table lookup of 16-bit
    // entries), narrower ones 2.
    const int64_t m = 32 % bits ? 1 : bits == 8 ? 4 : 2;
    for (int64_t c = 0; c < 32; c += m) {
      auto vals = aura_centroids(aura_group_codes(group, bits, c, m), bits, D);  // [m, KB]
      for (int64_t i = 0; i < m; ++i) {
        auto kval = reshape(slice(vals, {i, 0}, {1, KB}), {KB});
        for (size_t h = 0; h < rows; ++h) {
          auto qd = broadcast_to(load(in.q + (in.qrow[h] + d0 + (c + i))).to(DType::f32), {KB});
          part[h][(c + i) % parts] = fma(qd, kval, Value(part[h][(c + i) % parts]));
        }
      }
    }
  });
  auto norms = load_aura_norms(in.kv, true, first_key, KB, key_mask);
  std::vector<Value> sc(rows);
  for (size_t h = 0; h < rows; ++h) {
    sc[h] = part[h][0];
    for (int64_t i = 1; i < parts; ++i) sc[h] = sc[h] + Value(part[h][i]);
    sc[h] = sc[h] * norms * in.qscale;
  }
  return sc;
}

// Each row's log2-scaled scores against K block `block`, [KB]; keys outside
// key_mask (when given) read as 0. Each step of the loop over HEAD_DIM
// calls step(i, n), i (i32) counting the n steps.
std::vector<Value> block_scores(KernelBuilder& k, const WalkInputs& in, const Value& block,
                                const Value& key_mask, size_t rows, const BlockStep& step) {
  if (in.q8.sum) return q8_block_scores(k, in, block, key_mask, rows, step);
  if (in.kv.kbits) return aura_block_scores(k, in, block, key_mask, rows, step);
  const int64_t D = in.head_dim, KB = in.key_block;
  const int64_t parts =
      std::clamp<int64_t>(kScoreChains / static_cast<int64_t>(rows), 1, std::min<int64_t>(4, D));
  std::vector<std::vector<Var>> part(rows);
  for (auto& ph : part)
    for (int64_t i = 0; i < parts; ++i) ph.push_back(k.var(zeros(DType::f32, {KB})));
  // A runtime loop over chunks of dims: its q addresses move with it, where
  // unrolled over HEAD_DIM each q element's address would be a loop
  // invariant of the key loop, hoisted and spilled.
  const int64_t chunk = std::min<int64_t>(kDimChunk, D);
  k.for_(0, static_cast<int>(D), static_cast<int>(chunk), [&](Value c) {
    step(c / static_cast<int>(chunk), D / chunk);
    for (int64_t dd = 0; dd < chunk; ++dd) {
      auto d = c + static_cast<int>(dd);
      auto krow = reshape(load_k_rows(in.kv, block, d, 1, key_mask), {KB}).to(DType::f32);
      for (size_t h = 0; h < rows; ++h) {
        auto qd = broadcast_to(load(in.q + (in.qrow[h] + d.to(DType::i64))).to(DType::f32), {KB});
        part[h][dd % parts] = fma(qd, krow, Value(part[h][dd % parts]));
      }
    }
  });
  std::vector<Value> sc(rows);
  for (size_t h = 0; h < rows; ++h) {
    sc[h] = part[h][0];
    for (int64_t i = 1; i < parts; ++i) sc[h] = sc[h] + Value(part[h][i]);
    sc[h] = sc[h] * in.qscale;
  }
  return sc;
}

// The start of an online-softmax step for every row, given the largest of
// its new log2-scaled scores (top, f32 scalar; -inf when it sees none of
// them): the running max moves to m_new and l is rescaled by alpha =
// 2^(m_old - m_new); returns each row's alpha, for its accumulator
// (add_values), and sets m_sub[row], what the step's weights are
// 2^(score - m_sub) of. The alphas are one vector exp2, not one scalar exp2
// (a polynomial of ~40 instructions) per row.
std::vector<Value> rescale(const std::vector<Value>& top, WalkState& st,
                           std::vector<Value>& m_sub) {
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const size_t rows = st.m.size();
  m_sub.assign(rows, Value());
  Value diff = zeros(DType::f32, {static_cast<int64_t>(rows)});
  auto lane = arange(static_cast<int64_t>(rows));
  for (size_t h = 0; h < rows; ++h) {
    Value m_old = st.m[h];
    auto m_new = maximum(m_old, top[h]);
    // A row that has seen only masked keys keeps m = -inf; subtracting 0
    // instead keeps exp2 away from -inf - -inf (NaN).
    m_sub[h] = where(m_new > neg_inf, m_new, zeros(DType::f32, {}));
    diff = where(lane == static_cast<int>(h),
                 broadcast_to(m_old - m_sub[h], {static_cast<int64_t>(rows)}), diff);
    st.m[h] = m_new;
  }
  auto alphas = exp2(diff);
  std::vector<Value> alpha(rows);
  for (size_t h = 0; h < rows; ++h) {
    alpha[h] = reshape(slice(alphas, {static_cast<int64_t>(h)}, {1}), {});
    st.l[h] = Value(st.l[h]) * alpha[h];
  }
  return alpha;
}

// The steps of K block `block`'s loop prefetching block + PREFETCH (at
// most last_block) with `fetch` (kv_cache.h's prefetch_k_block or
// prefetch_v_block); none with PREFETCH = 0 or without a last_block (the
// masked blocks at a range's ends).
BlockStep prefetch_step(const WalkInputs& in, const Value& block, const Value& last_block,
                        void (*fetch)(const KvView&, const Value&, const Value&, int64_t)) {
  if (in.prefetch == 0 || !last_block.valid()) return kNoStep;
  auto ahead = minimum(block + static_cast<int>(in.prefetch), last_block);
  return [kv = in.kv, ahead, fetch](const Value& i, int64_t n) { fetch(kv, ahead, i, n); };
}

// acc = acc * alpha + sum_j p_j V_j for every row, over nb K blocks (an i32
// scalar) from key j0 on, p_j in lanes [0, nb * KB) of the row's scores in
// scratch; with `masked`, keys outside [begin, end) are not read (their
// p_j is 0). The accumulators live in scratch and are taken a part of
// HEAD_DIM at a time, each part's registers for all rows kept while the
// keys go by: all of HEAD_DIM for every row at once would need more
// registers than there are (8 heads of 64, 4 of 128, or the prefill's
// token rows). Each weight is read back as a scalar (on x86 an FMA's
// broadcast operand). An AURA row's weight carries its norm
// (value_weights), and its values accumulate in lane order (walk_output
// restores it). With a last_block the blocks prefetch the V rows ahead
// (prefetch_step).
void add_values(KernelBuilder& k, const WalkInputs& in, const Value& j0, const Value& nb,
                const std::vector<Value>& alpha, const Value& begin, const Value& end, bool masked,
                WalkState& st, const Value& last_block) {
  const int64_t D = in.head_dim, KB = in.key_block;
  const int kb = static_cast<int>(KB);
  const size_t rows = st.m.size();
  const int64_t part = walk_value_part(static_cast<int64_t>(rows), D, KB);
  for (int64_t p0 = 0; p0 < D; p0 += part) {
    std::vector<Var> acc;
    auto acc_at = [&](size_t h) {
      return arange(part).to(DType::i64) + static_cast<int64_t>(h * D + p0);
    };
    for (size_t h = 0; h < rows; ++h)
      acc.push_back(k.var(load(*st.acc + acc_at(h)) * broadcast_to(alpha[h], {part})));
    k.for_(0, nb, 1, [&](Value b) {
      auto first = j0 + b * kb;
      auto kv = pin_block_page(in.kv, first);
      // Each V row is read once per part: the first part's steps prefetch.
      BlockStep step =
          p0 == 0 ? prefetch_step(in, first / kb, last_block, prefetch_v_block) : kNoStep;
      // Two keys a step: unrolled over the block, LLVM hoists every V row's
      // widening to the top and spills them.
      k.for_(0, kb, 2, [&](Value j) {
        step(j / 2, KB / 2);
        for (int u = 0; u < 2; ++u) {
          auto key = first + j + u;
          auto vmask = masked ? reshape((key >= begin) & (key < end), {1}) : Value();
          auto vrow = load_value_row(kv, key, vmask, D);
          if (part < D) vrow = slice(vrow, {p0}, {part});
          for (size_t h = 0; h < rows; ++h) {
            auto w = reshape(load(*st.scratch + weight_at(h, b * kb + j + u, 1)), {1});
            acc[h] = fma(broadcast_to(w, {part}), vrow, Value(acc[h]));
          }
        }
      });
    });
    for (size_t h = 0; h < rows; ++h) store(*st.acc + acc_at(h), Value(acc[h]));
  }
}

// Adds the keys of the K block starting at key j0 that lie in [begin,
// end) (and each row's [lo, hi)) to the state: one masked block, for the
// ends of a walk's range.
void masked_block(KernelBuilder& k, const WalkInputs& in, const Value& j0, const Value& begin,
                  const Value& end, WalkState& st) {
  const int64_t KB = in.key_block;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const size_t rows = st.m.size();
  auto keys = j0 + arange(KB);
  auto kmask = (keys >= begin) & (keys < end);
  WalkInputs at = in;
  // The block's page looked up once for its K and V rows.
  at.kv = pin_block_page(in.kv, j0);
  auto sc = block_scores(k, at, j0 / static_cast<int>(KB), kmask, rows, kNoStep);
  for (size_t h = 0; h < rows; ++h) {
    auto visible = in.lo.empty() ? kmask : kmask & (keys >= in.lo[h]) & (keys < in.hi[h]);
    sc[h] = where(visible, sc[h], full({KB}, neg_inf, DType::f32));
  }
  std::vector<Value> top, m_sub;
  for (size_t h = 0; h < rows; ++h) top.push_back(fold_last_axis(sc[h], Fold::Max));
  auto alpha = rescale(top, st, m_sub);
  for (size_t h = 0; h < rows; ++h) {
    auto p = exp2(sc[h] - broadcast_to(m_sub[h], {KB}));
    st.l[h] = Value(st.l[h]) + fold_last_axis(p, Fold::Sum);
    store(*st.scratch + weight_at(h, zeros(DType::i32, {}), KB), value_weights(in, p, j0, kmask));
  }
  add_values(k, in, j0, full({}, 1, DType::i32), alpha, begin, end, true, st, Value());
}

// Adds nb (an i32 scalar, 1 .. kChunkKeys / KB) whole K blocks from key j0
// on, which every row sees, to the state: their scores go to the scratch
// array (each row's running lane-wise max kept on the way), one softmax
// step takes them all, turning them into weights in place block by block,
// and P V reads each weight back as a scalar (on x86 an FMA's broadcast
// operand), V row by V row. Per key block the walk would pay the
// softmax's folds and exp2 latency each 16 keys, and a lane shuffle per
// weight (kiln bench, 2 threads, 32x4x64 f16 heads at 4096 keys: 0.28 ->
// 0.15 ms). The loops over blocks run at run time: unrolled, the chunk's
// scores would be live at once, and spilled.
void chunk_blocks(KernelBuilder& k, const WalkInputs& in, const Value& j0, const Value& nb,
                  const Value& last_block, WalkState& st) {
  const int64_t KB = in.key_block;
  const int kb = static_cast<int>(KB);
  const size_t rows = st.m.size();
  const Buffer& scr = *st.scratch;
  std::vector<Var> top;
  for (size_t h = 0; h < rows; ++h)
    top.push_back(k.var(full({KB}, -std::numeric_limits<double>::infinity(), DType::f32)));
  k.for_(0, nb, 1, [&](Value b) {
    auto first = j0 + b * kb;
    WalkInputs blk = in;
    blk.kv = pin_block_page(in.kv, first);
    auto sc = block_scores(k, blk, first / kb, Value(), rows,
                           prefetch_step(in, first / kb, last_block, prefetch_k_block));
    for (size_t h = 0; h < rows; ++h) {
      store(scr + weight_at(h, b * kb, KB), sc[h]);
      top[h] = maximum(Value(top[h]), sc[h]);
    }
  });
  std::vector<Value> tops;
  for (size_t h = 0; h < rows; ++h) tops.push_back(fold_last_axis(top[h], Fold::Max));
  std::vector<Value> m_sub;
  auto alpha = rescale(tops, st, m_sub);
  for (size_t h = 0; h < rows; ++h) {
    auto sum = k.var(zeros(DType::f32, {KB}));
    k.for_(0, nb * kb, kb, [&](Value c) {
      auto p = exp2(load(scr + weight_at(h, c, KB)) - broadcast_to(m_sub[h], {KB}));
      store(scr + weight_at(h, c, KB), value_weights(in, p, j0 + c, Value()));
      sum = Value(sum) + p;
    });
    st.l[h] = Value(st.l[h]) + fold_last_axis(sum, Fold::Sum);
  }
  add_values(k, in, j0, nb, alpha, Value(), Value(), false, st, last_block);
}

}  // namespace

DType query_dtype(const Spec& s) {
  if (is_aura_kv(s.dtype("KV"))) return DType::f32;  // rotated by aura_rotate
  return is_quantized_kv(s.dtype("KV")) ? DType::i8 : s.dtype("T");
}

QueryScales declare_query_scales(KernelBuilder& k, const Spec& s) {
  if (!is_quantized_kv(s.dtype("KV"))) return {};
  auto scale = k.buffer("q_scale", DType::f32);
  return {scale, k.buffer("q_sum", DType::i32)};
}

DecodeScalars declare_decode_scalars(KernelBuilder& k, const Spec& s, const Buffer& kc,
                                     const Buffer& vc) {
  k.scalar("n_tokens", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32), n_kv = k.scalar("n_kv_heads", DType::i32);
  auto max_ctx = k.scalar("max_ctx", DType::i32), kv_len = k.scalar("kv_len", DType::i32);
  auto pos0 = k.scalar("pos0", DType::i32);
  auto scale = k.scalar("scale", DType::f32);
  auto window = k.scalar("window", DType::i32);
  KvView kv = declare_kv_view(k, s, kc, vc, max_ctx);
  return {n_heads, n_kv, max_ctx, kv_len, pos0, scale, window, kv, declare_query_scales(k, s)};
}

WalkInputs decode_inputs(const Spec& s, const Buffer& q, const DecodeScalars& sc, const Value& kvh,
                         const Value& t, const Value& g0, std::vector<Value>& heads) {
  const int64_t D = s.constexpr_("HEAD_DIM");
  WalkInputs in{.q = q,
                .kv = sc.kv,
                .q8 = sc.q8,
                .qscale = sc.scale * static_cast<float>(M_LOG2E),
                .head_dim = D,
                .key_block = kv_key_block(s.target),
                .prefetch = s.constexpr_("PREFETCH")};
  in.kv.kvh = kvh;
  auto group = sc.n_heads / sc.n_kv;
  heads.clear();
  for (int64_t h = 0; h < s.constexpr_("BLOCK_G"); ++h) {
    heads.push_back(kvh * group + minimum(g0 + static_cast<int>(h), group - 1));
    in.qrow.push_back((t * sc.n_heads + heads.back()).to(DType::i64) * D);
  }
  return in;
}

WalkState walk_start(KernelBuilder& k, size_t rows, int64_t head_dim) {
  WalkState st;
  st.scratch = k.scratch("walk_scores", DType::f32, static_cast<int64_t>(rows) * kChunkKeys);
  st.acc = k.scratch("walk_acc", DType::f32, static_cast<int64_t>(rows) * head_dim);
  const int64_t n = static_cast<int64_t>(rows) * head_dim;
  store(*st.acc + arange(n), zeros(DType::f32, {n}));
  for (size_t h = 0; h < rows; ++h) {
    st.m.push_back(k.var(full({}, -std::numeric_limits<double>::infinity(), DType::f32)));
    st.l.push_back(k.var(zeros(DType::f32, {})));
  }
  return st;
}

Value walk_output(const WalkInputs& in, const WalkState& st, size_t row) {
  const int64_t D = in.head_dim;
  auto acc = load(*st.acc + (arange(D).to(DType::i64) + static_cast<int64_t>(row) * D));
  return in.kv.vbits ? aura_lanes_to_natural(acc, in.kv.vbits) : acc;
}

void walk_finish(const WalkInputs& in, const WalkState& st, const Buffer& out,
                 const std::vector<Value>& sinks, const std::vector<Value>& live) {
  const int64_t D = in.head_dim;
  for (size_t h = 0; h < st.m.size(); ++h) {
    auto inv = softmax_normaliser(st.m[h], st.l[h], sinks[h]);
    store(out + (in.qrow[h] + arange(D).to(DType::i64)),
          (walk_output(in, st, h) * broadcast_to(inv, {D})).to(out.dtype()),
          broadcast_to(live[h], {D}));
  }
}

void walk_keys(KernelBuilder& k, const WalkInputs& in, const Value& begin, const Value& end,
               WalkState& st) {
  const int kb = static_cast<int>(in.key_block);
  // Keys [plain_lo, plain_hi) are seen by every row: the blocks wholly
  // inside it need no mask, and go kChunkKeys at a time (one softmax step
  // each). The rest, from begin's block up to the first of them and from
  // the last of them to end, are masked blocks.
  Value plain_lo = begin, plain_hi = end;
  for (size_t h = 0; h < in.lo.size(); ++h) {
    plain_lo = maximum(plain_lo, in.lo[h]);
    plain_hi = minimum(plain_hi, in.hi[h]);
  }
  auto start = begin - begin % kb;
  auto body = maximum(start, plain_lo + (kb - plain_lo % kb) % kb);
  auto full_end = maximum(body, plain_hi - plain_hi % kb);
  // The range's last block, where prefetches stop: a paged cache has no
  // table entry past the sequence.
  auto last_block = (end - 1) / kb;
  const int chunk = static_cast<int>(kChunkKeys);
  k.for_(body, full_end, chunk, [&](Value j0) {
    auto nb = minimum(full_end - j0, full({}, chunk, DType::i32)) / kb;
    chunk_blocks(k, in, j0, nb, last_block, st);
  });
  // One loop (one copy of the masked block's code, which on CUDA is most
  // of the kernel's source) over the blocks before body and from full_end
  // on.
  auto zero = zeros(DType::i32, {});
  auto heads = (maximum(minimum(body, end) - start, zero) + (kb - 1)) / kb;
  auto tails = (maximum(end - full_end, zero) + (kb - 1)) / kb;
  k.for_(zero, heads + tails, 1, [&](Value i) {
    auto j0 = where(i < heads, start + i * kb, full_end + (i - heads) * kb);
    masked_block(k, in, j0, begin, end, st);
  });
}

void decode_finish(const WalkInputs& in, const WalkState& st, const Buffer& out,
                   const std::optional<Buffer>& sinks, const std::vector<Value>& heads,
                   const Value& g0, const Value& group) {
  std::vector<Value> sink, live;
  for (size_t h = 0; h < heads.size(); ++h) {
    sink.push_back(sink_logit(sinks, heads[h]));
    live.push_back(g0 + static_cast<int>(h) < group);
  }
  walk_finish(in, st, out, sink, live);
}

}  // namespace kiln
