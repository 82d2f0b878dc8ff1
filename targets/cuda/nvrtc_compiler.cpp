#include "targets/cuda/nvrtc_compiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <vector>

#include "ir/error.h"
#include "targets/cuda/host_command.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

// The few NVRTC entry points Kiln uses, declared by their C signatures so
// no toolkit header is needed to build.
using nvrtcProgram = struct _nvrtcProgram*;
struct Nvrtc {
  int (*version)(int*, int*);
  const char* (*error_string)(int);
  int (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                const char* const*);
  int (*compile)(nvrtcProgram, int, const char* const*);
  int (*ptx_size)(nvrtcProgram, size_t*);
  int (*ptx)(nvrtcProgram, char*);
  int (*cubin_size)(nvrtcProgram, size_t*);
  int (*cubin)(nvrtcProgram, char*);
  int (*log_size)(nvrtcProgram, size_t*);
  int (*log)(nvrtcProgram, char*);
  int (*destroy)(nvrtcProgram*);
};

const Nvrtc& nvrtc() {
  static Nvrtc api{};
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string why;
    std::string home = find_cuda_toolkit(&why);
    std::vector<std::string> names;
    if (!home.empty())
      for (const char* n : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"})
        names.push_back(home + "/lib64/" + n);
    names.insert(names.end(), {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"});
    void* h = nullptr;
    for (const std::string& n : names)
      if ((h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) {
      failure = "NVRTC not found (" + (home.empty() ? why : "tried " + home + "/lib64") +
                "); install the CUDA toolkit or set KILN_CUDA_HOME";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p && failure.empty()) failure = std::string("NVRTC lacks ") + name;
      return p;
    };
    api.version = reinterpret_cast<int (*)(int*, int*)>(sym("nvrtcVersion"));
    api.error_string = reinterpret_cast<const char* (*)(int)>(sym("nvrtcGetErrorString"));
    api.create = reinterpret_cast<decltype(api.create)>(sym("nvrtcCreateProgram"));
    api.compile = reinterpret_cast<decltype(api.compile)>(sym("nvrtcCompileProgram"));
    api.ptx_size = reinterpret_cast<decltype(api.ptx_size)>(sym("nvrtcGetPTXSize"));
    api.ptx = reinterpret_cast<decltype(api.ptx)>(sym("nvrtcGetPTX"));
    api.cubin_size = reinterpret_cast<decltype(api.cubin_size)>(sym("nvrtcGetCUBINSize"));
    api.cubin = reinterpret_cast<decltype(api.cubin)>(sym("nvrtcGetCUBIN"));
    api.log_size = reinterpret_cast<decltype(api.log_size)>(sym("nvrtcGetProgramLogSize"));
    api.log = reinterpret_cast<decltype(api.log)>(sym("nvrtcGetProgramLog"));
    api.destroy = reinterpret_cast<decltype(api.destroy)>(sym("nvrtcDestroyProgram"));
  });
  if (!failure.empty()) throw Error(failure);
  return api;
}

void check(int rc, const char* what) {
  if (rc != 0) throw Error(std::string("NVRTC ") + what + " failed: " + nvrtc().error_string(rc));
}

// Where a failed compile's source is kept for the user to read.
std::string keep_source(const CudaSource& src, int sm) {
  fs::path dir = fs::temp_directory_path() / ("kiln-cuda-" + std::to_string(getuid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::path p = dir / (src.entry + "-sm_" + std::to_string(sm) + ".cu");
  std::ofstream(p) << src.code;
  std::ofstream(dir / "kiln_cuda.cuh") << cuda_prelude();
  return p.string();
}

}  // namespace

std::string find_cuda_toolkit(std::string* why) {
  std::vector<std::string> tried;
  for (const char* env : {"KILN_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"}) {
    const char* v = std::getenv(env);
    if (v && *v) tried.push_back(v);
  }
  tried.push_back("/usr/local/cuda");
  for (const std::string& d : tried)
    if (fs::exists(fs::path(d) / "include" / "cuda_fp16.h")) return d;
  if (why) {
    *why = "no CUDA toolkit with include/cuda_fp16.h in";
    for (const std::string& d : tried) *why += " " + d;
  }
  return "";
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtc().version(&major, &minor), "version");
  return std::to_string(major) + "." + std::to_string(minor);
}

namespace {

// compute_<src.sm> gives PTX alone; sm_<gpu_sm> gives PTX and a cubin.
CudaModule compile(const CudaSource& src, int gpu_sm) {
  int sm = gpu_sm ? gpu_sm : src.sm;
  if (sm < src.sm)
    throw Error("CUDA kernel '" + src.entry + "' was generated for sm_" + std::to_string(src.sm) +
                " and cannot be compiled for sm_" + std::to_string(sm));
  const Nvrtc& api = nvrtc();
  std::string home = find_cuda_toolkit();
  auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  std::string prelude(cuda_prelude());
  const char* headers[] = {prelude.c_str()};
  const char* header_names[] = {"kiln_cuda.cuh"};
  check(api.create(&prog, src.code.c_str(), (src.entry + ".cu").c_str(), 1, headers, header_names),
        "create program");
  std::string arch =
      std::string("--gpu-architecture=") + (gpu_sm ? "sm_" : "compute_") + std::to_string(sm);
  std::string inc = "--include-path=" + home + "/include";
  std::vector<const char*> opts = {arch.c_str(), "--std=c++17", "--fmad=false",
                                   "--device-as-default-execution-space"};
  if (!home.empty()) opts.push_back(inc.c_str());
  int rc = api.compile(prog, static_cast<int>(opts.size()), opts.data());
  size_t n = 0;
  api.log_size(prog, &n);
  std::string log(n, '\0');
  if (n) api.log(prog, log.data());
  if (rc != 0) {
    api.destroy(&prog);
    throw Error("NVRTC rejected kernel '" + src.entry + "' for sm_" + std::to_string(sm) +
                " (source written to " + keep_source(src, sm) + "):\n" + log);
  }
  CudaModule m;
  api.ptx_size(prog, &n);
  m.ptx.assign(n, '\0');
  api.ptx(prog, m.ptx.data());
  if (!m.ptx.empty() && m.ptx.back() == '\0') m.ptx.pop_back();
  int cubin_rc = 0;
  if (gpu_sm && (cubin_rc = api.cubin_size(prog, &n)) == 0) {
    m.cubin.assign(n, '\0');
    cubin_rc = api.cubin(prog, m.cubin.data());
  }
  api.destroy(&prog);
  check(cubin_rc, "get cubin");
  m.arch = "sm_" + std::to_string(sm);
  m.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace

CudaModule compile_ptx(const CudaSource& src) { return compile(src, 0); }

CudaModule compile_cubin(const CudaSource& src, int sm) { return compile(src, sm); }

PtxasReport run_ptxas(const CudaModule& m, int sm) {
  std::string why, home = find_cuda_toolkit(&why);
  if (home.empty()) throw Error("ptxas not found: " + why);
  fs::path dir = fs::temp_directory_path() / ("kiln-cuda-" + std::to_string(getuid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  // Unique per call: ptxas may run on several threads of one process.
  static std::atomic<uint64_t> calls{0};
  fs::path ptx =
      dir / ("ptxas-" + std::to_string(getpid()) + "-" + std::to_string(calls++) + ".ptx");
  std::ofstream(ptx) << m.ptx;
  int status = 0;
  std::string out = run_host_command(
      home + "/bin/ptxas -v -arch=sm_" + std::to_string(sm) + " " + ptx.string() + " -o /dev/null",
      &status);
  fs::remove(ptx, ec);
  if (status != 0) throw Error("ptxas rejected the PTX for sm_" + std::to_string(sm) + ":\n" + out);
  PtxasReport r;
  r.text = out;
  std::smatch mm;
  if (std::regex_search(out, mm, std::regex(R"(Used (\d+) registers)")))
    r.registers = std::stoi(mm[1]);
  if (std::regex_search(out, mm, std::regex(R"((\d+) bytes smem)")))
    r.shared_bytes = std::stoll(mm[1]);
  if (std::regex_search(
          out, mm,
          std::regex(
              R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
    r.stack_bytes = std::stoll(mm[1]);
    r.spill_store_bytes = std::stoll(mm[2]);
    r.spill_load_bytes = std::stoll(mm[3]);
  }
  return r;
}

}  // namespace kiln
