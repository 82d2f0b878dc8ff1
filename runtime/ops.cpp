#include "runtime/ops.h"

#include <algorithm>
#include <tuple>

#include "ir/error.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/int4w.h"
#include "kernels/quant/rows16.h"
#include "kernels/quant/split_sums.h"

namespace kiln {

namespace ops {

namespace {

[[noreturn]] void mismatch(const std::string& op, const std::string& why) {
  throw Error("op " + op + ": " + why);
}

void same_dtype(const std::string& op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype != (*ts.begin())->dtype)
      mismatch(op, "dtypes differ (" + (*ts.begin())->str() + " vs " + t->str() + ")");
}

void need_dtype(const std::string& op, const Tensor& t, DType d, const char* what) {
  if (t.dtype != d)
    mismatch(op, std::string(what) + " must be " + std::string(dtype_name(d)) + ", got " + t.str());
}

// Rows and row length of a tensor over its last axis.
std::pair<int64_t, int64_t> rows_of(const std::string& op, const Tensor& t) {
  if (t.rank() < 1) mismatch(op, "needs a tensor of rank >= 1, got " + t.str());
  int64_t n = t.dim(-1);
  return {n ? t.numel() / n : 0, n};
}

// The activation blocks llama.cpp pairs with a weight type, quantize_q8's
// QBLOCK: 256 (Q8_K) for the 256-weight super-block formats, 32 (Q8_0)
// otherwise.
int64_t activation_block(TensorType quant) {
  return tensor_type_info(quant).block_elems == 256 ? 256 : 32;
}

// "Q4_K", "I4", "f16": a weight's format in errors.
std::string type_of(const Weight& w) {
  return w.quant ? tensor_type_name(*w.quant) : std::string(dtype_name(w.data.dtype));
}

// x [t, k] as 8-bit blocks for the matmuls of block-quantized weights:
// q [t, k], scales d and sums s [t, k/32], and s split into bytes.
std::vector<Tensor> quantize_q8(Graph& g, const Tensor& x, int64_t qblock) {
  return g.memo("quantize_q8/" + std::to_string(qblock) + "/" + Graph::key(x), [&] {
    const int64_t t = x.dim(0), k = x.dim(1), nb = t * k / 32;
    if (k % qblock)
      mismatch("quantize_q8", "row length " + std::to_string(k) + " is not a multiple of " +
                                  std::to_string(qblock));
    Tensor q = g.scratch(DType::i8, {t, k}), d = g.scratch(DType::f32, {t, k / 32}),
           s = g.scratch(DType::i32, {t, k / 32}), s8 = g.scratch(DType::i8, {split_sum_bytes(nb)});
    g.launch("quantize", "quantize_q8", {},
             {{"x", x}, {"q", q}, {"d", d}, {"s", s}, {"s8", s8}, {"nblocks", Arg::scalar_int(nb)}},
             {}, {{"QBLOCK", qblock}});
    return std::vector<Tensor>{q, d, s, s8};
  });
}

// x [t, k] as int8 codes with one scale per token (gemv_w8a8's
// activations): q [t, k], d and s [t]; consumers of the same x share them.
std::vector<Tensor> quantize_rows_i8(Graph& g, const Tensor& x) {
  return g.memo("quantize_rows_i8/" + Graph::key(x), [&] {
    const int64_t t = x.dim(0), k = x.dim(1);
    Tensor q = g.scratch(DType::i8, {t, k}), d = g.scratch(DType::f32, {t}),
           s = g.scratch(DType::i32, {t});
    g.launch("quantize", "quantize_rows_i8", {},
             {{"x", x}, {"q", q}, {"d", d}, {"s", s}, {"n", Arg::scalar_int(k)}}, {{"rows", t}});
    return std::vector<Tensor>{q, d, s};
  });
}

}  // namespace

Tensor add(Graph& g, const Tensor& x, const Tensor& y) {
  same_dtype("add", {&x, &y});
  if (x.numel() != y.numel())
    mismatch("add", "element counts differ: " + x.str() + " + " + y.str());
  Tensor z = g.scratch(x.dtype, x.shape);
  g.launch("add", "add", {{"T", x.dtype}},
           {{"x", x}, {"y", y}, {"z", z}, {"n", Arg::scalar_int(x.numel())}});
  return z;
}

Tensor accumulate(Graph& g, const Tensor& acc, const Tensor& x) {
  same_dtype("accumulate", {&acc, &x});
  if (acc.numel() != x.numel())
    mismatch("accumulate", "element counts differ: " + acc.str() + " += " + x.str());
  Tensor out = g.overwrite(acc);
  g.launch("accumulate", "add", {{"T", acc.dtype}},
           {{"x", out}, {"y", x}, {"z", out}, {"n", Arg::scalar_int(acc.numel())}});
  return out;
}

Tensor add_rows(Graph& g, const Tensor& x, const Tensor& b) {
  same_dtype("add_rows", {&x, &b});
  auto [rows, n] = rows_of("add_rows", x);
  if (b.numel() != n) mismatch("add_rows", "x is " + x.str() + " but the row is " + b.str());
  Tensor y = g.overwrite(x);
  g.launch("bias", "add_rows", {{"T", x.dtype}}, {{"x", y}, {"b", b}, {"n", Arg::scalar_int(n)}},
           {{"rows", rows}});
  return y;
}

Tensor rmsnorm(Graph& g, const Tensor& x, const Tensor& w, double eps) {
  same_dtype("rmsnorm", {&x, &w});
  auto [rows, n] = rows_of("rmsnorm", x);
  if (w.numel() != n) mismatch("rmsnorm", "x is " + x.str() + " but the weight is " + w.str());
  Tensor y = g.scratch(x.dtype, x.shape);
  g.launch(
      "rmsnorm", "rmsnorm", {{"T", x.dtype}},
      {{"x", x}, {"w", w}, {"y", y}, {"n", Arg::scalar_int(n)}, {"eps", Arg::scalar_float(eps)}},
      {{"rows", rows}});
  return y;
}

Tensor softmax(Graph& g, const Tensor& x) {
  auto [rows, n] = rows_of("softmax", x);
  Tensor y = g.scratch(x.dtype, x.shape);
  g.launch("softmax", "softmax", {{"T", x.dtype}}, {{"x", x}, {"y", y}, {"n", Arg::scalar_int(n)}},
           {{"rows", rows}});
  return y;
}

Tensor glu(Graph& g, const Tensor& gate, const Tensor& up, Activation act) {
  same_dtype("glu", {&gate, &up});
  if (gate.shape != up.shape) mismatch("glu", "gate is " + gate.str() + " but up is " + up.str());
  Tensor out = g.scratch(gate.dtype, gate.shape);
  static const char* const kLabels[] = {"silu_mul", "gelu_mul", "swiglu_oai"};
  g.launch(kLabels[static_cast<int>(act)], "glu", {{"T", gate.dtype}},
           {{"gate", gate}, {"up", up}, {"out", out}, {"n", Arg::scalar_int(gate.numel())}}, {},
           {{"ACT", static_cast<int64_t>(act)}});
  return out;
}

namespace {

// What a matmul launch adds when it runs a stack of experts grouped
// (kernels/moe/expert_tiles.h): y has `rows` rows, the tile's constexprs.
struct Grouped {
  const ExpertRows* rows = nullptr;  // null: a plain matmul
  Grouping mode = Grouping::plain;
};

// y [t, m] = x W^T (x [t, k]) through the kernel the backend's policy
// picks for w's format, layout and the tokens; grouped, y [rows, m] takes
// every expert of the stack in one launch.
Tensor matmul(Graph& g, const Weight& w, const Tensor& x, const Grouped& grouped = {}) {
  const ExpertRows* er = grouped.rows;
  const int64_t y_rows = er ? er->rows : x.dim(0);
  const KernelPolicy& policy = g.runtime().backend().policy();
  const WeightCase wc = w.policy_case();
  const WeightLayout layout = w.layout();
  if (!layout_fits(layout, wc))
    mismatch("linear", "weight '" + w.label + "' of type " + type_of(w) + " [" +
                           std::to_string(w.m) + ", " + std::to_string(w.k) +
                           "] cannot be held in a 16-row interleaved layout");
  const MatmulKernel kernel =
      er ? policy.matmul(wc, layout, er->tokens, er->tile) : policy.matmul(wc, layout, x.dim(0), 0);
  Tensor y = g.scratch(DType::f32, {y_rows, w.m});
  Graph::Operands args = {{"y", y}};
  std::map<std::string, int64_t> fixed;
  // One expert's matrix, in the elements of the operand the kernel reads.
  auto grouped_operands = [&](int64_t w_stride) {
    if (!er) return;
    args["tile_expert"] = er->tile_expert;
    args["n_expert"] = Arg::scalar_int(w.experts);
    args["w_stride"] = Arg::scalar_int(w_stride);
    if (grouped.mode == Grouping::gather) {
      args["sorted"] = er->sorted;
      args["tokens"] = Arg::scalar_int(x.dim(0));
    }
    fixed["GROUPED"] = static_cast<int64_t>(grouped.mode);
  };
  // x as quantize_q8's blocks of `qblock` for a TokenDots kernel, with
  // its sizes.
  auto quantized_x = [&](int64_t qblock) {
    std::vector<Tensor> q = quantize_q8(g, x, qblock);
    args["xq"] = q[0];
    args["xd"] = q[1];
    args["xs"] = q[2];
    args["m"] = Arg::scalar_int(w.m);
    args["k"] = Arg::scalar_int(w.k);
    args["t"] = Arg::scalar_int(y_rows);
    return q;
  };
  const std::string kernel_name = matmul_kernel_name(kernel);
  // The kernel must read what the weight holds.
  auto need = [&](bool ok) {
    if (!ok)
      mismatch("linear", "the " + policy.name() + " policy chose " + kernel_name + " for weight '" +
                             w.label + "' (" + type_of(w) + ", " +
                             (w.rows16 ? "16-row interleaved" : "as stored") +
                             "), which does not read it");
  };
  if (kernel == MatmulKernel::gemv_w8a8) {
    need(w.quant == TensorType::i8_channel);
    if (!w.scales || w.scales->numel() != std::max<int64_t>(w.experts, 1) * w.m)
      mismatch("linear", "int8 weight '" + w.label + "' has no scale per row");
    std::vector<Tensor> q = quantize_rows_i8(g, x);
    args.insert({{"w", w.data},
                 {"ws", *w.scales},
                 {"xq", q[0]},
                 {"xd", q[1]},
                 {"xs", q[2]},
                 {"m", Arg::scalar_int(w.m)},
                 {"k", Arg::scalar_int(w.k)},
                 {"t", Arg::scalar_int(y_rows)}});
    if (er) fixed["BLOCK_T"] = er->tile;
    grouped_operands(w.m * w.k);
    g.launch(w.label, kernel_name, {}, args, {}, fixed);
    return y;
  }
  if (kernel == MatmulKernel::gemv_int4w || kernel == MatmulKernel::gemv_int4w_rows16 ||
      kernel == MatmulKernel::gemm_int4w_tiles) {
    const bool rows16 = kernel == MatmulKernel::gemv_int4w_rows16;
    need(w.quant == TensorType::i4 && rows16 == w.rows16.has_value());
    // Interleaved, one x scale per 256 (int4w.h's chunk); row-major, per 32.
    if (!w.scales || !w.zeros)
      mismatch("linear", "int4 weight '" + w.label + "' has no scales and zero points");
    quantized_x(rows16 ? 256 : 32);
    fixed["GROUP"] = w.scale_block;
    fixed["ZP"] = 1;
    if (er) fixed["BLOCK_T"] = er->tile;
    if (rows16) {
      args["w"] = *w.rows16;
      grouped_operands(Int4wRows16{w.scale_block, true}.bytes(w.m, w.k));
    } else {
      grouped_operands(w.m * w.k / 2);
      args["q"] = w.data;
      args["scales"] = *w.scales;
      args["zeros"] = *w.zeros;
    }
    g.launch(w.label, kernel_name, {}, args, {}, fixed);
    return y;
  }
  if (kernel == MatmulKernel::qgemv || kernel == MatmulKernel::qgemv_rows16 ||
      kernel == MatmulKernel::qgemm_tiles) {
    const bool rows16 = kernel == MatmulKernel::qgemv_rows16;
    need(w.quant && is_block_quantized(*w.quant) && rows16 == w.rows16.has_value());
    std::vector<Tensor> q = quantized_x(activation_block(*w.quant));
    fixed["FMT"] = type_id(*w.quant);
    if (er)
      fixed["BLOCK_T"] = er->tile;
    else if (const int64_t bt = policy.matmul_token_block(wc, kernel, y_rows))
      fixed["BLOCK_T"] = bt;
    if (rows16) {
      args["w"] = *w.rows16;
      args["xs8"] = q[3];
      grouped_operands(ggml::rows16_bytes(*w.quant, w.m, w.k));
    } else {
      args["w"] = w.data;
      grouped_operands(w.m * w.data.dim(-1));
    }
    g.launch(w.label, kernel_name, {}, args, {}, fixed);
    return y;
  }
  need(!w.quant && !w.rows16);
  if (w.scales) {  // per expert, one scale matrix after another
    const int64_t b = w.scale_block;
    if (b <= 0 || w.scales->numel() !=
                      std::max<int64_t>(w.experts, 1) * ((w.m + b - 1) / b) * ((w.k + b - 1) / b))
      mismatch("linear", "weight '" + w.label + "' has scales " + w.scales->str() +
                             ", not one per " + std::to_string(b) + "x" + std::to_string(b) +
                             " block");
    args["ws"] = *w.scales;
    fixed["SCALE_BLOCK"] = b;
  }
  if (w.data.numel() != std::max<int64_t>(w.experts, 1) * w.m * w.k)
    mismatch("linear", "weight data " + w.data.str() + " is not " +
                           (w.experts ? std::to_string(w.experts) + " x " : "") + "[" +
                           std::to_string(w.m) + ", " + std::to_string(w.k) + "]");
  args["w"] = w.data;
  args["x"] = x;
  args["k"] = Arg::scalar_int(w.k);
  if (kernel == MatmulKernel::gemv) {
    need(!er && x.dim(0) == 1);
    args["m"] = Arg::scalar_int(w.m);
    // A step may not straddle scale blocks (tuned steps are at most 64).
    if (w.scales && w.scale_block % 64)
      fixed["BLOCK_K"] = std::min<int64_t>(64, w.scale_block & -w.scale_block);
    g.launch(w.label, kernel_name, {{"W", w.data.dtype}, {"X", DType::f32}}, args, {}, fixed);
    return y;
  }
  args["n"] = Arg::scalar_int(w.m);
  args["t"] = Arg::scalar_int(y_rows);
  if (kernel == MatmulKernel::gemm_tiles) {
    need(!w.scales);
    if (er) fixed["BLOCK_T"] = er->tile;
  } else if (er) {
    // A panel is one tile of one expert's rows.
    fixed["PANEL_T"] = er->tile;
    fixed["BLOCK_T"] = std::min<int64_t>(er->tile, 4);
  }
  grouped_operands(w.m * w.k);
  g.launch(w.label, kernel_name, {{"W", w.data.dtype}}, args, {}, fixed);
  return y;
}

}  // namespace

Tensor linear(Graph& g, const Weight& w, const Tensor& x) {
  if (x.rank() != 2 || x.dim(1) != w.k)
    mismatch("linear", "the weight is [" + std::to_string(w.m) + ", " + std::to_string(w.k) +
                           "] but x is " + x.str());
  need_dtype("linear", x, DType::f32, "x");
  if (w.experts) mismatch("linear", "weight '" + w.label + "' is a stack of experts");
  return matmul(g, w, x);
}

Tensor grouped_linear(Graph& g, const Weight& experts, const Tensor& x, const ExpertRows& rows,
                      Grouping mode) {
  if (x.rank() != 2 || x.dim(1) != experts.k)
    mismatch("grouped_linear", "the experts are [" + std::to_string(experts.m) + ", " +
                                   std::to_string(experts.k) + "] but x is " + x.str());
  need_dtype("grouped_linear", x, DType::f32, "x");
  if (experts.experts != rows.n_expert)
    mismatch("grouped_linear", "weight '" + experts.label + "' stacks " +
                                   std::to_string(experts.experts) + " experts, the routing " +
                                   std::to_string(rows.n_expert));
  const int64_t want = mode == Grouping::gather ? rows.tokens : rows.rows;
  if (mode == Grouping::plain || x.dim(0) != want)
    mismatch("grouped_linear", std::string(mode == Grouping::gather ? "gathered" : "sorted") +
                                   " x " + x.str() + " should have " + std::to_string(want) +
                                   " rows");
  return matmul(g, experts, x, {&rows, mode});
}

namespace {

Tensor lookup(Graph& g, const Tensor& table, DType dtype, int64_t fmt, int64_t table_rows,
              int64_t n, const Tensor& ids, double scale) {
  need_dtype("get_rows", ids, DType::i32, "ids");
  Tensor out = g.scratch(DType::f32, {ids.numel(), n});
  g.launch("get_rows", "get_rows", {{"W", dtype}},
           {{"table", table},
            {"ids", ids},
            {"out", out},
            {"n", Arg::scalar_int(n)},
            {"rows", Arg::scalar_int(ids.numel())},
            {"scale", Arg::scalar_float(scale)}},
           {{"table_rows", table_rows}}, {{"FMT", fmt}});
  return out;
}

}  // namespace

Tensor get_rows(Graph& g, const Tensor& table, const Tensor& ids, double scale) {
  if (table.rank() != 2) mismatch("get_rows", "the table must be [rows, n], got " + table.str());
  return lookup(g, table, table.dtype, 0, table.dim(0), table.dim(1), ids, scale);
}

Tensor get_rows(Graph& g, const Weight& table, const Tensor& ids, double scale) {
  return lookup(g, table.data, table.quant ? DType::u8 : table.data.dtype,
                table.quant ? type_id(*table.quant) : 0, table.m, table.k, ids, scale);
}

Tensor rope(Graph& g, const Tensor& x, const Tensor& cos_sin, const Tensor& positions,
            int64_t head_dim, bool neox) {
  need_dtype("rope", positions, DType::i32, "positions");
  if (x.rank() != 2 || x.dim(1) % head_dim || x.dim(0) != positions.numel() || cos_sin.rank() != 2)
    mismatch("rope", "x " + x.str() + " is not [" + std::to_string(positions.numel()) +
                         ", heads * " + std::to_string(head_dim) + "] for a table " +
                         cos_sin.str());
  Tensor y = g.overwrite(x);
  g.launch("rope", "rope", {{"T", x.dtype}},
           {{"x", y},
            {"cos_sin", cos_sin},
            {"pos", positions},
            {"n_heads", Arg::scalar_int(x.dim(1) / head_dim)},
            {"n_pos", Arg::scalar_int(cos_sin.dim(0))}},
           {{"tokens", x.dim(0)}},
           {{"HEAD_DIM", head_dim}, {"ROT", cos_sin.dim(1)}, {"NEOX", neox ? 1 : 0}});
  return y;
}

namespace {
// An AURA cache's KBITS and VBITS among a kernel's constexprs.
void add_aura_bits(std::map<std::string, int64_t>& constexprs, const KvCache& cache) {
  if (!is_aura_kv(cache.k.dtype)) return;
  constexprs["KBITS"] = cache.kbits;
  constexprs["VBITS"] = cache.vbits;
}

// A cache's operands besides k and v (kv_cache.h): a paged cache's table
// and pool size, a q8_0 cache's scales, an AURA cache's norms.
void add_cache_operands(Graph::Operands& args, const KvCache& cache) {
  if (is_aura_kv(cache.k.dtype)) {
    if (!cache.k_scale || !cache.v_scale || !cache.kbits || !cache.vbits)
      mismatch("attention", "an AURA KV cache without its norms or bits");
    need_dtype("attention", *cache.k_scale, DType::f16, "K norms");
    need_dtype("attention", *cache.v_scale, DType::f16, "V norms");
    args["k_scale"] = *cache.k_scale;
    args["v_scale"] = *cache.v_scale;
    return;
  }
  if (is_quantized_kv(cache.k.dtype)) {
    if (!cache.k_scale || !cache.v_scale)
      mismatch("attention", "a q8_0 KV cache without its scales");
    need_dtype("attention", *cache.k_scale, DType::f16, "K scales");
    need_dtype("attention", *cache.v_scale, DType::f16, "V scales");
    args["k_scale"] = *cache.k_scale;
    args["v_scale"] = *cache.v_scale;
  }
  if (cache.page == 0) return;
  if (!cache.table) mismatch("attention", "a paged KV cache without a block table");
  need_dtype("attention", *cache.table, DType::i32, "block table");
  args["block_table"] = *cache.table;
  args["n_pages"] = Arg::scalar_int(cache.n_pages);
}

// A store's operands for keys and values [t, n_kv_heads * head_dim]; the
// cache's buffers become the store's results (graph order).
Graph::Operands store_operands(Graph& g, KvCache& cache, const Tensor& k, const Tensor& v) {
  const int64_t kd = cache.n_kv_heads * cache.head_dim;
  if (k.rank() != 2 || k.dim(1) != kd || k.shape != v.shape)
    mismatch("kv_append", "keys " + k.str() + " and values " + v.str() + " are not [t, " +
                              std::to_string(kd) + "]");
  cache.k = g.overwrite(cache.k);
  cache.v = g.overwrite(cache.v);
  if (cache.k_scale) cache.k_scale = g.overwrite(*cache.k_scale);
  if (cache.v_scale) cache.v_scale = g.overwrite(*cache.v_scale);
  return {{"xk", k},
          {"xv", v},
          {"k", cache.k},
          {"v", cache.v},
          {"n_tokens", Arg::scalar_int(k.dim(0))},
          {"n_kv_heads", Arg::scalar_int(cache.n_kv_heads)},
          {"max_ctx", Arg::scalar_int(cache.max_ctx)}};
}

// q's heads (q [t, heads * head_dim], heads a multiple of the cache's) once
// q and the mask are checked against the cache.
int64_t attention_heads(const Tensor& q, const KvCache& cache, const AttentionMask& mask) {
  const int64_t d = cache.head_dim;
  if (q.rank() != 2 || q.dim(1) % d || (q.dim(1) / d) % cache.n_kv_heads)
    mismatch("attention", "q " + q.str() + " is not [t, heads * " + std::to_string(d) +
                              "] with heads a multiple of " + std::to_string(cache.n_kv_heads));
  const int64_t heads = q.dim(1) / d;
  if (mask.window < 0) mismatch("attention", "window " + std::to_string(mask.window) + " < 0");
  if (mask.sinks) {
    need_dtype("attention", *mask.sinks, DType::f32, "sinks");
    if (mask.sinks->numel() != heads)
      mismatch("attention",
               "sinks " + mask.sinks->str() + " for " + std::to_string(heads) + " heads");
  }
  return heads;
}

// Scores against a q8_0 cache take q as Q8_0, as llama.cpp's do
// (kernels/attention/kv_walk.h): q, q_scale and q_sum in args.
void add_query_operands(Graph& g, Graph::Operands& args, const Tensor& q, const KvCache& cache) {
  if (!is_quantized_kv(cache.k.dtype)) return;
  need_dtype("attention", q, DType::f32, "q over a q8_0 cache");
  std::vector<Tensor> q8 = quantize_q8(g, q, kKvQuantBlock);
  args["q"] = q8[0];
  args["q_scale"] = q8[1];
  args["q_sum"] = q8[2];
}
}  // namespace

Tensor kv_append(Graph& g, KvCache& cache, const Tensor& k, const Tensor& v,
                 const Plan::Dynamic& pos0) {
  Graph::Operands args = store_operands(g, cache, k, v);
  args["pos0"] = pos0;
  add_cache_operands(args, cache);
  if (is_aura_kv(cache.k.dtype)) {
    if (!cache.k_rot || !cache.v_rot) mismatch("kv_append", "an AURA KV cache without rotations");
    args["k_rot"] = *cache.k_rot;
    args["v_rot"] = *cache.v_rot;
    g.launch("kv_store", "aura_encode", {{"T", k.dtype}}, args, {},
             {{"HEAD_DIM", cache.head_dim}, {"KBITS", cache.kbits}, {"VBITS", cache.vbits}});
    return cache.k;
  }
  g.launch("kv_store", "kv_cache_store", {{"KV", cache.k.dtype}}, args, {},
           {{"HEAD_DIM", cache.head_dim}, {"PAGE", cache.page}});
  return cache.k;
}

namespace {

// Rows of head vectors [rows, din] times a rotation matrix [D, D], to
// dtype `to`: [rows, dout].
Tensor aura_rotate(Graph& g, const Tensor& x, const Tensor& rot, int64_t din, int64_t dout,
                   DType to) {
  need_dtype("attention", rot, DType::f32, "AURA rotation");
  const int64_t rows = x.numel() / din;
  Tensor y = g.scratch(to, {x.dim(0), x.numel() / x.dim(0) / din * dout});
  g.launch("aura_rotate", "aura_rotate", {{"X", x.dtype}, {"Y", to}},
           {{"x", x}, {"rot", rot}, {"out", y}, {"n_rows", Arg::scalar_int(rows)}},
           {{"rows", rows}}, {{"DIN", din}, {"DOUT", dout}});
  return y;
}

// The attention kernels over `cache` as they are laid out (HEAD_DIM its
// head_dim), q in the kernels' query dtype.
Tensor attention_launches(Graph& g, const Tensor& q, const KvCache& cache, double scale,
                          const Plan::Dynamic& kv_len, const Plan::Dynamic& pos0,
                          const AttentionMask& mask) {
  const int64_t d = cache.head_dim, t = q.dim(0), heads = attention_heads(q, cache, mask);
  const int64_t sinks = mask.sinks ? 1 : 0;
  Tensor out = g.scratch(q.dtype, q.shape);
  Graph::Operands args = {{"q", q},
                          {"k", cache.k},
                          {"v", cache.v},
                          {"out", out},
                          {"n_tokens", Arg::scalar_int(t)},
                          {"n_heads", Arg::scalar_int(heads)},
                          {"n_kv_heads", Arg::scalar_int(cache.n_kv_heads)},
                          {"max_ctx", Arg::scalar_int(cache.max_ctx)},
                          {"kv_len", kv_len},
                          {"pos0", pos0},
                          {"scale", Arg::scalar_float(scale)},
                          {"window", Arg::scalar_int(mask.window)}};
  if (mask.sinks) args["sinks"] = *mask.sinks;
  add_cache_operands(args, cache);
  add_query_operands(g, args, q, cache);
  // The keys a decode step may walk: a window's at most.
  const int64_t span = mask.window ? std::min(mask.window, cache.max_ctx) : cache.max_ctx;
  const KernelPolicy& policy = g.runtime().backend().policy();
  const bool tiles = policy.attention_blocks(cache.k.dtype, t) == AttentionBlocks::tiles;
  const int64_t split = t == 1 ? policy.decode_split_keys(span) : 0;
  if (t == 1 && tiles && split <= 0)
    throw Error("attention: kernel policy '" + policy.name() +
                "' runs decode as tile dots without a key split; the tile strategy has only the "
                "split-K decode (attention_decode_tiles)");
  if (split > 0) {
    // Split-K (flash-decoding): each slice is read once for all its heads,
    // and the programs grow with the context instead of staying at the KV
    // heads.
    const std::map<std::string, int64_t> fixed = {{"HEAD_DIM", d}, {"SPLIT", split}};
    auto split_fixed = fixed;
    split_fixed["PAGE"] = cache.page;
    add_aura_bits(split_fixed, cache);
    const int64_t rows = t * heads * ((cache.max_ctx + split - 1) / split);
    Tensor part_o = g.scratch(DType::f32, {rows, d}), part_ml = g.scratch(DType::f32, {rows, 2});
    Graph::Operands split = args;
    split.erase("out");
    split.erase("sinks");  // they join in the merge
    split["part_o"] = part_o;
    split["part_ml"] = part_ml;
    const char* pass1 = tiles ? "attention_decode_tiles" : "attention_decode_split";
    g.launch("attention", pass1, {{"KV", cache.k.dtype}, {"T", q.dtype}}, split, {}, split_fixed);
    Graph::Operands merge = {{"part_o", part_o}, {"part_ml", part_ml}, {"out", out}};
    for (const char* s : {"n_tokens", "n_heads", "max_ctx", "kv_len", "pos0", "window", "sinks"})
      if (args.count(s)) merge[s] = args[s];
    auto merge_fixed = fixed;
    merge_fixed["SINKS"] = sinks;
    g.launch("attention", "attention_decode_merge", {{"T", q.dtype}}, merge, {}, merge_fixed);
    return out;
  }
  const std::string kernel = t == 1  ? "attention_decode"
                             : tiles ? "attention_prefill_tiles"
                                     : "attention_prefill";
  std::map<std::string, int64_t> fixed = {{"HEAD_DIM", d}, {"SINKS", sinks}, {"PAGE", cache.page}};
  add_aura_bits(fixed, cache);
  g.launch(kernel, kernel, {{"KV", cache.k.dtype}, {"T", q.dtype}}, args, {}, fixed);
  return out;
}

}  // namespace

Tensor attention(Graph& g, const Tensor& q, const KvCache& cache, double scale,
                 const Plan::Dynamic& kv_len, const Plan::Dynamic& pos0,
                 const AttentionMask& mask) {
  if (!is_aura_kv(cache.k.dtype)) return attention_launches(g, q, cache, scale, kv_len, pos0, mask);
  // Scores and outputs are unchanged by the rotation (it is orthogonal), so
  // the kernels run over the cache in its rotated space of D dims.
  const int64_t d = cache.head_dim, D = aura_padded_dim(d);
  if (q.rank() != 2 || q.dim(1) % d)
    mismatch("attention", "q " + q.str() + " is not [t, heads * " + std::to_string(d) + "]");
  if (!cache.k_rot || !cache.v_unrot) mismatch("attention", "an AURA KV cache without rotations");
  KvCache rotated = cache;
  rotated.head_dim = D;
  Tensor qr = aura_rotate(g, q, *cache.k_rot, d, D, DType::f32);
  Tensor o = attention_launches(g, qr, rotated, scale, kv_len, pos0, mask);
  return aura_rotate(g, o, *cache.v_unrot, D, d, q.dtype);
}

namespace {
// The batch's tensors fit its tokens and the cache's pool.
void check_batch(const char* op, const KvCache& cache, int64_t n_tokens, const SeqBatch& b) {
  if (cache.page == 0 || !cache.table)
    mismatch(op, "a packed batch needs a paged KV cache (kv_page > 0)");
  if (is_aura_kv(cache.k.dtype)) mismatch(op, "an AURA cache cannot be paged");
  const int64_t entries = (cache.max_ctx + cache.page - 1) / cache.page;
  if (b.n_seqs < 1 || b.n_seqs > n_tokens)
    mismatch(op,
             std::to_string(b.n_seqs) + " sequences for " + std::to_string(n_tokens) + " tokens");
  for (const auto& [t, name, n] :
       {std::tuple<const Tensor&, const char*, int64_t>{b.cu_seqlens, "cu_seqlens", b.n_seqs + 1},
        {b.seq_pos0, "seq_pos0", b.n_seqs},
        {b.seq_len, "seq_len", b.n_seqs},
        {b.tok_seq, "tok_seq", n_tokens},
        {b.tables, "block tables", b.n_seqs * entries}}) {
    need_dtype(op, t, DType::i32, name);
    if (t.numel() != n)
      mismatch(op, std::string(name) + " " + t.str() + " should hold " + std::to_string(n));
  }
}
}  // namespace

Tensor kv_append(Graph& g, KvCache& cache, const Tensor& k, const Tensor& v,
                 const Tensor& positions, const SeqBatch& batch) {
  check_batch("kv_append", cache, k.dim(0), batch);
  need_dtype("kv_append", positions, DType::i32, "positions");
  Graph::Operands args = store_operands(g, cache, k, v);
  args["positions"] = positions;
  args["tok_seq"] = batch.tok_seq;
  args["n_seqs"] = Arg::scalar_int(batch.n_seqs);
  KvCache paged = cache;
  paged.table = batch.tables;
  add_cache_operands(args, paged);
  g.launch("kv_store", "kv_cache_store", {{"KV", cache.k.dtype}}, args, {},
           {{"HEAD_DIM", cache.head_dim}, {"PAGE", cache.page}, {"VARLEN", 1}});
  return cache.k;
}

Tensor attention(Graph& g, const Tensor& q, const KvCache& cache, double scale,
                 const SeqBatch& batch, const AttentionMask& mask) {
  const int64_t d = cache.head_dim, t = q.dim(0), heads = attention_heads(q, cache, mask);
  check_batch("attention", cache, t, batch);
  KvCache paged = cache;
  paged.table = batch.tables;
  Tensor out = g.scratch(q.dtype, q.shape);
  Graph::Operands args = {{"q", q},
                          {"k", cache.k},
                          {"v", cache.v},
                          {"out", out},
                          {"n_heads", Arg::scalar_int(heads)},
                          {"n_kv_heads", Arg::scalar_int(cache.n_kv_heads)},
                          {"max_ctx", Arg::scalar_int(cache.max_ctx)},
                          {"n_seqs", Arg::scalar_int(batch.n_seqs)},
                          {"scale", Arg::scalar_float(scale)},
                          {"window", Arg::scalar_int(mask.window)}};
  if (mask.sinks) args["sinks"] = *mask.sinks;
  add_cache_operands(args, paged);
  add_query_operands(g, args, q, cache);
  const std::map<std::string, int64_t> fixed = {
      {"HEAD_DIM", d}, {"SINKS", mask.sinks ? 1 : 0}, {"PAGE", cache.page}};
  if (t == batch.n_seqs) {  // one token each: a decode step
    args["seq_len"] = batch.seq_len;
    g.launch("attention", "attention_decode_batch", {{"KV", cache.k.dtype}, {"T", q.dtype}}, args,
             {}, fixed);
    return out;
  }
  // The grid covers the longest sequence's tokens, at most what is left
  // when every other sequence brings one.
  args["cu_seqlens"] = batch.cu_seqlens;
  args["seq_pos0"] = batch.seq_pos0;
  args["n_tokens"] = Arg::scalar_int(t);
  args["max_seq_tokens"] = Arg::scalar_int(std::min(t - batch.n_seqs + 1, cache.max_ctx));
  g.launch("attention", "attention_prefill_varlen", {{"KV", cache.k.dtype}, {"T", q.dtype}}, args,
           {}, fixed);
  return out;
}

Routing moe_route(Graph& g, const Tensor& logits, int64_t k, const RouterOptions& o) {
  need_dtype("moe_route", logits, DType::f32, "router logits");
  auto [t, ne] = rows_of("moe_route", logits);
  if (k < 1 || k > ne)
    mismatch("moe_route", "top-" + std::to_string(k) + " of " + std::to_string(ne) + " experts");
  int64_t block = 1;
  while (block < ne) block *= 2;
  Routing r{g.scratch(DType::i32, {t, k}), g.scratch(DType::f32, {t, k})};
  Graph::Operands args = {
      {"logits", logits},        {"ids", r.ids},
      {"weights", r.weights},    {"n_expert", Arg::scalar_int(ne)},
      {"k", Arg::scalar_int(k)}, {"norm", Arg::scalar_int(o.norm_topk ? 1 : 0)}};
  if (o.expert_map) {
    need_dtype("moe_route", *o.expert_map, DType::i32, "expert map");
    if (o.expert_map->numel() != ne)
      mismatch("moe_route", "expert map " + o.expert_map->str() + " for " + std::to_string(ne) +
                                " router experts");
    args["expert_map"] = *o.expert_map;
    args["renorm"] = Arg::scalar_int(o.renorm ? 1 : 0);
  }
  g.launch("moe_route", "moe_topk", {}, args, {{"tokens", t}},
           {{"BLOCK", block}, {"REMAP", o.expert_map ? 1 : 0}});
  return r;
}

ExpertRows moe_sort(Graph& g, const Routing& r, int64_t n_expert,
                    const std::vector<const Weight*>& experts) {
  need_dtype("moe_sort", r.ids, DType::i32, "expert ids");
  if (r.ids.rank() != 2 || n_expert < 1)
    mismatch("moe_sort", "ids " + r.ids.str() + " over " + std::to_string(n_expert) + " experts");
  ExpertRows e;
  e.tokens = r.ids.dim(0);
  e.k = r.ids.dim(1);
  e.n_expert = n_expert;
  const KernelPolicy& policy = g.runtime().backend().policy();
  e.tile = policy.moe_tile(e.tokens, e.k, n_expert);
  for (const Weight* w : experts) {
    const WeightCase wc = w->policy_case();
    const MatmulKernel kernel = policy.matmul(wc, w->layout(), e.tokens, e.tile);
    if (const int64_t bt = policy.matmul_token_block(wc, kernel, e.tokens))
      e.tile = std::min(e.tile, bt);
  }
  if (e.tile < 1)
    mismatch("moe_sort", "the " + g.runtime().backend().policy().name() +
                             " policy chose tiles of " + std::to_string(e.tile) + " rows");
  e.rows = moe_rows_bound(e.tokens, e.k, n_expert, e.tile);
  e.counts = g.scratch(DType::i32, {n_expert});
  e.offsets = g.scratch(DType::i32, {n_expert});
  e.sorted = g.scratch(DType::i32, {e.rows});
  e.pos = g.scratch(DType::i32, {e.tokens, e.k});
  e.tile_expert = g.scratch(DType::i32, {e.rows / e.tile});
  g.launch("moe_sort", "moe_sort", {},
           {{"ids", r.ids},
            {"counts", e.counts},
            {"offsets", e.offsets},
            {"sorted", e.sorted},
            {"pos", e.pos},
            {"tile_expert", e.tile_expert},
            {"tokens", Arg::scalar_int(e.tokens)},
            {"k", Arg::scalar_int(e.k)},
            {"n_expert", Arg::scalar_int(n_expert)},
            {"rows", Arg::scalar_int(e.rows)}},
           {}, {{"TILE", e.tile}});
  return e;
}

Tensor add_expert_rows(Graph& g, const Tensor& y, const Tensor& b, const ExpertRows& rows) {
  need_dtype("add_expert_rows", y, DType::f32, "y");
  need_dtype("add_expert_rows", b, DType::f32, "biases");
  if (y.rank() != 2 || y.dim(0) != rows.rows || b.numel() != rows.n_expert * y.dim(1))
    mismatch("add_expert_rows", "y " + y.str() + " with biases " + b.str() + " for " +
                                    std::to_string(rows.n_expert) + " experts, " +
                                    std::to_string(rows.rows) + " rows");
  Tensor out = g.overwrite(y);
  g.launch(
      "bias", "add_rows", {{"T", DType::f32}},
      {{"x", out}, {"b", b}, {"n", Arg::scalar_int(y.dim(1))}, {"tile_expert", rows.tile_expert}},
      {{"rows", rows.rows}, {"n_expert", rows.n_expert}}, {{"TILE", rows.tile}});
  return out;
}

Tensor moe_combine(Graph& g, const Tensor& y, const Routing& r, const ExpertRows& rows,
                   const std::optional<Tensor>& onto) {
  need_dtype("moe_combine", y, DType::f32, "y");
  if (y.rank() != 2 || y.dim(0) != rows.rows)
    mismatch("moe_combine", "y " + y.str() + " is not [" + std::to_string(rows.rows) + ", n]");
  const int64_t n = y.dim(1);
  if (onto && (onto->dtype != DType::f32 || onto->numel() != rows.tokens * n))
    mismatch("moe_combine", "onto " + onto->str() + " is not f32 [" + std::to_string(rows.tokens) +
                                ", " + std::to_string(n) + "]");
  Tensor out = onto ? g.overwrite(*onto) : g.scratch(DType::f32, {rows.tokens, n});
  g.launch("moe_combine", "moe_combine", {},
           {{"y", y},
            {"pos", rows.pos},
            {"weights", r.weights},
            {"out", out},
            {"n", Arg::scalar_int(n)},
            {"k", Arg::scalar_int(rows.k)}},
           {{"tokens", rows.tokens}, {"rows", rows.rows}}, {{"ADD", onto ? 1 : 0}});
  return out;
}

}  // namespace ops
}  // namespace kiln
