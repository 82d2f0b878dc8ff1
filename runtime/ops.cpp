#include "runtime/ops.h"

#include <algorithm>
#include <tuple>
#include <type_traits>

#include "ir/error.h"
#include "kernel_params.h"
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
    using K = kernels::quantize_q8;
    launch<K>(g, "quantize", {},
              {{K::x, x}, {K::q, q}, {K::d, d}, {K::s, s}, {K::s8, s8}, {K::nblocks, nb}}, {},
              {{"QBLOCK", qblock}});
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
    using K = kernels::quantize_rows_i8;
    launch<K>(g, "quantize", {}, {{K::x, x}, {K::q, q}, {K::d, d}, {K::s, s}, {K::n, k}},
              {{"rows", t}});
    return std::vector<Tensor>{q, d, s};
  });
}

}  // namespace

Tensor add(Graph& g, const Tensor& x, const Tensor& y) {
  same_dtype("add", {&x, &y});
  if (x.numel() != y.numel())
    mismatch("add", "element counts differ: " + x.str() + " + " + y.str());
  Tensor z = g.scratch(x.dtype, x.shape);
  using K = kernels::add;
  launch<K>(g, "add", {{"T", x.dtype}}, {{K::x, x}, {K::y, y}, {K::z, z}, {K::n, x.numel()}});
  return z;
}

Tensor accumulate(Graph& g, const Tensor& acc, const Tensor& x) {
  same_dtype("accumulate", {&acc, &x});
  if (acc.numel() != x.numel())
    mismatch("accumulate", "element counts differ: " + acc.str() + " += " + x.str());
  Tensor out = g.overwrite(acc);
  using K = kernels::add;
  launch<K>(g, "accumulate", {{"T", acc.dtype}},
            {{K::x, out}, {K::y, x}, {K::z, out}, {K::n, acc.numel()}});
  return out;
}

Tensor add_rows(Graph& g, const Tensor& x, const Tensor& b) {
  same_dtype("add_rows", {&x, &b});
  auto [rows, n] = rows_of("add_rows", x);
  if (b.numel() != n) mismatch("add_rows", "x is " + x.str() + " but the row is " + b.str());
  Tensor y = g.overwrite(x);
  using K = kernels::add_rows;
  launch<K>(g, "bias", {{"T", x.dtype}}, {{K::x, y}, {K::b, b}, {K::n, n}}, {{"rows", rows}});
  return y;
}

Tensor rmsnorm(Graph& g, const Tensor& x, const Tensor& w, double eps) {
  same_dtype("rmsnorm", {&x, &w});
  auto [rows, n] = rows_of("rmsnorm", x);
  if (w.numel() != n) mismatch("rmsnorm", "x is " + x.str() + " but the weight is " + w.str());
  Tensor y = g.scratch(x.dtype, x.shape);
  using K = kernels::rmsnorm;
  launch<K>(g, "rmsnorm", {{"T", x.dtype}},
            {{K::x, x}, {K::w, w}, {K::y, y}, {K::n, n}, {K::eps, eps}}, {{"rows", rows}});
  return y;
}

Tensor softmax(Graph& g, const Tensor& x) {
  auto [rows, n] = rows_of("softmax", x);
  Tensor y = g.scratch(x.dtype, x.shape);
  using K = kernels::softmax;
  launch<K>(g, "softmax", {{"T", x.dtype}}, {{K::x, x}, {K::y, y}, {K::n, n}}, {{"rows", rows}});
  return y;
}

Tensor glu(Graph& g, const Tensor& gate, const Tensor& up, Activation act) {
  same_dtype("glu", {&gate, &up});
  if (gate.shape != up.shape) mismatch("glu", "gate is " + gate.str() + " but up is " + up.str());
  Tensor out = g.scratch(gate.dtype, gate.shape);
  static const char* const kLabels[] = {"silu_mul", "gelu_mul", "swiglu_oai"};
  using K = kernels::glu;
  launch<K>(g, kLabels[static_cast<int>(act)], {{"T", gate.dtype}},
            {{K::gate, gate}, {K::up, up}, {K::out, out}, {K::n, gate.numel()}}, {},
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

// One matmul launch of kernel K for weight w and activations x, its
// operands named through K's typed parameters (kernel_params.h): each
// family below sets only what its kernels take, checked when compiled.
template <class K>
struct MatmulLaunch {
  Graph& g;
  const Weight& w;
  const Tensor& x;
  const Grouped& grouped;
  Tensor y;
  Graph::Operands args = operands<K>({{K::y, y}});
  std::map<std::string, int64_t> fixed = {};

  const ExpertRows* er() const { return grouped.rows; }
  int64_t y_rows() const { return er() ? er()->rows : x.dim(0); }
  void set(const Bind<K>& b) { bind<K>(args, b); }

  // One expert's matrix, in the elements of the operand the kernel reads.
  void grouped_operands(int64_t w_stride) {
    if constexpr (requires { K::tile_expert; }) {
      if (!er()) return;
      set({K::tile_expert, er()->tile_expert});
      set({K::n_expert, w.experts});
      set({K::w_stride, w_stride});
      if (grouped.mode == Grouping::gather) {
        set({K::sorted, er()->sorted});
        set({K::tokens, x.dim(0)});
      }
      fixed["GROUPED"] = static_cast<int64_t>(grouped.mode);
    }
  }
  // x as quantize_q8's blocks of `qblock` for a TokenDots kernel, with its sizes.
  std::vector<Tensor> quantized_x(int64_t qblock) {
    std::vector<Tensor> q = quantize_q8(g, x, qblock);
    set({K::xq, q[0]});
    set({K::xd, q[1]});
    set({K::xs, q[2]});
    set({K::m, w.m});
    set({K::k, w.k});
    set({K::t, y_rows()});
    return q;
  }
  Tensor launch(const std::map<std::string, DType>& dtypes = {}) {
    g.launch(w.label, K::name, dtypes, args, {}, fixed);
    return y;
  }
};

template <class K>
Tensor matmul_w8a8(MatmulLaunch<K> l) {
  const Weight& w = l.w;
  if (!w.scales || w.scales->numel() != std::max<int64_t>(w.experts, 1) * w.m)
    mismatch("linear", "int8 weight '" + w.label + "' has no scale per row");
  std::vector<Tensor> q = quantize_rows_i8(l.g, l.x);
  l.set({K::w, w.data});
  l.set({K::ws, *w.scales});
  l.set({K::xq, q[0]});
  l.set({K::xd, q[1]});
  l.set({K::xs, q[2]});
  l.set({K::m, w.m});
  l.set({K::k, w.k});
  l.set({K::t, l.y_rows()});
  if (l.er()) l.fixed["BLOCK_T"] = l.er()->tile;
  l.grouped_operands(w.m * w.k);
  return l.launch();
}

template <class K>
Tensor matmul_int4w(MatmulLaunch<K> l) {
  const Weight& w = l.w;
  constexpr bool rows16 = std::is_same_v<K, kernels::gemv_int4w_rows16>;
  // Interleaved, one x scale per 256 (int4w.h's chunk); row-major, per 32.
  if (!w.scales || !w.zeros)
    mismatch("linear", "int4 weight '" + w.label + "' has no scales and zero points");
  l.quantized_x(rows16 ? 256 : 32);
  l.fixed["GROUP"] = w.scale_block;
  l.fixed["ZP"] = 1;
  if (l.er()) l.fixed["BLOCK_T"] = l.er()->tile;
  if constexpr (rows16) {
    l.set({K::w, *w.rows16});
    l.grouped_operands(Int4wRows16{w.scale_block, true}.bytes(w.m, w.k));
  } else {
    l.grouped_operands(w.m * w.k / 2);
    l.set({K::q, w.data});
    l.set({K::scales, *w.scales});
    l.set({K::zeros, *w.zeros});
  }
  return l.launch();
}

template <class K>
Tensor matmul_ggml(MatmulLaunch<K> l, const KernelPolicy& policy, const WeightCase& wc,
                   MatmulKernel kernel) {
  const Weight& w = l.w;
  std::vector<Tensor> q = l.quantized_x(activation_block(*w.quant));
  l.fixed["FMT"] = type_id(*w.quant);
  if (l.er())
    l.fixed["BLOCK_T"] = l.er()->tile;
  else if (const int64_t bt = policy.matmul_token_block(wc, kernel, l.y_rows()))
    l.fixed["BLOCK_T"] = bt;
  if constexpr (std::is_same_v<K, kernels::qgemv_rows16>) {
    l.set({K::w, *w.rows16});
    l.set({K::xs8, q[3]});
    l.grouped_operands(ggml::rows16_bytes(*w.quant, w.m, w.k));
  } else {
    l.set({K::w, w.data});
    l.grouped_operands(w.m * w.data.dim(-1));
  }
  return l.launch();
}

// Float weights (f32, f16, bf16, fp8 with block scales).
template <class K>
Tensor matmul_float(MatmulLaunch<K> l) {
  const Weight& w = l.w;
  if (w.scales) {  // per expert, one scale matrix after another
    const int64_t b = w.scale_block;
    if (b <= 0 || w.scales->numel() !=
                      std::max<int64_t>(w.experts, 1) * ((w.m + b - 1) / b) * ((w.k + b - 1) / b))
      mismatch("linear", "weight '" + w.label + "' has scales " + w.scales->str() +
                             ", not one per " + std::to_string(b) + "x" + std::to_string(b) +
                             " block");
    if constexpr (requires { K::ws; }) {
      l.set({K::ws, *w.scales});
      l.fixed["SCALE_BLOCK"] = b;
    } else {
      mismatch("linear",
               "weight '" + w.label + "' has block scales, which " + K::name + " does not take");
    }
  }
  if (w.data.numel() != std::max<int64_t>(w.experts, 1) * w.m * w.k)
    mismatch("linear", "weight data " + w.data.str() + " is not " +
                           (w.experts ? std::to_string(w.experts) + " x " : "") + "[" +
                           std::to_string(w.m) + ", " + std::to_string(w.k) + "]");
  l.set({K::w, w.data});
  l.set({K::x, l.x});
  l.set({K::k, w.k});
  if constexpr (std::is_same_v<K, kernels::gemv>) {
    l.set({K::m, w.m});
    // A step may not straddle scale blocks (tuned steps are at most 64).
    if (w.scales && w.scale_block % 64)
      l.fixed["BLOCK_K"] = std::min<int64_t>(64, w.scale_block & -w.scale_block);
    return l.launch({{"W", w.data.dtype}, {"X", DType::f32}});
  } else {
    l.set({K::n, w.m});
    l.set({K::t, l.y_rows()});
    if constexpr (std::is_same_v<K, kernels::gemm>) {
      if (l.er()) {
        // A panel is one tile of one expert's rows.
        l.fixed["PANEL_T"] = l.er()->tile;
        l.fixed["BLOCK_T"] = std::min<int64_t>(l.er()->tile, 4);
      }
    } else if (l.er()) {
      l.fixed["BLOCK_T"] = l.er()->tile;
    }
    l.grouped_operands(w.m * w.k);
    return l.launch({{"W", w.data.dtype}});
  }
}

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
  // The kernel must read what the weight holds.
  auto need = [&](bool ok) {
    if (!ok)
      mismatch("linear", "the " + policy.name() + " policy chose " + matmul_kernel_name(kernel) +
                             " for weight '" + w.label + "' (" + type_of(w) + ", " +
                             (w.rows16 ? "16-row interleaved" : "as stored") +
                             "), which does not read it");
  };
  auto with = [&]<class K>(K) { return MatmulLaunch<K>{g, w, x, grouped, y}; };
  const bool int4 = w.quant == TensorType::i4, ggml = w.quant && is_block_quantized(*w.quant);
  const bool rows16 = w.rows16.has_value(), dense = !w.quant && !rows16;
  switch (kernel) {
    case MatmulKernel::gemv_w8a8:
      need(w.quant == TensorType::i8_channel);
      return matmul_w8a8(with(kernels::gemv_w8a8{}));
    case MatmulKernel::gemv_int4w:
      need(int4 && !rows16);
      return matmul_int4w(with(kernels::gemv_int4w{}));
    case MatmulKernel::gemv_int4w_rows16:
      need(int4 && rows16);
      return matmul_int4w(with(kernels::gemv_int4w_rows16{}));
    case MatmulKernel::gemm_int4w_tiles:
      need(int4 && !rows16);
      return matmul_int4w(with(kernels::gemm_int4w_tiles{}));
    case MatmulKernel::qgemv:
      need(ggml && !rows16);
      return matmul_ggml(with(kernels::qgemv{}), policy, wc, kernel);
    case MatmulKernel::qgemv_rows16:
      need(ggml && rows16);
      return matmul_ggml(with(kernels::qgemv_rows16{}), policy, wc, kernel);
    case MatmulKernel::qgemm_tiles:
      need(ggml && !rows16);
      return matmul_ggml(with(kernels::qgemm_tiles{}), policy, wc, kernel);
    case MatmulKernel::gemv:
      need(dense && !er && x.dim(0) == 1);
      return matmul_float(with(kernels::gemv{}));
    case MatmulKernel::gemm: need(dense); return matmul_float(with(kernels::gemm{}));
    case MatmulKernel::gemm_tiles:
      need(dense && !w.scales);
      return matmul_float(with(kernels::gemm_tiles{}));
  }
  throw Error("linear: unknown matmul kernel");
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
  using K = kernels::get_rows;
  launch<K>(g, "get_rows", {{"W", dtype}},
            {{K::table, table},
             {K::ids, ids},
             {K::out, out},
             {K::n, n},
             {K::rows, ids.numel()},
             {K::scale, scale}},
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
  using K = kernels::rope;
  launch<K>(g, "rope", {{"T", x.dtype}},
            {{K::x, y},
             {K::cos_sin, cos_sin},
             {K::pos, positions},
             {K::n_heads, x.dim(1) / head_dim},
             {K::n_pos, cos_sin.dim(0)}},
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
template <class K>
void add_cache_operands(Graph::Operands& args, const KvCache& cache) {
  if (is_aura_kv(cache.k.dtype)) {
    if (!cache.k_scale || !cache.v_scale || !cache.kbits || !cache.vbits)
      mismatch("attention", "an AURA KV cache without its norms or bits");
    need_dtype("attention", *cache.k_scale, DType::f16, "K norms");
    need_dtype("attention", *cache.v_scale, DType::f16, "V norms");
    bind<K>(args, {K::k_scale, *cache.k_scale});
    bind<K>(args, {K::v_scale, *cache.v_scale});
    return;
  }
  if (is_quantized_kv(cache.k.dtype)) {
    if (!cache.k_scale || !cache.v_scale)
      mismatch("attention", "a q8_0 KV cache without its scales");
    need_dtype("attention", *cache.k_scale, DType::f16, "K scales");
    need_dtype("attention", *cache.v_scale, DType::f16, "V scales");
    bind<K>(args, {K::k_scale, *cache.k_scale});
    bind<K>(args, {K::v_scale, *cache.v_scale});
  }
  if (cache.page == 0) return;
  if (!cache.table) mismatch("attention", "a paged KV cache without a block table");
  need_dtype("attention", *cache.table, DType::i32, "block table");
  if constexpr (requires { K::block_table; }) {
    bind<K>(args, {K::block_table, *cache.table});
    bind<K>(args, {K::n_pages, cache.n_pages});
  } else {
    mismatch("attention", std::string(K::name) + " reads no paged cache");
  }
}

// A store's operands for keys and values [t, n_kv_heads * head_dim]; the
// cache's buffers become the store's results (graph order).
template <class K>
Graph::Operands store_operands(Graph& g, KvCache& cache, const Tensor& k, const Tensor& v) {
  const int64_t kd = cache.n_kv_heads * cache.head_dim;
  if (k.rank() != 2 || k.dim(1) != kd || k.shape != v.shape)
    mismatch("kv_append", "keys " + k.str() + " and values " + v.str() + " are not [t, " +
                              std::to_string(kd) + "]");
  cache.k = g.overwrite(cache.k);
  cache.v = g.overwrite(cache.v);
  if (cache.k_scale) cache.k_scale = g.overwrite(*cache.k_scale);
  if (cache.v_scale) cache.v_scale = g.overwrite(*cache.v_scale);
  return operands<K>({{K::xk, k},
                      {K::xv, v},
                      {K::k, cache.k},
                      {K::v, cache.v},
                      {K::n_tokens, k.dim(0)},
                      {K::n_kv_heads, cache.n_kv_heads},
                      {K::max_ctx, cache.max_ctx}});
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
template <class K>
void add_query_operands(Graph& g, Graph::Operands& args, const Tensor& q, const KvCache& cache) {
  if (!is_quantized_kv(cache.k.dtype)) return;
  need_dtype("attention", q, DType::f32, "q over a q8_0 cache");
  std::vector<Tensor> q8 = quantize_q8(g, q, kKvQuantBlock);
  bind<K>(args, {K::q, q8[0]});
  bind<K>(args, {K::q_scale, q8[1]});
  bind<K>(args, {K::q_sum, q8[2]});
}
}  // namespace

Tensor kv_append(Graph& g, KvCache& cache, const Tensor& k, const Tensor& v,
                 const Plan::Dynamic& pos0) {
  if (is_aura_kv(cache.k.dtype)) {
    using K = kernels::aura_encode;
    if (!cache.k_rot || !cache.v_rot) mismatch("kv_append", "an AURA KV cache without rotations");
    Graph::Operands args = store_operands<K>(g, cache, k, v);
    bind<K>(args, {K::pos0, pos0});
    add_cache_operands<K>(args, cache);
    bind<K>(args, {K::k_rot, *cache.k_rot});
    bind<K>(args, {K::v_rot, *cache.v_rot});
    g.launch("kv_store", K::name, {{"T", k.dtype}}, args, {},
             {{"HEAD_DIM", cache.head_dim}, {"KBITS", cache.kbits}, {"VBITS", cache.vbits}});
    return cache.k;
  }
  using K = kernels::kv_cache_store;
  Graph::Operands args = store_operands<K>(g, cache, k, v);
  bind<K>(args, {K::pos0, pos0});
  add_cache_operands<K>(args, cache);
  g.launch("kv_store", K::name, {{"KV", cache.k.dtype}}, args, {},
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
  using K = kernels::aura_rotate;
  launch<K>(g, "aura_rotate", {{"X", x.dtype}, {"Y", to}},
            {{K::x, x}, {K::rot, rot}, {K::out, y}, {K::n_rows, rows}}, {{"rows", rows}},
            {{"DIN", din}, {"DOUT", dout}});
  return y;
}

// The attention kernels over `cache` as they are laid out (HEAD_DIM its
// head_dim), q in the kernels' query dtype.
// What every attention kernel over one sequence's cache takes (the split
// pass has no `out` and no sinks: they join in the merge).
template <class K>
Graph::Operands sequence_operands(Graph& g, const Tensor& q, const KvCache& cache,
                                  const Tensor& out, int64_t heads, double scale,
                                  const Plan::Dynamic& kv_len, const Plan::Dynamic& pos0,
                                  const AttentionMask& mask) {
  Graph::Operands args = operands<K>({{K::q, q},
                                      {K::k, cache.k},
                                      {K::v, cache.v},
                                      {K::n_tokens, q.dim(0)},
                                      {K::n_heads, heads},
                                      {K::n_kv_heads, cache.n_kv_heads},
                                      {K::max_ctx, cache.max_ctx},
                                      {K::kv_len, kv_len},
                                      {K::pos0, pos0},
                                      {K::scale, scale},
                                      {K::window, mask.window}});
  if constexpr (requires { K::out; }) {
    bind<K>(args, {K::out, out});
    if (mask.sinks) bind<K>(args, {K::sinks, *mask.sinks});
  }
  add_cache_operands<K>(args, cache);
  add_query_operands<K>(g, args, q, cache);
  return args;
}

Tensor attention_launches(Graph& g, const Tensor& q, const KvCache& cache, double scale,
                          const Plan::Dynamic& kv_len, const Plan::Dynamic& pos0,
                          const AttentionMask& mask) {
  const int64_t d = cache.head_dim, t = q.dim(0), heads = attention_heads(q, cache, mask);
  const int64_t sinks = mask.sinks ? 1 : 0;
  Tensor out = g.scratch(q.dtype, q.shape);
  const std::map<std::string, DType> dtypes = {{"KV", cache.k.dtype}, {"T", q.dtype}};
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
    auto pass1 = [&]<class K>(K) {
      Graph::Operands a = sequence_operands<K>(g, q, cache, out, heads, scale, kv_len, pos0, mask);
      bind<K>(a, {K::part_o, part_o});
      bind<K>(a, {K::part_ml, part_ml});
      g.launch("attention", K::name, dtypes, a, {}, split_fixed);
    };
    if (tiles)
      pass1(kernels::attention_decode_tiles{});
    else
      pass1(kernels::attention_decode_split{});
    using M = kernels::attention_decode_merge;
    Graph::Operands merge = operands<M>({{M::part_o, part_o},
                                         {M::part_ml, part_ml},
                                         {M::out, out},
                                         {M::n_tokens, t},
                                         {M::n_heads, heads},
                                         {M::max_ctx, cache.max_ctx},
                                         {M::kv_len, kv_len},
                                         {M::pos0, pos0},
                                         {M::window, mask.window}});
    if (mask.sinks) bind<M>(merge, {M::sinks, *mask.sinks});
    auto merge_fixed = fixed;
    merge_fixed["SINKS"] = sinks;
    g.launch("attention", M::name, {{"T", q.dtype}}, merge, {}, merge_fixed);
    return out;
  }
  std::map<std::string, int64_t> fixed = {{"HEAD_DIM", d}, {"SINKS", sinks}, {"PAGE", cache.page}};
  add_aura_bits(fixed, cache);
  auto one_pass = [&]<class K>(K) {
    g.launch(K::name, K::name, dtypes,
             sequence_operands<K>(g, q, cache, out, heads, scale, kv_len, pos0, mask), {}, fixed);
  };
  if (t == 1)
    one_pass(kernels::attention_decode{});
  else if (tiles)
    one_pass(kernels::attention_prefill_tiles{});
  else
    one_pass(kernels::attention_prefill{});
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
  using K = kernels::kv_cache_store;
  Graph::Operands args = store_operands<K>(g, cache, k, v);
  bind<K>(args, {K::positions, positions});
  bind<K>(args, {K::tok_seq, batch.tok_seq});
  bind<K>(args, {K::n_seqs, batch.n_seqs});
  KvCache paged = cache;
  paged.table = batch.tables;
  add_cache_operands<K>(args, paged);
  g.launch("kv_store", K::name, {{"KV", cache.k.dtype}}, args, {},
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
  const std::map<std::string, int64_t> fixed = {
      {"HEAD_DIM", d}, {"SINKS", mask.sinks ? 1 : 0}, {"PAGE", cache.page}};
  const std::map<std::string, DType> dtypes = {{"KV", cache.k.dtype}, {"T", q.dtype}};
  auto batch_operands = [&]<class K>(K) {
    Graph::Operands args = operands<K>({{K::q, q},
                                        {K::k, cache.k},
                                        {K::v, cache.v},
                                        {K::out, out},
                                        {K::n_heads, heads},
                                        {K::n_kv_heads, cache.n_kv_heads},
                                        {K::max_ctx, cache.max_ctx},
                                        {K::n_seqs, batch.n_seqs},
                                        {K::scale, scale},
                                        {K::window, mask.window}});
    if (mask.sinks) bind<K>(args, {K::sinks, *mask.sinks});
    add_cache_operands<K>(args, paged);
    add_query_operands<K>(g, args, q, cache);
    return args;
  };
  if (t == batch.n_seqs) {  // one token each: a decode step
    using K = kernels::attention_decode_batch;
    Graph::Operands args = batch_operands(K{});
    bind<K>(args, {K::seq_len, batch.seq_len});
    g.launch("attention", K::name, dtypes, args, {}, fixed);
    return out;
  }
  // The grid covers the longest sequence's tokens, at most what is left
  // when every other sequence brings one.
  using K = kernels::attention_prefill_varlen;
  Graph::Operands args = batch_operands(K{});
  bind<K>(args, {K::cu_seqlens, batch.cu_seqlens});
  bind<K>(args, {K::seq_pos0, batch.seq_pos0});
  bind<K>(args, {K::n_tokens, t});
  bind<K>(args, {K::max_seq_tokens, std::min(t - batch.n_seqs + 1, cache.max_ctx)});
  g.launch("attention", K::name, dtypes, args, {}, fixed);
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
  using K = kernels::moe_topk;
  Graph::Operands args = operands<K>({{K::logits, logits},
                                      {K::ids, r.ids},
                                      {K::weights, r.weights},
                                      {K::n_expert, ne},
                                      {K::k, k},
                                      {K::norm, o.norm_topk ? 1 : 0}});
  if (o.expert_map) {
    need_dtype("moe_route", *o.expert_map, DType::i32, "expert map");
    if (o.expert_map->numel() != ne)
      mismatch("moe_route", "expert map " + o.expert_map->str() + " for " + std::to_string(ne) +
                                " router experts");
    bind<K>(args, {K::expert_map, *o.expert_map});
    bind<K>(args, {K::renorm, o.renorm ? 1 : 0});
  }
  g.launch("moe_route", K::name, {}, args, {{"tokens", t}},
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
  using K = kernels::moe_sort;
  launch<K>(g, "moe_sort", {},
            {{K::ids, r.ids},
             {K::counts, e.counts},
             {K::offsets, e.offsets},
             {K::sorted, e.sorted},
             {K::pos, e.pos},
             {K::tile_expert, e.tile_expert},
             {K::tokens, e.tokens},
             {K::k, e.k},
             {K::n_expert, n_expert},
             {K::rows, e.rows}},
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
  using K = kernels::add_rows;
  launch<K>(g, "bias", {{"T", DType::f32}},
            {{K::x, out}, {K::b, b}, {K::n, y.dim(1)}, {K::tile_expert, rows.tile_expert}},
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
  using K = kernels::moe_combine;
  launch<K>(g, "moe_combine", {},
            {{K::y, y},
             {K::pos, rows.pos},
             {K::weights, r.weights},
             {K::out, out},
             {K::n, n},
             {K::k, rows.k}},
            {{"tokens", rows.tokens}, {"rows", rows.rows}}, {{"ADD", onto ? 1 : 0}});
  return out;
}

}  // namespace ops
}  // namespace kiln
