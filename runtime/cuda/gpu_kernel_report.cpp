#include "runtime/cuda/gpu_kernel_report.h"

#include <chrono>
#include <exception>

#include "codegen/cuda/cuda_codegen.h"
#include "ir/error.h"
#include "runtime/cuda/cuda_policy.h"
#include "runtime/runtime.h"
#include "targets/cpu/thread_pool.h"

namespace kiln {

double compile_gpu_reports(std::vector<GpuKernelReport>& reports, int sm, unsigned threads) {
  std::vector<std::exception_ptr> failed_at(reports.size());
  const auto t0 = std::chrono::steady_clock::now();
  run_on_threads(
      reports.size(), threads,
      [&](size_t i) {
        GpuKernelReport& r = reports[i];
        try {
          const Kernel k = build_kernel(r.spec);
          CudaSource src = emit_cuda(k, {cuda_program_warps(k), sm});
          r.threads = src.threads;
          r.cuda_bytes = src.code.size();
          r.shared_bytes = src.shared_bytes;
          r.mma = src.uses_mma;
          CudaModule m = compile_cubin(src, sm);
          r.nvrtc_ms = m.compile_ms;
          r.ptxas = run_ptxas(m, sm);
          check_cuda_registers(src, r.ptxas.registers);
        } catch (const Error& e) {
          r.error = e.what();
        }
      },
      failed_at);
  for (const std::exception_ptr& e : failed_at)
    if (e) std::rethrow_exception(e);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kiln
