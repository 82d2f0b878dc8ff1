// `kiln bench`: Google Benchmark runs of the GEMV kernels, each reported in
// GB/s and as a fraction of the bandwidth probe measured in the same run at
// the same thread count (the only honest unit on a shared, noisy machine).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <tuple>

#include "ir/error.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/quant/rows16.h"
#include "runtime/cold_copies.h"
#include "runtime/runtime.h"
#include "tools/attention_workload.h"
#include "tools/bandwidth_probe.h"
#include "tools/cli.h"
#include "tools/device_bench.h"
#include "tools/dot_probe.h"
#include "tools/gemv_workload.h"
#include "tools/int4_workload.h"
#include "tools/qgemv_workload.h"
#include "tools/w8a8_workload.h"

namespace kiln {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

int64_t parse_positive(const std::string& s, const std::string& what) {
  int64_t v = parse_int(s, what);
  if (v <= 0) throw Error(what + " expects a positive integer, got '" + s + "'");
  return v;
}

// "HxKVxD" of --heads: query heads, KV heads, head dimension.
std::tuple<int64_t, int64_t, int64_t> parse_heads(const std::string& hs) {
  auto hd = split(hs, 'x');
  if (hd.size() != 3)
    throw Error("--heads: expected n_heads x n_kv_heads x head_dim, got '" + hs + "'");
  return {parse_positive(hd[0], "--heads"), parse_positive(hd[1], "--heads"),
          parse_positive(hd[2], "--heads")};
}

// The rows --benchmark_filter keeps, so that a filtered run builds only
// their workloads: Google Benchmark filters after registration, and
// building every default row's (random weights, quantised to each format,
// KV caches) takes minutes. It matches the same POSIX extended regex by
// search against the full name ("/real_time" included), a leading '-'
// negating; a filter this cannot compile keeps every row and leaves the
// verdict to Google Benchmark.
class RowFilter {
 public:
  explicit RowFilter(const std::vector<std::string>& gbench_args) {
    std::string spec;
    const std::string flag = "--benchmark_filter=";
    for (const auto& arg : gbench_args)
      if (arg.rfind(flag, 0) == 0) spec = arg.substr(flag.size());
    if (spec.empty() || spec == "all") return;
    if (spec[0] == '-') negate_ = true, spec.erase(0, 1);
    try {
      re_.emplace(spec, std::regex::extended);
    } catch (const std::regex_error&) {
      negate_ = false;
    }
  }
  bool keeps(const std::string& name) const {
    return !re_ || std::regex_search(name + "/real_time", *re_) != negate_;
  }
  // Whether the row of any thread count, named by name(t), is kept.
  template <class Name>
  bool keeps_any(const std::vector<int>& threads, Name&& name) const {
    return std::any_of(threads.begin(), threads.end(), [&](int t) { return keeps(name(t)); });
  }

 private:
  std::optional<std::regex> re_;
  bool negate_ = false;
};

// Runs the benchmark loop and returns its wall time in seconds. One untimed
// run first takes what only the first launch pays (a lazy compile, first
// touches) out of the figure, which a slow row would otherwise report as
// its only iteration.
template <class F>
double timed(benchmark::State& st, F&& body) {
  body();
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "<prefix>/MxK/threads:N", a GEMV's benchmark name.
std::string gemv_name(const std::string& prefix, int64_t m, int64_t k, int threads) {
  return prefix + "/" + std::to_string(m) + "x" + std::to_string(k) +
         "/threads:" + std::to_string(threads);
}

// "<prefix>/MxK/tokens:T/threads:N", a prompt GEMM's benchmark name.
std::string gemm_name(const std::string& prefix, int64_t m, int64_t k, int64_t tokens,
                      int threads) {
  return prefix + "/" + std::to_string(m) + "x" + std::to_string(k) +
         "/tokens:" + std::to_string(tokens) + "/threads:" + std::to_string(threads);
}

// A prompt GEMM's counters: t tokens through an m x k weight in `seconds`
// over the state's iterations, against the compute roofline `peak` (GOP/s,
// 2 per multiply-add whatever the operand type) measured right before.
void gemm_counters(benchmark::State& st, double seconds, int64_t t, int64_t m, int64_t k,
                   double peak) {
  double gflops = 2.0 * t * m * k * st.iterations() / seconds / 1e9;
  st.counters["GFLOP/s"] = gflops;
  st.counters["tokens/s"] = t * st.iterations() / seconds;
  st.counters["peak_GOP/s"] = peak;
  st.counters["frac_of_peak"] = gflops / peak;
}

// A memory-bound row's counters: `bytes` per iteration in `seconds` over the
// state's iterations, against the probe's GB/s `roof` measured right before.
void streaming_counters(benchmark::State& st, double seconds, int64_t bytes, double roof) {
  double gbps = static_cast<double>(bytes) * st.iterations() / seconds / 1e9;
  st.counters["GB/s"] = gbps;
  st.counters["probe_GB/s"] = roof;
  st.counters["frac_of_probe"] = gbps / roof;
}

// One memory-bound kernel, in GB/s of `bytes` and as a fraction of the probe
// re-measured right before it (on a shared machine bandwidth drifts within
// a run). `keep` owns the memory `args` point into; `pick` chooses the spec.
// `cold`: each launch reads its weights from DRAM (ColdCopies).
void register_streaming(const std::string& name, Runtime* rt, const BandwidthProbe& probe,
                        int64_t bytes, LaunchArgs args, std::shared_ptr<const void> keep,
                        std::function<Spec(const LaunchArgs&)> pick, bool cold,
                        int64_t large = kColdBufferBytes) {
  benchmark::RegisterBenchmark(
      name.c_str(),
      [=, &probe](benchmark::State& st) {
        (void)keep;
        Spec spec = pick(args);
        const BoundArgs bound = rt->bind(spec, args);
        ColdCopies copies = cold ? ColdCopies(find_kernel(spec.kernel).build(spec), bound, large)
                                 : ColdCopies(bound);
        double roof = probe.measure_gbps(rt->pool(), 3);
        double s = timed(st, [&] { rt->launch(spec, copies.next()); });
        streaming_counters(st, s, bytes, roof);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

// Split-K decode attention (attention_decode_split, then
// attention_decode_merge, slices of the SPLIT --const gives or the
// kernel's default), in GB/s of cache read as register_streaming's rows.
void register_split_attention(const std::string& name, Runtime* rt, const BandwidthProbe& probe,
                              std::shared_ptr<AttentionWorkload> work,
                              std::map<std::string, int64_t> split_fixed, bool cold) {
  split_fixed["HEAD_DIM"] = work->head_dim();
  for (const auto& [name, v] : work->kv_constexprs()) split_fixed[name] = v;
  if (!split_fixed.count("SPLIT"))
    split_fixed["SPLIT"] =
        find_kernel("attention_decode_split").make_spec({{"KV", work->kv()}}).constexpr_("SPLIT");
  const int64_t keys = split_fixed.at("SPLIT");
  benchmark::RegisterBenchmark(
      name.c_str(),
      [=, &probe](benchmark::State& st) {
        Spec split = rt->select("attention_decode_split", {{"KV", work->kv()}},
                                work->split_args(keys), split_fixed);
        const BoundArgs args = rt->bind(split, work->split_args(keys));
        Spec reduce = rt->select("attention_decode_merge", {}, work->merge_args(keys),
                                 {{"HEAD_DIM", work->head_dim()}, {"SPLIT", keys}});
        const BoundArgs merge = rt->bind(reduce, work->merge_args(keys));
        ColdCopies copies = cold ? ColdCopies(find_kernel(split.kernel).build(split), args,
                                              work->cache_buffer_bytes())
                                 : ColdCopies(args);
        double roof = probe.measure_gbps(rt->pool(), 3);
        double s = timed(st, [&] {
          rt->launch(split, copies.next());
          rt->launch(reduce, merge);
        });
        streaming_counters(st, s, work->cache_bytes(), roof);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

std::string grouped_gemv_name(const std::string& f, int64_t m, int64_t k, int64_t experts, int t) {
  return "qgemv_grouped/" + f + "/" + std::to_string(m) + "x" + std::to_string(k) +
         "/experts:" + std::to_string(experts) + "/threads:" + std::to_string(t);
}

// One decode token through `experts` experts of m x k (every one chosen),
// stacked as a model's expert tensor, in one grouped launch (GROUPED 1,
// tiles of one row): GB/s of the experts' weights against the probe.
void register_grouped_gemv(const std::string& f, int64_t m, int64_t k, TensorType fmt, bool rows16,
                           int64_t experts, Runtime* rt, int t, const BandwidthProbe& probe,
                           const std::string& kernel, std::map<std::string, int64_t> fixed,
                           const std::map<std::string, int64_t>& qfixed, bool cold) {
  auto work = std::make_shared<QgemvWorkload>(m * experts, k, fmt, 1, rows16);
  rt->call("quantize_q8", {}, work->quantize_args(), qfixed);
  LaunchArgs args = work->grouped_args(experts);
  fixed["GROUPED"] = 1;
  fixed["BLOCK_T"] = 1;
  register_streaming(
      grouped_gemv_name(f, m, k, experts, t), rt, probe, work->weight_bytes(), args, work,
      [rt, kernel, fixed](const LaunchArgs& a) { return rt->select(kernel, {}, a, fixed); }, cold);
}

}  // namespace

int cmd_bench(const std::vector<std::string>& argv) {
  std::vector<std::string> ours, gbench = {"kiln-bench"};
  for (const auto& s : argv) (s.rfind("--benchmark_", 0) == 0 ? gbench : ours).push_back(s);
  CliArgs a(ours, {"help", "warm"});
  const RowFilter filter(gbench);
  a.allow_only({"help", "threads", "shapes", "dtypes", "const", "formats", "tokens", "warm",
                "contexts", "heads", "kv", "experts", "kv-page", "device", "repeats", "plugin",
                "shape", "dtype", "scalar"});
  load_plugins(a);
  if (a.positional().size() == 1 && !a.flag("help")) return bench_kernel(a);
  if (!a.positional().empty()) throw Error("kiln bench takes at most one KERNEL");
  if (a.has("device") && !a.flag("help"))
    return run_device_bench(a.get("device"), static_cast<int>(a.get_int("repeats", 3)));
  if (a.flag("help")) {
    std::puts(
        "usage: kiln bench [--threads 1,2] [--shapes 4096x4096,4096x14336] [--dtypes "
        "f32,f16,bf16]\n"
        "                  [--formats q4_K-rows16,int4w-rows16,...] [--tokens 512] [--warm]\n"
        "                  [--experts 8]\n"
        "                  [--contexts 2048] [--heads 32x4x64,32x8x128] [--kv "
        "f16,bf16,f32,q8_0,aura4v4,...]\n"
        "                  [--kv-page N]\n"
        "                  [--const BLOCK_K=128] [--benchmark_* Google Benchmark options]\n"
        "       kiln bench --device cuda|cuda-sim [--repeats 3]\n"
        "       kiln bench KERNEL --shape NAME=N,... [--dtype [ROLE=]DT] [--const NAME=V]\n"
        "                  [--scalar NAME=X] [--threads N] [--warm] [--repeats 15] [--plugin "
        "LIB.so]\n"
        "Benchmarks gemv (y = W x) for each weight dtype or format, shape and thread count,\n"
        "(f8e4m3 with a scale per 128x128 block, as FP8 checkpoints have them),\n"
        "next to a memory-bandwidth probe measured in the same run (frac_of_probe = GB/s /\n"
        "probe GB/s). GEMVs cycle through copies of their weights totalling 256 MiB, so\n"
        "each launch reads them from DRAM as a model forward does; --warm re-reads one copy\n"
        "(a matrix that fits the last-level cache then runs at cache speed).\n"
        "--experts N adds, per format and shape, the grouped GEMV of an MoE decode step\n"
        "(qgemv_grouped: one token through N experts of that shape, one launch), in GB/s of\n"
        "the N experts' weights.\n"
        "Prompt GEMMs (--tokens rows of x; 0 or 1 skips them) report GFLOP/s next to the\n"
        "compute roofline re-measured before each (frac_of_peak): dot_peak/u8 (byte dots)\n"
        "for quantized formats, dot_peak/f32 (f32 FMAs) for gemm over f32/f16/bf16.\n"
        "Decode attention (attention_decode, and the split-K pair attention_decode_split +\n"
        "merge: one token against a KV cache of each --contexts length and --kv dtype; 0\n"
        "skips it) for each --heads n_heads x n_kv_heads x head_dim reports GB/s of cache\n"
        "rows read, cold as the GEMVs, next to the probe; with --kv-page N over a pool of\n"
        "N-key pages, the sequence's in shuffled order. Prefill attention (attention_prefill:\n"
        "a --tokens prompt over its own keys, each --heads and --kv) reports GFLOP/s against\n"
        "dot_peak/f32.\n"
        "--device cuda runs the GPU suite instead: the read_peak (bandwidth) and mma_peak\n"
        "(tile dot) probe kernels, then decode qgemv per format, split-K decode attention and\n"
        "prompt attention as the cuda policy runs them, each as a fraction of its probe\n"
        "measured in the same run (the best of --repeats timings). --device cuda-sim is a\n"
        "dry run of the same launches at small sizes on the CPU simulator.\n"
        "kiln bench KERNEL times any registered kernel (a --plugin's too) at one shape, with\n"
        "the constexprs a launch would select (tuning database, else heuristic; --const over\n"
        "them), after checking its result against the interpreter, in GB/s of its buffers\n"
        "next to the bandwidth probe.");
    return 0;
  }
  const bool cold = !a.flag("warm");
  std::vector<int> threads;
  for (const auto& t : split(a.get("threads", "1,2"), ','))
    threads.push_back(static_cast<int>(parse_positive(t, "--threads")));
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (const auto& s : split(a.get("shapes", "4096x4096,4096x14336"), ',')) {
    auto mk = split(s, 'x');
    if (mk.size() != 2) throw Error("--shapes: expected MxK, got '" + s + "'");
    shapes.emplace_back(parse_positive(mk[0], "--shapes"), parse_positive(mk[1], "--shapes"));
  }
  std::vector<DType> dtypes;
  for (const auto& d : split(a.get("dtypes", "f32,f16,bf16"), ','))
    dtypes.push_back(parse_dtype(d));

  std::map<int, std::unique_ptr<Runtime>> runtimes;
  // Per thread count: the byte-dot roofline (quantized GEMMs) and the f32
  // FMA one (gemm).
  std::map<int, std::unique_ptr<DotProbe>> dot_probes, fma_probes;
  BandwidthProbe probe;
  for (int t : threads) {
    runtimes[t] = std::make_unique<Runtime>(t);
    dot_probes[t] = std::make_unique<DotProbe>(*runtimes[t], DType::u8);
    fma_probes[t] = std::make_unique<DotProbe>(*runtimes[t], DType::f32);
    benchmark::RegisterBenchmark(
        ("bandwidth_probe/threads:" + std::to_string(t)).c_str(),
        [&probe, rt = runtimes[t].get()](benchmark::State& st) {
          double s = timed(st, [&] { benchmark::DoNotOptimize(probe.read_once(rt->pool())); });
          st.counters["GB/s"] = static_cast<double>(probe.bytes()) * st.iterations() / s / 1e9;
        })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    for (auto [name, dot] : {std::pair{"dot_peak/u8", dot_probes[t].get()},
                             std::pair{"dot_peak/f32", fma_probes[t].get()}}) {
      benchmark::RegisterBenchmark((name + std::string("/threads:") + std::to_string(t)).c_str(),
                                   [dot = dot](benchmark::State& st) {
                                     double s = timed(
                                         st, [&] { benchmark::DoNotOptimize(dot->run_once()); });
                                     st.counters["GOP/s"] = dot->ops() * st.iterations() / s / 1e9;
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  // --const values apply to the kernels that declare them.
  auto declared_consts = [&](const std::string& kernel) {
    std::map<std::string, int64_t> out;
    for (const auto& [name, v] : const_args(a))
      for (const auto& [declared, _] : find_kernel(kernel).constexpr_defaults)
        if (name == declared) out[name] = v;
    return out;
  };
  // FP8 weights come with block scales (DeepSeek-V3's and Qwen3's 128).
  auto scale_block = [](DType wt) { return wt == DType::f8e4m3 ? int64_t{128} : int64_t{0}; };
  for (DType wt : dtypes) {
    auto consts = declared_consts("gemv");
    consts.emplace("SCALE_BLOCK", scale_block(wt));
    // Blocks as a forward dispatches them (the tuning database, else the
    // heuristic), unless --const fixes them.
    const std::map<std::string, DType> dts = {{"W", wt}, {"X", DType::f32}};
    for (auto [m, k] : shapes) {
      auto name_of = [&](int t) {
        return gemv_name("gemv/" + std::string(dtype_name(wt)), m, k, t);
      };
      if (!filter.keeps_any(threads, name_of)) continue;
      auto work = std::make_shared<GemvWorkload>(m, k, wt, DType::f32, 1, consts.at("SCALE_BLOCK"));
      for (int t : threads) {
        Runtime* rt = runtimes[t].get();
        const std::string name = name_of(t);
        register_streaming(
            name, rt, probe, work->bytes(), work->args(), work,
            [rt, dts, consts](const LaunchArgs& args) {
              return rt->select("gemv", dts, args, consts);
            },
            cold);
      }
    }
  }
  // Batched GEMM (prompt processing): --tokens rows of x per weight pass,
  // reported as GFLOP/s and weight passes per second.
  int64_t tokens = a.get_int("tokens", 128);
  const int64_t experts = a.get_int("experts", 0);
  if (tokens > 0)
    for (DType wt : dtypes)
      for (auto [m, k] : shapes) {
        const std::string prefix = "gemm/" + std::string(dtype_name(wt));
        if (!filter.keeps_any(threads, [&](int t) { return gemm_name(prefix, m, k, tokens, t); }))
          continue;
        const int64_t sb = scale_block(wt);
        auto w = std::make_shared<GemvWorkload>(m, k, wt, DType::f32, 1, sb);  // weights only
        auto x = std::make_shared<HostMemory>(static_cast<size_t>(tokens * k * 4));
        auto y = std::make_shared<HostMemory>(static_cast<size_t>(tokens * m * 4));
        for (int t : threads) {
          Runtime* rt = runtimes[t].get();
          DotProbe* fma = fma_probes[t].get();
          std::string name = gemm_name(prefix, m, k, tokens, t);
          benchmark::RegisterBenchmark(
              name.c_str(),
              [=](benchmark::State& st) {
                LaunchArgs named = w->weights();
                named.insert(named.end(), {{"x", LaunchArg(x->data(), tokens * k, DType::f32)},
                                           {"y", LaunchArg(y->data(), tokens * m, DType::f32)},
                                           {"t", tokens},
                                           {"n", m},
                                           {"k", k}});
                Spec spec = rt->select("gemm", {{"W", wt}}, named, {{"SCALE_BLOCK", sb}});
                const BoundArgs args = rt->bind(spec, named);
                double peak = fma->measure_gops();
                double s = timed(st, [&] { rt->launch(spec, args); });
                gemm_counters(st, s, tokens, m, k, peak);
              })
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }

  // Quantized prompt GEMM: the activations' quantisation (qa) plus the
  // product (args), as a forward pays them, against the byte-dot roofline.
  // `keep` owns the buffers both argument lists point into.
  auto register_qgemm = [&](const std::string& f, int64_t m, int64_t k, LaunchArgs qa,
                            LaunchArgs args, std::shared_ptr<const void> keep,
                            const std::string& kernel, std::map<std::string, int64_t> fixed,
                            std::map<std::string, int64_t> qfixed) {
    for (int t : threads) {
      Runtime* rt = runtimes[t].get();
      DotProbe* dot = dot_probes[t].get();
      std::string name = gemm_name("qgemm/" + f, m, k, tokens, t);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [=](benchmark::State& st) {
                                     (void)keep;
                                     Spec qspec = rt->select("quantize_q8", {}, qa, qfixed);
                                     Spec spec = rt->select(kernel, {}, args, fixed);
                                     const BoundArgs q_bound = rt->bind(qspec, qa);
                                     const BoundArgs bound = rt->bind(spec, args);
                                     double peak = dot->measure_gops();
                                     double s = timed(st, [&] {
                                       rt->launch(qspec, q_bound);
                                       rt->launch(spec, bound);
                                     });
                                     gemm_counters(st, s, tokens, m, k, peak);
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  };

  // Quantized GEMV: GB/s of weight bytes (the traffic that decides decode speed).
  for (const auto& f : split(a.get("formats",
                                   "q8_0,q8_0-rows16,q4_0,q4_0-rows16,q4_K,q4_K-rows16,q6_K,q6_K-"
                                   "rows16,int4w,int4w-rows16,awq,awq-int4w,awq-rows16"),
                             ',')) {
    const auto& int4 = int4_formats();
    // INT8 checkpoints' GEMV (one token) and the int4 weight-only formats.
    const bool w8a8 = f == "w8a8";
    if (w8a8 || std::find(int4.begin(), int4.end(), f) != int4.end()) {
      for (auto [m, k] : shapes) {
        auto name_of = [&](int t) { return gemv_name(f, m, k, t); };
        if (filter.keeps_any(threads, name_of)) {
          auto work =
              std::make_shared<Int4Workload>(w8a8 ? w8a8_workload(m, k) : int4_workload(f, m, k));
          for (int t : threads) {
            Runtime* rt = runtimes[t].get();
            register_streaming(
                name_of(t), rt, probe, work->weight_bytes, work->args, work,
                [rt, work](const LaunchArgs& args) {
                  return rt->select(work->kernel, {}, args, work->fixed);
                },
                cold);
          }
        }
        if (tokens > 1 && !w8a8 && f != "awq" &&  // w8a8 and gemv_awq: GEMVs only
            filter.keeps_any(threads,
                             [&](int t) { return gemm_name("qgemm/" + f, m, k, tokens, t); })) {
          auto batch = std::make_shared<Int4Workload>(int4_workload(f, m, k, tokens));
          register_qgemm(f, m, k, batch->quantize_args, batch->args, batch, batch->kernel,
                         batch->fixed, {{"QBLOCK", 32}});
        }
      }
      continue;
    }
    // "<format>-rows16": interleaved across 16 rows (qgemv_rows16), the
    // layout forwards load these weights into.
    const std::string suffix = "-rows16";
    const bool rows16 =
        f.size() > suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0;
    const std::string base = rows16 ? f.substr(0, f.size() - suffix.size()) : f;
    const TensorTypeInfo* named = find_tensor_type_named(base);
    const bool known = named && named->kind == TensorKind::blocks;
    const TensorType fmt = known ? named->type : TensorType::f32;
    std::string names;
    for (const TensorTypeInfo& b : block_types())
      names += std::string(b.name) + (ggml::has_rows16(b.type) ? " (also -rows16), " : ", ");
    if (!known || (rows16 && !ggml::has_rows16(fmt)))
      throw Error("--formats: unknown format '" + f + "' (" + names +
                  "int4w, int4w-rows16, awq, awq-int4w, awq-rows16, w8a8)");
    // --const values the kernel declares (e.g. BLOCK_M) override the
    // dispatch. K-quants take Q8_K-style activations (one scale per 256), as
    // forwards quantise them (ops::linear).
    bool kquant = tensor_type_info(fmt).block_elems == 256;
    const std::string kernel = rows16 ? "qgemv_rows16" : "qgemv";
    std::map<std::string, int64_t> fixed = declared_consts(kernel);
    fixed["FMT"] = type_id(fmt);
    const std::map<std::string, int64_t> qfixed = {{"QBLOCK", kquant ? 256 : 32}};
    for (auto [m, k] : shapes) {
      auto name_of = [&](int t) { return gemv_name("qgemv/" + f, m, k, t); };
      if (filter.keeps_any(threads, name_of)) {
        auto work = std::make_shared<QgemvWorkload>(m, k, fmt, 1, rows16);
        runtimes.begin()->second->call("quantize_q8", {}, work->quantize_args(), qfixed);
        for (int t : threads) {
          Runtime* rt = runtimes[t].get();
          register_streaming(
              name_of(t), rt, probe, work->weight_bytes(), work->args(), work,
              [rt, kernel, fixed](const LaunchArgs& args) {
                return rt->select(kernel, {}, args, fixed);
              },
              cold);
        }
      }
      if (experts > 0)
        for (int t : threads)
          if (filter.keeps(grouped_gemv_name(f, m, k, experts, t)))
            register_grouped_gemv(f, m, k, fmt, rows16, experts, runtimes[t].get(), t, probe,
                                  kernel, fixed, qfixed, cold);
      if (tokens > 1 && filter.keeps_any(threads, [&](int t) {
            return gemm_name("qgemm/" + f, m, k, tokens, t);
          })) {
        auto batch = std::make_shared<QgemvWorkload>(m, k, fmt, tokens, rows16);
        register_qgemm(f, m, k, batch->quantize_args(), batch->args(), batch, kernel, fixed,
                       qfixed);
      }
    }
  }
  // Decode attention: the KV cache rows a token reads, against the probe.
  std::vector<KvCacheType> kv_dtypes;
  for (const auto& name : split(a.get("kv", "f16"), ',')) kv_dtypes.push_back(parse_kv_type(name));
  const int64_t kv_page = a.get_int("kv-page", 0);
  for (const auto& c : split(a.get("contexts", "2048"), ','))
    for (const KvCacheType& kv : kv_dtypes) {
      if (c == "0") continue;
      int64_t ctx = parse_positive(c, "--contexts");
      const std::string kv_name = kv_cache_type_name(kv);
      for (const auto& hs : split(a.get("heads", "32x4x64,32x8x128"), ',')) {
        auto [nh, nkv, hdim] = parse_heads(hs);
        auto tail = [&](int t) {
          return "/" + kv_name + "/" + hs + "/ctx:" + std::to_string(ctx) +
                 (kv_page ? "/page:" + std::to_string(kv_page) : "") +
                 "/threads:" + std::to_string(t);
        };
        auto one_pass = [&](int t) { return "attention_decode" + tail(t); };
        auto split_k = [&](int t) { return "attention_decode_split" + tail(t); };
        if (!filter.keeps_any(threads, one_pass) && !filter.keeps_any(threads, split_k)) continue;
        auto work = std::make_shared<AttentionWorkload>(
            nh, nkv, hdim, ctx, kv_key_block(runtimes.begin()->second->backend().target_desc()), kv,
            1, kv_page);
        std::map<std::string, int64_t> fixed = declared_consts("attention_decode");
        fixed["HEAD_DIM"] = work->head_dim();
        for (const auto& [name, v] : work->kv_constexprs()) fixed[name] = v;
        for (int t : threads) {
          Runtime* rt = runtimes[t].get();
          register_streaming(
              one_pass(t), rt, probe, work->cache_bytes(), work->args(), work,
              [rt, fixed, kv](const LaunchArgs& args) {
                return rt->select("attention_decode", {{"KV", kv.dtype}}, args, fixed);
              },
              // Copy the cache's buffers, not q and out.
              cold, work->cache_buffer_bytes());
          register_split_attention(split_k(t), rt, probe, work,
                                   declared_consts("attention_decode_split"), cold);
        }
      }
    }
  // Prefill attention: a --tokens prompt's causal attention over its own
  // keys, bound by arithmetic: GFLOP/s (2 per multiply-add of the visible
  // scores and P V) against the f32 FMA roofline.
  if (tokens > 1)
    for (const KvCacheType& kv : kv_dtypes)
      for (const auto& hs : split(a.get("heads", "32x4x64,32x8x128"), ',')) {
        auto [nh, nkv, hdim] = parse_heads(hs);
        auto name_of = [&](int t) {
          return "attention_prefill/" + kv_cache_type_name(kv) + "/" + hs +
                 "/tokens:" + std::to_string(tokens) + "/threads:" + std::to_string(t);
        };
        if (!filter.keeps_any(threads, name_of)) continue;
        auto work = std::make_shared<AttentionWorkload>(
            nh, nkv, hdim, tokens, kv_key_block(runtimes.begin()->second->backend().target_desc()),
            kv, tokens);
        std::map<std::string, int64_t> fixed = declared_consts("attention_prefill");
        fixed["HEAD_DIM"] = work->head_dim();
        for (const auto& [name, v] : work->kv_constexprs()) fixed[name] = v;
        for (int t : threads) {
          Runtime* rt = runtimes[t].get();
          DotProbe* fma = fma_probes[t].get();
          const std::string name = name_of(t);
          benchmark::RegisterBenchmark(
              name.c_str(),
              [=](benchmark::State& st) {
                Spec spec =
                    rt->select("attention_prefill", {{"KV", kv.dtype}}, work->args(), fixed);
                const BoundArgs args = rt->bind(spec, work->args());
                double peak = fma->measure_gops();
                double s = timed(st, [&] { rt->launch(spec, args); });
                double gflops = 2 * work->causal_macs() * st.iterations() / s / 1e9;
                st.counters["GFLOP/s"] = gflops;
                st.counters["peak_GOP/s"] = peak;
                st.counters["frac_of_peak"] = gflops / peak;
              })
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
  int gargc = static_cast<int>(gbench.size());
  std::vector<char*> gargv;
  for (auto& s : gbench) gargv.push_back(s.data());
  benchmark::Initialize(&gargc, gargv.data());
  if (benchmark::ReportUnrecognizedArguments(gargc, gargv.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace kiln
