// Every kernel the cuda policy runs fits a GPU without spilling registers
// to local memory, at sm_80 and sm_90, checked without a GPU: the kernels of
// the plans of two models (a llama with Q4_K_M weights and head size 64, a
// qwen3 with Q8_0 weights and head size 128, a qwen3moe with Q4_K_M experts
// (grouped tile dots) and a llama with F16 weights (f16 tile dots), prompts
// and decode), and the
// attention tile strategies over f16 and q8_0 caches at each head size Kiln
// supports (64, 128, 256; bf16 at 128),
// each rendered to CUDA C as the backend renders it (its warps per block),
// compiled by NVRTC to a cubin and assembled by ptxas. A spill is local
// memory traffic on every use of the spilled registers: a schedule change
// that causes one fails here, naming the kernel and the bytes. Registers
// and shared memory per kernel are printed. Skipped (with a warning) where
// the CUDA toolkit is absent.
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <thread>

#include "kernels/registry.h"
#include "models/llm.h"
#include "runtime/cuda/gpu_kernel_report.h"
#include "runtime/runtime.h"
#include "support/cuda_toolkit.h"
#include "support/tiny_model.h"

using namespace kiln;

namespace {

GpuKernelReport report_of(const Spec& s) {
  GpuKernelReport r;
  r.spec = s;
  return r;
}

// The distinct kernels of a model's plans for prompts of 33 tokens and 7
// (the quantized matmuls' tile dots at 32 and 8 tokens a tile, the prompt
// attention) and for decode (1).
void add_model(std::vector<GpuKernelReport>& rows, std::map<std::string, size_t>& seen,
               const std::string& path) {
  Runtime sim(RuntimeOptions{1, "", false, "cuda-sim"});
  Llm model(path, sim, 64);
  for (int64_t n : {33, 7, 1})
    for (const Spec& s : model.plan_specs(n))
      if (seen.emplace(s.str(), rows.size()).second) rows.push_back(report_of(s));
}

void add_kernel(std::vector<GpuKernelReport>& rows, const std::string& kernel, DType kv,
                int64_t head_dim, std::map<std::string, int64_t> constexprs = {}) {
  constexprs["HEAD_DIM"] = head_dim;
  Spec s = find_kernel(kernel).make_spec({{"KV", kv}}, constexprs);
  s.target = cuda_target_desc();
  rows.push_back(report_of(s));
}

}  // namespace

namespace {

void no_spills(int sm) {
  if (!test::have_cuda_toolkit()) return;
  std::vector<GpuKernelReport> rows;
  std::map<std::string, size_t> seen;
  add_model(rows, seen, test::tiny_model("llama", WeightFormat::q4_k_m));
  add_model(rows, seen, test::tiny_model("qwen3", WeightFormat::q8_0));
  add_model(rows, seen, test::tiny_model("qwen3moe", WeightFormat::q4_k_m));
  add_model(rows, seen, test::tiny_model("llama", WeightFormat::f16));
  for (int64_t d : {64, 128, 256})
    for (DType kv : {DType::f16, DType::bf16, DType::i8}) {
      if (kv == DType::bf16 && d != 128) continue;  // bf16 is f16's code with other converts
      add_kernel(rows, "attention_decode_tiles", kv, d, {{"SPLIT", 256}});
      add_kernel(rows, "attention_prefill_tiles", kv, d, {{"SINKS", 1}, {"PAGE", 32}});
    }
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  {
    std::vector<GpuKernelReport> at = rows;
    compile_gpu_reports(at, sm, threads);
    std::printf("sm_%d: threads regs smem_B spill_B kernel\n", sm);
    for (const GpuKernelReport& r : at) {
      std::printf("sm_%d: %7d %4d %6lld %7lld %s\n", sm, r.threads, r.ptxas.registers,
                  static_cast<long long>(r.shared_bytes), static_cast<long long>(r.spill_bytes()),
                  r.spec.str().c_str());
      INFO("sm_" << sm << " " << r.spec.str() << ": " << r.error << r.ptxas.text);
      CHECK(r.error.empty());
      CHECK(r.spill_bytes() == 0);
      CHECK(r.shared_bytes <= cuda_max_shared_bytes(sm));
    }
  }
}

}  // namespace

// sm_90 in CI; sm_80's register allocation (the same CUDA C) under
// `test_models "[long]"`.
TEST_CASE("the cuda policy's kernels do not spill at sm_90", "[models][cuda][nvrtc]") {
  no_spills(90);
}

TEST_CASE("the cuda policy's kernels do not spill at sm_80", "[models][cuda][nvrtc][.long]") {
  no_spills(80);
}
