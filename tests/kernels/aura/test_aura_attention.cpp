// Attention over an AURA cache, end to end through the kernels a model
// runs: aura_rotate takes q into the rotated space, attention_decode /
// attention_decode_split + merge / attention_prefill walk the codes
// (KV = u32), aura_rotate brings the output back. Three references
// (AURA.md section 9, pitfalls 1-4, 11 and 13):
// - a dense float64 oracle in the original space: each cached vector
//   decoded (norm * codebook value) and rotated back by a butterfly, then
//   softmax(q k^T / sqrt(d)) v with the case's window and sinks;
// - the dequant mirror: the same decoded vectors, still rotated, written as
//   an ordinary f32 cache by aura_dequant (checked against the host's
//   decoding) and run through the same attention kernel;
// - q's rotation against the butterfly.
// Caches hold S > T rows with NaN norms past T (a kernel reading a row it
// must not, or taking T as the row stride, gives NaN); heads are 8 over 2
// KV heads with distinct queries; split-K runs with one slice and several,
// T not a multiple of the slice; random rotation signs throughout.
//
// Tolerances: the compressed walk against the mirror 2e-5 absolute (the
// same f32 online softmax; the decoded keys differ only in where the norm
// multiplies); against the f64 oracle 1e-4 absolute on outputs of
// magnitude ~1 (f32 scores over D products and the two rotations), or one
// unit in the last place of the output dtype for f16/bf16.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include "aura_reference.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/aura/aura_format.h"
#include "kernels/registry.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {

struct Case {
  int kbits = 4, vbits = 4;
  int64_t head_dim = 128, n_heads = 8, n_kv = 2, n_tokens = 1, kv_len = 45, max_ctx = 61;
  int64_t window = 0;
  bool sinks = false;
  DType act = DType::f32;
  std::string kernel = "decode";  // decode, split, prefill
  int64_t split = 16;
  uint64_t seed = 1;
  int64_t D() const { return aura_padded_dim(head_dim); }
  int64_t pos0() const { return kv_len - n_tokens; }
  std::string describe() const {
    std::ostringstream os;
    os << kernel << " aura" << kbits << "v" << vbits << " d=" << head_dim << " T=" << kv_len
       << " S=" << max_ctx << " tokens=" << n_tokens << " window=" << window << " sinks=" << sinks
       << " act=" << dtype_name(act) << " split=" << split;
    return os.str();
  }
};

constexpr int64_t kLayer = 2;

// The cache as the reference encoder writes it, and each row decoded.
struct Cache {
  std::vector<uint32_t> k, v;
  HostBuffer kn{DType::f16, 0}, vn{DType::f16, 0};
  // [h][n] decoded rows: rotated (D) and original (d).
  std::vector<std::vector<double>> k_rot, v_rot, k_orig, v_orig;
};

Cache build_cache(const Case& c, std::mt19937_64& rng) {
  const int64_t D = c.D(), d = c.head_dim, rows = c.n_kv * c.max_ctx;
  const int64_t Wk = packed_words(D, c.kbits), Wv = packed_words(D, c.vbits);
  Cache ca;
  ca.k.assign(rows * Wk, 0xffffffffu);
  ca.v.assign(rows * Wv, 0xffffffffu);
  ca.kn = HostBuffer(DType::f16, rows);
  ca.vn = HostBuffer(DType::f16, rows);
  ca.k_rot.resize(rows), ca.v_rot.resize(rows), ca.k_orig.resize(rows), ca.v_orig.resize(rows);
  const std::vector<float> sk = aura_signs(kAuraSeed, kLayer, AuraKind::k, D),
                           sv = aura_signs(kAuraSeed, kLayer, AuraKind::v, D);
  std::normal_distribution<float> g(0.f, 1.f);
  for (int64_t r = 0; r < rows; ++r) {
    ca.kn.set(r, NAN);
    ca.vn.set(r, NAN);
    if (r % c.max_ctx >= c.kv_len) continue;
    std::vector<float> xk(d), xv(d);
    for (int64_t i = 0; i < d; ++i) {
      xk[i] = g(rng) * (i == 3 ? 6.f : 1.f);
      xv[i] = g(rng);
    }
    auto put = [&](const std::vector<float>& x, const std::vector<float>& s, int bits,
                   std::vector<uint32_t>& words, HostBuffer& norms, std::vector<double>& rot,
                   std::vector<double>& orig) {
      kiln::test::RefEncoded e = kiln::test::ref_encode(x, s, bits);
      std::vector<uint32_t> w = kiln::test::ref_pack(e.codes, bits);
      std::copy(w.begin(), w.end(), words.begin() + r * static_cast<int64_t>(w.size()));
      norms.set(r, e.norm);
      rot = kiln::test::ref_rotated(e.codes, norms.get(r), bits);
      orig = kiln::test::ref_unrotate(rot, s, d);
    };
    put(xk, sk, c.kbits, ca.k, ca.kn, ca.k_rot[r], ca.k_orig[r]);
    put(xv, sv, c.vbits, ca.v, ca.vn, ca.v_rot[r], ca.v_orig[r]);
  }
  return ca;
}

void launch(const Spec& s, const LaunchArgs& a) { kiln::test::runtime().launch(s, a); }

// rows [n, din] of `x` times the matrix: aura_rotate.
HostBuffer rotate(HostBuffer& x, std::vector<float>& m, int64_t din, int64_t dout, DType to) {
  const int64_t n = x.size() / din;
  HostBuffer out(to, n * dout);
  Spec s = find_kernel("aura_rotate")
               .make_spec({{"X", x.dtype()}, {"Y", to}}, {{"DIN", din}, {"DOUT", dout}});
  launch(s, {{"x", x}, {"rot", m}, {"out", out}, {"n_rows", n}});
  return out;
}

// The attention kernel(s) of the case over cache buffers k, v (dtype kv)
// with extra buffers (an AURA cache's norms), q' f32 [tokens, heads, D].
HostBuffer attend(const Case& c, DType kv, HostBuffer& q, const LaunchArg& k, const LaunchArg& v,
                  const LaunchArgs& extra, HostBuffer& sinks) {
  const int64_t D = c.D();
  std::map<std::string, int64_t> cx = {{"HEAD_DIM", D}};
  if (kv == DType::u32) cx["KBITS"] = c.kbits, cx["VBITS"] = c.vbits;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  HostBuffer out(DType::f32, c.n_tokens * c.n_heads * D);
  for (int64_t i = 0; i < out.size(); ++i) out.set(i, NAN);
  const LaunchArgs scalars = {{"n_tokens", c.n_tokens}, {"n_heads", c.n_heads},
                              {"n_kv_heads", c.n_kv},   {"max_ctx", c.max_ctx},
                              {"kv_len", c.kv_len},     {"pos0", c.pos0()},
                              {"scale", scale},         {"window", c.window}};
  auto with = [&](LaunchArgs a) {
    a.insert(a.end(), scalars.begin(), scalars.end());
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  if (c.kernel == "split") {
    cx["SPLIT"] = c.split;
    Spec split =
        find_kernel("attention_decode_split").make_spec({{"KV", kv}, {"T", DType::f32}}, cx);
    const int64_t rows = c.n_tokens * c.n_heads * ((c.max_ctx + c.split - 1) / c.split);
    HostBuffer po(DType::f32, rows * D), pm(DType::f32, rows * 2);
    for (HostBuffer* b : {&po, &pm})
      for (int64_t i = 0; i < b->size(); ++i) b->set(i, NAN);
    launch(split, with({{"q", q}, {"k", k}, {"v", v}, {"part_o", po}, {"part_ml", pm}}));
    Spec merge = find_kernel("attention_decode_merge")
                     .make_spec({{"T", DType::f32}},
                                {{"HEAD_DIM", D}, {"SPLIT", c.split}, {"SINKS", c.sinks}});
    LaunchArgs ma = {{"part_o", po},           {"part_ml", pm},        {"out", out},
                     {"n_tokens", c.n_tokens}, {"n_heads", c.n_heads}, {"max_ctx", c.max_ctx},
                     {"kv_len", c.kv_len},     {"pos0", c.pos0()},     {"window", c.window}};
    if (c.sinks) ma.emplace_back("sinks", sinks);
    launch(merge, ma);
    return out;
  }
  cx["SINKS"] = c.sinks;
  const std::string name = c.kernel == "prefill" ? "attention_prefill" : "attention_decode";
  Spec s = find_kernel(name).make_spec({{"KV", kv}, {"T", DType::f32}}, cx);
  LaunchArgs a = with({{"q", q}, {"k", k}, {"v", v}, {"out", out}});
  if (c.sinks) a.emplace_back("sinks", sinks);
  launch(s, a);
  return out;
}

void check_case(const Case& c) {
  INFO(c.describe());
  std::mt19937_64 rng(c.seed);
  const int64_t D = c.D(), d = c.head_dim, group = c.n_heads / c.n_kv;
  Cache ca = build_cache(c, rng);
  HostBuffer q = HostBuffer::random(c.act, c.n_tokens * c.n_heads * d, c.seed + 1, -1.5, 1.5);
  HostBuffer sinks = HostBuffer::random(DType::f32, c.n_heads, c.seed + 2, -1, 3);
  const std::vector<float> sk = aura_signs(kAuraSeed, kLayer, AuraKind::k, D),
                           sv = aura_signs(kAuraSeed, kLayer, AuraKind::v, D);
  std::vector<float> fk = aura_forward_matrix(sk), iv = aura_inverse_matrix(sv);

  // q into the rotated space, against the butterfly.
  HostBuffer qr = rotate(q, fk, d, D, DType::f32);
  for (int64_t r = 0; r < c.n_tokens * c.n_heads; ++r) {
    std::vector<float> x(d);
    for (int64_t i = 0; i < d; ++i) x[i] = static_cast<float>(q.get(r * d + i));
    std::vector<float> y = kiln::test::ref_rotate(x, sk, false);
    for (int64_t i = 0; i < D; ++i) REQUIRE(std::abs(qr.get(r * D + i) - y[i]) < 1e-5);
  }

  // Compressed.
  HostBuffer out =
      attend(c, DType::u32, qr, ca.k, ca.v, {{"k_scale", ca.kn}, {"v_scale", ca.vn}}, sinks);
  // The mirror: the decoded rotated rows as an f32 cache, unseen rows NaN.
  const int64_t kb = kv_key_block(TargetDesc{});
  HostBuffer mk(DType::f32, k_cache_elems(c.max_ctx, c.n_kv, D, kb)),
      mv(DType::f32, v_cache_elems(c.max_ctx, c.n_kv, D));
  for (HostBuffer* b : {&mk, &mv})
    for (int64_t i = 0; i < b->size(); ++i) b->set(i, NAN);
  for (int64_t h = 0; h < c.n_kv; ++h)
    for (int64_t n = 0; n < c.kv_len; ++n)
      for (int64_t i = 0; i < D; ++i) {
        mk.set(k_cache_index(n, h, i, c.max_ctx, D, kb), ca.k_rot[h * c.max_ctx + n][i]);
        mv.set(v_cache_index(n, h, i, c.max_ctx, D), ca.v_rot[h * c.max_ctx + n][i]);
      }
  // aura_dequant writes the same mirror (exactly: one product per element).
  HostBuffer dk(DType::f32, mk.size()), dv(DType::f32, mv.size());
  for (HostBuffer* b : {&dk, &dv})
    for (int64_t i = 0; i < b->size(); ++i) b->set(i, NAN);
  Spec dq = find_kernel("aura_dequant")
                .make_spec({{"KV", DType::f32}},
                           {{"HEAD_DIM", D}, {"KBITS", c.kbits}, {"VBITS", c.vbits}});
  launch(dq, {{"k", ca.k},
              {"v", ca.v},
              {"k_scale", ca.kn},
              {"v_scale", ca.vn},
              {"k_out", dk},
              {"v_out", dv},
              {"n_kv_heads", c.n_kv},
              {"max_ctx", c.max_ctx},
              {"kv_len", c.kv_len}});
  for (int64_t i = 0; i < mk.size(); ++i)
    REQUIRE((dk.get(i) == mk.get(i) || (std::isnan(dk.get(i)) && std::isnan(mk.get(i)))));
  for (int64_t i = 0; i < mv.size(); ++i)
    REQUIRE((dv.get(i) == mv.get(i) || (std::isnan(dv.get(i)) && std::isnan(mv.get(i)))));
  HostBuffer mirror = attend(c, DType::f32, qr, dk, dv, {}, sinks);
  for (int64_t i = 0; i < out.size(); ++i)
    REQUIRE(std::abs(out.get(i) - mirror.get(i)) <= 2e-5 + 1e-5 * std::abs(mirror.get(i)));

  // Back to the original space, against the f64 oracle.
  HostBuffer o = rotate(out, iv, D, d, c.act);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t hq = 0; hq < c.n_heads; ++hq) {
      const int64_t h = hq / group, pos = c.pos0() + t;
      const int64_t first = c.window ? std::max<int64_t>(0, pos - c.window + 1) : 0;
      std::vector<double> s;
      double mx = c.sinks ? sinks.get(hq) : -INFINITY;
      for (int64_t n = first; n <= pos; ++n) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i)
          dot += q.get((t * c.n_heads + hq) * d + i) * ca.k_orig[h * c.max_ctx + n][i];
        s.push_back(dot * scale);
        mx = std::max(mx, s.back());
      }
      double total = c.sinks ? std::exp(sinks.get(hq) - mx) : 0;
      for (double& e : s) total += e = std::exp(e - mx);
      for (int64_t i = 0; i < d; ++i) {
        double want = 0;
        for (int64_t n = first; n <= pos; ++n)
          want += s[n - first] / total * ca.v_orig[h * c.max_ctx + n][i];
        const double got = o.get((t * c.n_heads + hq) * d + i);
        const double tol =
            1e-4 + (c.act == DType::f32 ? 0 : std::abs(want) * (c.act == DType::f16 ? 1e-3 : 8e-3));
        INFO("token " << t << " head " << hq << " dim " << i);
        REQUIRE(std::abs(got - want) <= tol);
      }
    }
}

}  // namespace

TEST_CASE("attention over an AURA cache matches the mirror and a float64 oracle",
          "[kernels][aura]") {
  // Every width with two head sizes (each width at every D: test_aura_codes).
  const std::vector<std::tuple<int, int, std::vector<int64_t>>> schemes = {
      {4, 4, {96, 128}}, {8, 4, {64, 128}}, {3, 3, {128, 256}}, {2, 8, {64, 256}}};
  for (const auto& [kb, vb, dims] : schemes)
    for (int64_t d : dims)
      for (const char* kernel : {"decode", "split", "prefill"}) {
        Case c{.kbits = kb, .vbits = vb, .head_dim = d, .kernel = kernel};
        if (c.kernel == "prefill") c.n_tokens = 5;
        check_case(c);
      }
}

TEST_CASE("attention over an AURA cache: windows, sinks, slices and dtypes", "[kernels][aura]") {
  for (bool sinks : {false, true})
    for (int64_t window : {0, 20})
      for (const char* kernel : {"decode", "split", "prefill"}) {
        Case c{.head_dim = 128, .window = window, .sinks = sinks, .kernel = kernel};
        c.n_tokens = c.kernel == "prefill" ? 7 : 1;
        check_case(c);
      }
  // One slice (NB = 1) and many; T a multiple of the slice and not.
  for (int64_t split : {16, 64})
    for (int64_t T : {32, 45})
      check_case(Case{.kv_len = T, .max_ctx = 70, .kernel = "split", .split = split});
  for (DType act : {DType::f16, DType::bf16})
    for (const char* kernel : {"decode", "prefill"}) {
      Case c{.act = act, .kernel = kernel};
      c.n_tokens = c.kernel == "prefill" ? 3 : 1;
      check_case(c);
    }
}
