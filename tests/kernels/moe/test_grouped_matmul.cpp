// The grouped matmuls (kernels/moe/expert_tiles.h): qgemv (Q4_0, Q8_0,
// Q4_K), qgemv_rows16 (Q8_0, Q4_K, Q6_K, MXFP4, IQ4_XS), gemv_int4w_rows16,
// gemv_int4w (scales and zero points per expert), gemv_w8a8 (row scales per
// expert) and gemm (f16, and FP8 with a scale matrix per expert) with GROUPED 1 (rows gathered from
// the layer's input) and 2 (rows in sorted order), for tiles of 1, 2 and 4 rows, over a stack of
// experts some of which no token chose. Each row must equal the plain kernel (BLOCK_T 1, checked
// against scalar references in its own tests) run on its expert's matrix and its x row: the same
// per-token arithmetic, so within 1e-5 of the output's scale (only the accumulation order of a
// token block may differ). Padding rows repeat their tile's first row; tiles past the last expert's
// are not written. JIT and interpreter alike.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <span>

#include "kernels/moe/expert_tiles.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/int4w.h"
#include "kernels/quant/rows16.h"
#include "moe_reference.h"
#include "support/quantized_x.h"
#include "support/random_int4w.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;

namespace {

constexpr int64_t NE = 5, M = 32, K = 512, T = 6, TOP = 2;

// The arguments of `named` that the spec's kernel takes, by parameter
// name (each parameter must be among them; the rest are left out).
LaunchArgs kernel_args(const Spec& spec, const std::map<std::string, LaunchArg>& named) {
  LaunchArgs args;
  for (const Param& p : build_kernel(spec).params) {
    auto it = named.find(p.name);
    REQUIRE(it != named.end());
    args.emplace_back(p.name, it->second);
  }
  return args;
}

// What one kernel needs: its name, constexprs, each expert's weight
// operands (as the kernel reads them) and its x operands for given float
// rows.
struct Case {
  std::string kernel;
  std::map<std::string, int64_t> constexprs;
  std::map<std::string, DType> dtypes;
  TensorType quant = TensorType::q8_0;
  enum Form { ggml, f16, fp8, int4w_rows16, int4w, w8a8 } form = ggml;
};

// One expert's operands by parameter name, as bytes; a stack of experts
// concatenates each. `w` (or int4w's `q`) is the one w_stride describes.
using Operands = std::map<std::string, std::vector<uint8_t>>;

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

Operands expert_operands(const Case& c, int64_t e) {
  std::vector<float> wf = test::normal_floats(static_cast<size_t>(M * K), 100 + e);
  switch (c.form) {
    case Case::fp8: {  // every E4M3 code but the NaNs, FP8 checkpoints' block scales
      const int64_t b = c.constexprs.at("SCALE_BLOCK");
      std::vector<uint8_t> w(M * K);
      for (int64_t i = 0; i < M * K; ++i) w[i] = static_cast<uint8_t>((i * 37 + e * 11) % 254);
      for (uint8_t& x : w) x = x == 0x7F ? 0x7E : x;
      std::vector<float> ws(static_cast<size_t>((M / b) * (K / b)));
      for (size_t i = 0; i < ws.size(); ++i)
        ws[i] = 0.001f * static_cast<float>(1 + (i * 7 + e) % 13);
      return {{"w", w}, {"ws", as_bytes(ws)}};
    }
    case Case::f16: {
      std::vector<uint16_t> w(M * K);
      for (int64_t i = 0; i < M * K; ++i) w[i] = f32_to_f16_bits(wf[i]);
      return {{"w", as_bytes(w)}};
    }
    case Case::int4w_rows16:
      return {{"w", interleave_int4w_rows16(
                        test::random_int4w(M, K, c.constexprs.at("GROUP"), false, 100 + e))}};
    case Case::int4w: {
      Int4wRows r = test::random_int4w(M, K, c.constexprs.at("GROUP"), true, 100 + e);
      return {{"q", r.q}, {"scales", as_bytes(r.scales)}, {"zeros", r.zeros}};
    }
    case Case::w8a8: {  // codes of every value, a scale per row
      std::vector<uint8_t> w(M * K);
      for (int64_t i = 0; i < M * K; ++i) w[i] = static_cast<uint8_t>((i * 53 + e * 7) % 256);
      std::vector<float> ws(M);
      for (int64_t i = 0; i < M; ++i) ws[i] = 0.002f * static_cast<float>(1 + (i + e) % 9);
      return {{"w", w}, {"ws", as_bytes(ws)}};
    }
    case Case::ggml: break;
  }
  const TensorTypeInfo& f = tensor_type_info(c.quant);
  std::vector<uint8_t> w(static_cast<size_t>(M * K / f.block_elems * f.block_bytes));
  ggml::quantize(c.quant, wf.data(), M * K, w.data());
  if (c.kernel == "qgemv_rows16") return {{"w", ggml::interleave_rows16(c.quant, w.data(), M, K)}};
  return {{"w", w}};
}

// x rows as gemv_w8a8 reads them (quantize_rows_i8's form: int8 codes, a
// scale and the code sum per row).
struct RowsI8 {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> s;
};

RowsI8 quantize_rows(const std::vector<float>& x) {
  const int64_t rows = static_cast<int64_t>(x.size()) / K;
  RowsI8 r{std::vector<int8_t>(x.size()), std::vector<float>(rows), std::vector<int32_t>(rows)};
  for (int64_t i = 0; i < rows; ++i) {
    float amax = 0;
    for (int64_t j = 0; j < K; ++j) amax = std::max(amax, std::fabs(x[i * K + j]));
    r.d[i] = amax / 127;
    for (int64_t j = 0; j < K; ++j) {
      r.q[i * K + j] = static_cast<int8_t>(std::nearbyint(x[i * K + j] / r.d[i]));
      r.s[i] += r.q[i * K + j];
    }
  }
  return r;
}

// y [rows, M] of the kernel over weight operands `w` (one expert's, or a
// stack with `grouped`), x rows `x`, through the JIT or the interpreter.
std::vector<float> run(const Case& c, std::map<std::string, int64_t> cx, Operands& w,
                       std::vector<float>& x, int64_t t, int64_t y_rows,
                       std::map<std::string, LaunchArg> grouped, std::vector<float> y,
                       bool interpret) {
  for (const auto& [name, v] : c.constexprs) cx.emplace(name, v);
  Spec spec = find_kernel(c.kernel).make_spec(c.dtypes, cx);
  const Kernel kernel = build_kernel(spec);
  const int64_t x_rows = static_cast<int64_t>(x.size()) / K;
  std::map<std::string, LaunchArg> a = grouped;
  a.emplace("y", std::span(y.data(), y_rows * M));
  a.emplace("t", t);
  a.emplace("k", K);
  for (auto& [name, bytes] : w)
    for (const Param& p : kernel.params)
      if (p.name == name)
        a.emplace(name,
                  LaunchArg(bytes.data(), static_cast<int64_t>(bytes.size()) / dtype_bytes(p.dtype),
                            p.dtype));
  test::QuantizedX xq;
  RowsI8 xi;
  if (c.form == Case::f16 || c.form == Case::fp8) {
    a.emplace("x", std::span(x.data(), x_rows * K));
    a.emplace("n", M);
  } else if (c.form == Case::w8a8) {
    xi = quantize_rows(x);
    a.emplace("xq", std::span(xi.q.data(), x_rows * K));
    a.emplace("xd", std::span(xi.d.data(), x_rows));
    a.emplace("xs", std::span(xi.s.data(), x_rows));
    a.emplace("m", M);
  } else {
    const bool qk = c.form == Case::int4w_rows16 ||
                    (c.form == Case::ggml && tensor_type_info(c.quant).block_elems == 256);
    xq = test::quantize_x(x, false, qk ? 256 : 32);
    a.emplace("xq", std::span(xq.q.data(), x_rows * K));
    a.emplace("xd", std::span(xq.d.data(), x_rows * K / 32));
    a.emplace("xs", std::span(xq.s.data(), x_rows * K / 32));
    a.emplace("xs8", xq.s8);
    a.emplace("m", M);
  }
  const LaunchArgs args = kernel_args(spec, a);
  if (interpret)
    test::runtime().interpret(spec, args);
  else
    test::runtime().launch(spec, args);
  return y;
}

void check_grouped(const Case& c) {
  std::mt19937_64 rng(7);
  std::vector<int32_t> ids(T * TOP);
  for (int32_t& e : ids) e = static_cast<int32_t>(rng() % 4) - 1;  // experts 0-2, some dropped
  ids[0] = 0;
  std::vector<Operands> per_expert;
  Operands stack;
  for (int64_t e = 0; e < NE; ++e) {
    per_expert.push_back(expert_operands(c, e));
    for (const auto& [name, bytes] : per_expert.back())
      stack[name].insert(stack[name].end(), bytes.begin(), bytes.end());
  }
  const std::string strided = c.form == Case::int4w ? "q" : "w";
  const int64_t stride =
      static_cast<int64_t>(per_expert[0][strided].size()) / (c.form == Case::f16 ? 2 : 1);
  for (int64_t tile : {1, 2, 4})
    for (Grouping mode : {Grouping::gather, Grouping::sorted}) {
      const int64_t rows = moe_rows_bound(T, TOP, NE, tile);
      test::SortedPairs sp = test::sort_pairs(ids, TOP, NE, tile, rows);
      const int64_t x_rows = mode == Grouping::gather ? T : rows;
      std::vector<float> x = test::normal_floats(static_cast<size_t>(x_rows * K), 9);
      std::map<std::string, LaunchArg> g = {
          {"tile_expert", std::span(sp.tile_expert.data(), rows / tile)},
          {"sorted", std::span(sp.sorted.data(), rows)},
          {"n_expert", NE},
          {"w_stride", stride},
          {"tokens", T}};
      std::map<std::string, int64_t> cx = {{"GROUPED", static_cast<int64_t>(mode)}};
      if (c.kernel == "gemm")
        cx.insert({{"PANEL_T", tile}, {"BLOCK_T", tile}});
      else
        cx["BLOCK_T"] = tile;
      const float poison = -12345.0f;
      // The plain kernel per expert over every x row.
      std::vector<std::vector<float>> plain;
      for (int64_t e = 0; e < NE; ++e)
        plain.push_back(run(c, {{"BLOCK_T", 1}}, per_expert[e], x, x_rows, x_rows, {},
                            std::vector<float>(x_rows * M), false));
      for (bool interpret : {false, true}) {
        INFO(c.kernel << " tile " << tile << " mode " << static_cast<int>(mode)
                      << (interpret ? " interpreter" : " JIT"));
        std::vector<float> y =
            run(c, cx, stack, x, rows, rows, g, std::vector<float>(rows * M, poison), interpret);
        double scale = 0, worst = 0;
        int64_t written_past = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const int32_t e = sp.tile_expert[r / tile];
          if (e < 0) {
            for (int64_t i = 0; i < M; ++i) written_past += y[r * M + i] != poison;
            continue;
          }
          int32_t xr = static_cast<int32_t>(r);
          if (mode == Grouping::gather) {
            xr = sp.sorted[r] >= 0 ? sp.sorted[r] : sp.sorted[r / tile * tile];
          }
          for (int64_t i = 0; i < M; ++i) {
            const float want = plain[e][xr * M + i];
            scale = std::max(scale, std::fabs(static_cast<double>(want)));
            worst = kiln::test::worse(worst, std::fabs(static_cast<double>(y[r * M + i]) - want));
          }
        }
        CHECK(written_past == 0);
        CHECK(scale > 0);
        CHECK(worst <= 1e-5 * scale);
      }
    }
}

}  // namespace

TEST_CASE("grouped matmuls equal the plain kernel on each row's expert", "[kernels][moe]") {
  check_grouped({"qgemv", {{"FMT", 12}, {"BLOCK_M", 8}}, {}, TensorType::q4_K});
  check_grouped({"qgemv", {{"FMT", 8}, {"BLOCK_M", 1}}, {}, TensorType::q8_0});
  check_grouped({"qgemv_rows16", {{"FMT", 12}}, {}, TensorType::q4_K});
  check_grouped({"qgemv_rows16", {{"FMT", 14}}, {}, TensorType::q6_K});
  check_grouped({"qgemv", {{"FMT", 2}, {"BLOCK_M", 4}}, {}, TensorType::q4_0});
  check_grouped({"qgemv_rows16", {{"FMT", 39}}, {}, TensorType::mxfp4});
  check_grouped({"qgemv_rows16", {{"FMT", 23}}, {}, TensorType::iq4_xs});
  check_grouped({"qgemv_rows16", {{"FMT", 8}}, {}, TensorType::q8_0});
  check_grouped({"gemm", {}, {{"W", DType::f16}}, {}, Case::f16});
  check_grouped({"gemm", {{"SCALE_BLOCK", 16}}, {{"W", DType::f8e4m3}}, {}, Case::fp8});
  check_grouped({"gemv_int4w_rows16", {{"GROUP", 128}}, {}, {}, Case::int4w_rows16});
  check_grouped({"gemv_int4w", {{"GROUP", 64}, {"ZP", 1}, {"BLOCK_M", 4}}, {}, {}, Case::int4w});
  check_grouped({"gemv_w8a8", {{"BLOCK_M", 4}}, {}, {}, Case::w8a8});
}

TEST_CASE("grouped matmuls refuse a row count off the tile and a short expert stride",
          "[kernels][moe][error]") {
  const KernelDef& d = find_kernel("qgemv");
  Spec s = d.make_spec({}, {{"FMT", 8}, {"BLOCK_T", 4}, {"GROUPED", 2}});
  ScalarArgs a;
  for (auto [n, v] : std::map<std::string, int64_t>{
           {"m", 32}, {"k", 256}, {"t", 6}, {"n_expert", 4}, {"w_stride", 32 * 8 * 34}})
    a.set_int(n, v);
  REQUIRE_THROWS_WITH(d.launch_shape(s, a), Catch::Contains("qgemv") && Catch::Contains("t = 6") &&
                                                Catch::Contains("tile of 4"));
  a.set_int("t", 8);
  a.set_int("w_stride", 100);
  REQUIRE_THROWS_WITH(d.launch_shape(s, a),
                      Catch::Contains("w_stride = 100") && Catch::Contains("one expert"));
  REQUIRE_THROWS_WITH(grouping(find_kernel("gemm").make_spec({}, {{"GROUPED", 3}})),
                      Catch::Contains("GROUPED = 3"));
}

// The CPU runs axis 0 fastest: plain launches keep a row block while the
// token tiles pass over it; grouped ones walk an expert's row blocks in
// address order (ExpertTiles::row_block).
TEST_CASE("grouped launches put row blocks on axis 0, plain ones token tiles", "[kernels][moe]") {
  const KernelDef& d = find_kernel("qgemv_rows16");
  ScalarArgs a;
  for (auto [n, v] : std::map<std::string, int64_t>{
           {"m", 64}, {"k", 256}, {"t", 8}, {"n_expert", 4}, {"w_stride", 1 << 20}})
    a.set_int(n, v);
  Grid plain = d.launch_shape(d.make_spec({}, {{"FMT", 12}, {"BLOCK_T", 2}}), a).grid;
  CHECK(plain == Grid{4, 4, 1});  // 8 / 2 token tiles, then 64 / 16 row blocks
  a.set_int("m", 128);
  Grid grouped =
      d.launch_shape(d.make_spec({}, {{"FMT", 12}, {"BLOCK_T", 2}, {"GROUPED", 2}}), a).grid;
  CHECK(grouped == Grid{8, 4, 1});  // 128 / 16 row blocks, then 8 / 2 tiles
}
