#include "tools/device_bench.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>

#include "ir/error.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/probe/mma_peak.h"
#include "runtime/cold_copies.h"
#include "runtime/runtime.h"
#include "tools/attention_workload.h"
#include "tools/qgemv_workload.h"

namespace kiln {
namespace {

// Sizes of the suite: a GPU's, or a dry run's in the simulator.
struct SuiteSizes {
  int64_t probe_bytes, mma_programs, mma_steps, gemv_m, gemv_k;
  int64_t heads, kv_heads, head_dim, decode_keys, prompt_tokens;
  bool cold;  // weights and caches through ColdCopies
};
constexpr SuiteSizes kGpu{int64_t{1} << 30, 4096, 256, 4096, 14336, 32, 8, 128, 8192, 512, true};
constexpr SuiteSizes kDryRun{int64_t{4} << 20, 2, 2, 64, 512, 4, 2, 64, 48, 16, false};

// Host buffers mirrored in buffers of the runtime's backend, each host
// buffer uploaded once, so that launches sharing a buffer (split-K's
// partials, written by one pass and read by the merge) share it on the
// device too, and ColdCopies' copies of a launch's large buffers become
// as many device buffers (each launch then reads DRAM, not the L2 cache).
class DeviceMirror {
 public:
  explicit DeviceMirror(Runtime& rt) : rt_(rt) {}

  // The argument sets of `host` (one set when warm) over device buffers.
  std::vector<BoundArgs> sets(const Spec& spec, ColdCopies host) {
    const Kernel& k = rt_.signature(spec);
    std::vector<BoundArgs> out;
    for (size_t c = 0; c < host.count(); ++c) {
      BoundArgs args = host.next();
      for (size_t i = 0; i < args.args().size(); ++i) {
        const Arg a = args.args()[i];
        if (a.is_buffer)
          args = args.with_buffer(
              i, on_device(a.data, static_cast<size_t>(a.count * dtype_bytes(k.params[i].dtype))),
              true);
      }
      out.push_back(std::move(args));
    }
    return out;
  }
  BoundArgs args(const Spec& spec, const LaunchArgs& host) {
    return sets(spec, ColdCopies(rt_.bind(spec, host))).front();
  }

 private:
  void* on_device(void* host, size_t bytes) {
    auto [it, fresh] = device_.emplace(host, nullptr);
    if (fresh) {
      buffers_.emplace_back(rt_.backend(), bytes);
      rt_.backend().upload(buffers_.back().data(), host, bytes);
      it->second = buffers_.back().data();
    }
    return it->second;
  }
  Runtime& rt_;
  std::map<void*, void*> device_;
  std::vector<DeviceBuffer> buffers_;
};

// Seconds per call of run(i), the best of `repeats` timings of `n` calls
// after one untimed call (compiles, loads, first touches).
double seconds_per_call(Runtime& rt, int repeats, int64_t n,
                        const std::function<void(int64_t)>& run) {
  run(0);
  rt.backend().synchronize();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) run(i);
    rt.backend().synchronize();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                        static_cast<double>(n));
  }
  return best;
}

// One kernel's rate and its fraction of the roofline measured in this run.
void row(const char* family, const std::string& what, double rate, const char* unit, double roof,
         const char* roof_name) {
  std::printf("%-10s %-46s %10.1f %-8s %5.2f of %s\n", family, what.c_str(), rate, unit,
              rate / roof, roof_name);
  std::fflush(stdout);
}

}  // namespace

int run_device_bench(const std::string& device, int repeats) {
  if (device != "cuda" && device != "cuda-sim")
    throw Error("--device: the device suite runs on cuda (or cuda-sim, a dry run), got '" + device +
                "'");
  const SuiteSizes z = device == "cuda" ? kGpu : kDryRun;
  const int64_t calls = device == "cuda" ? 20 : 1;
  Runtime rt(RuntimeOptions{0, CompileCache::default_dir(), true, device});
  std::printf("device: %s (%s)%s\n", rt.backend().target().c_str(), device.c_str(),
              device == "cuda" ? "" : "; a dry run at small sizes: the rates mean nothing");

  // The bandwidth probe, 256 KiB per program.
  const int64_t words = std::min<int64_t>(64 * 1024, z.probe_bytes / 4);
  const int64_t programs = z.probe_bytes / 4 / words;
  std::vector<uint32_t> px(static_cast<size_t>(programs * words), 1),
      py(static_cast<size_t>(programs));
  const LaunchArgs read_host = {{"x", px}, {"y", py}, {"words", words}, {"programs", programs}};
  const Spec read = rt.select("read_peak", {}, read_host);
  DeviceMirror mirror(rt);
  const BoundArgs read_args = mirror.args(read, read_host);
  const double gbps =
      static_cast<double>(programs * words * 4) / 1e9 /
      seconds_per_call(rt, repeats, calls, [&](int64_t) { rt.launch(read, read_args); });
  std::printf("%-10s %-46s %10.1f %-8s\n", "probe",
              ("read_peak, " + std::to_string(z.probe_bytes >> 20) + " MiB").c_str(), gbps, "GB/s");

  // The tile-dot probe: f16 ones (0x3c00), whose sums stay exact.
  const int64_t tile = 64;
  std::vector<uint16_t> ma(static_cast<size_t>(tile * tile), 0x3c00),
      mb(static_cast<size_t>(8 * tile * tile), 0x3c00);
  std::vector<float> my(static_cast<size_t>(z.mma_programs * tile * tile));
  const LaunchArgs mma_host = {
      {"a", ma}, {"b", mb}, {"y", my}, {"steps", z.mma_steps}, {"programs", z.mma_programs}};
  const Spec mma = rt.select("mma_peak", {{"T", DType::f16}}, mma_host, {{"TILE", tile}});
  const BoundArgs mma_args = mirror.args(mma, mma_host);
  const double peak =
      2.0 * static_cast<double>(mma_peak_macs(tile, z.mma_steps) * z.mma_programs) / 1e9 /
      seconds_per_call(rt, repeats, calls, [&](int64_t) { rt.launch(mma, mma_args); });
  std::printf("%-10s %-46s %10.1f %-8s\n", "probe", "mma_peak, f16 64x64 tile dots", peak,
              "GFLOP/s");

  // Decode GEMVs: one token through an m x k matrix streamed from DRAM.
  for (TensorType fmt : {TensorType::q4_K, TensorType::q6_K, TensorType::q8_0, TensorType::q4_0,
                         TensorType::iq4_xs, TensorType::mxfp4}) {
    QgemvWorkload w(z.gemv_m, z.gemv_k, fmt);
    const LaunchArgs qh = w.quantize_args();
    // x quantised as forwards pair it with the format (ops::linear).
    const int64_t qblock = tensor_type_info(fmt).block_elems == 256 ? 256 : 32;
    const Spec quantize = rt.select("quantize_q8", {}, qh, {{"QBLOCK", qblock}});
    const Spec gemv = rt.select("qgemv", {}, w.args(), {{"FMT", static_cast<int64_t>(fmt)}});
    const BoundArgs gh = rt.bind(gemv, w.args());
    rt.launch(quantize, mirror.args(quantize, qh));
    const auto g_sets =
        mirror.sets(gemv, z.cold ? ColdCopies(build_kernel(gemv), gh) : ColdCopies(gh));
    const double s = seconds_per_call(rt, repeats, calls, [&](int64_t i) {
      rt.launch(gemv, g_sets[static_cast<size_t>(i) % g_sets.size()]);
    });
    row("qgemv",
        std::string(tensor_type_info(fmt).name) + " " + std::to_string(z.gemv_m) + "x" +
            std::to_string(z.gemv_k) + ", 1 token",
        static_cast<double>(w.weight_bytes()) / s / 1e9, "GB/s", gbps, "read_peak");
  }

  // Attention over an f16 cache as the cuda policy runs it: split-K decode
  // as tile dots (slices of 256 keys) and prompt tile dots.
  const int64_t kb = kv_key_block(rt.backend().target_desc());
  const std::string heads =
      std::to_string(z.heads) + "x" + std::to_string(z.kv_heads) + "x" + std::to_string(z.head_dim);
  {
    const int64_t split = 256;
    AttentionWorkload w(z.heads, z.kv_heads, z.head_dim, z.decode_keys, kb);
    const Spec tiles = rt.select("attention_decode_tiles", {{"KV", DType::f16}},
                                 w.split_args(split), {{"HEAD_DIM", z.head_dim}, {"SPLIT", split}});
    const BoundArgs sh = rt.bind(tiles, w.split_args(split));
    const LaunchArgs mh = w.merge_args(split);
    const Spec merge =
        rt.select("attention_decode_merge", {}, mh, {{"HEAD_DIM", z.head_dim}, {"SPLIT", split}});
    const auto s_sets =
        mirror.sets(tiles, z.cold ? ColdCopies(build_kernel(tiles), sh, w.cache_buffer_bytes())
                                  : ColdCopies(sh));
    const BoundArgs m_args = mirror.args(merge, mh);
    const double s = seconds_per_call(rt, repeats, calls, [&](int64_t i) {
      rt.launch(tiles, s_sets[static_cast<size_t>(i) % s_sets.size()]);
      rt.launch(merge, m_args);
    });
    row("attention",
        "decode_tiles+merge f16 " + heads + ", " + std::to_string(z.decode_keys) + " keys",
        static_cast<double>(w.cache_bytes()) / s / 1e9, "GB/s", gbps, "read_peak");
  }
  {
    AttentionWorkload w(z.heads, z.kv_heads, z.head_dim, z.prompt_tokens, kb, DType::f16,
                        z.prompt_tokens);
    const LaunchArgs ph = w.args();
    const Spec prefill =
        rt.select("attention_prefill_tiles", {{"KV", DType::f16}}, ph, {{"HEAD_DIM", z.head_dim}});
    const BoundArgs p_args = mirror.args(prefill, ph);
    const double s =
        seconds_per_call(rt, repeats, calls, [&](int64_t) { rt.launch(prefill, p_args); });
    row("attention",
        "prefill_tiles f16 " + heads + ", " + std::to_string(z.prompt_tokens) + " tokens",
        2.0 * w.causal_macs() / s / 1e9, "GFLOP/s", peak, "mma_peak");
  }
  return 0;
}

}  // namespace kiln
