#include "targets/cuda/cuda_device.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <type_traits>

#include "ir/error.h"
#include "targets/cuda/kernel_params.h"

namespace kiln {

// The driver entry points Kiln uses, by their C signatures (CUresult is an
// int, handles are pointers, device pointers are 64-bit integers).
struct CudaDevice::Api {
  int (*init)(unsigned);
  int (*device_get_count)(int*);
  int (*device_get)(int*, int);
  int (*device_get_name)(char*, int, int);
  int (*device_get_attribute)(int*, int, int);
  int (*ctx_create)(void**, unsigned, int);
  int (*mem_alloc)(uint64_t*, size_t);
  int (*mem_free)(uint64_t);
  int (*memcpy_htod)(uint64_t, const void*, size_t);
  int (*memcpy_dtoh)(void*, uint64_t, size_t);
  int (*module_load_data)(void**, const void*);
  int (*module_get_function)(void**, void*, const char*);
  int (*func_set_attribute)(void*, int, int);
  int (*func_get_attribute)(int*, int, void*);
  int (*launch_kernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       void*, void**, void**);
  int (*ctx_synchronize)();
  int (*get_error_string)(int, const char**);
};

namespace {

constexpr int kAttrComputeMajor = 75, kAttrComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_*
constexpr int kFuncAttrMaxDynamicShared = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kFuncAttrMaxThreads = 0;        // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
constexpr int kFuncAttrNumRegs = 4;           // CU_FUNC_ATTRIBUTE_NUM_REGS

}  // namespace

static void check(const CudaDevice::Api& api, int rc, const char* what) {
  if (rc == 0) return;
  const char* msg = nullptr;
  if (api.get_error_string) api.get_error_string(rc, &msg);
  throw Error(std::string("CUDA driver: ") + what + " failed: " + (msg ? msg : "error ") +
              (msg ? "" : std::to_string(rc)));
}

CudaDevice& CudaDevice::get() {
  static CudaDevice* device = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      failure = "no CUDA device: the NVIDIA driver (libcuda.so.1) is not installed on this machine";
      return;
    }
    auto api = std::make_unique<Api>();
    bool missing = false;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      missing |= fn == nullptr;
    };
    sym(api->init, "cuInit");
    sym(api->device_get_count, "cuDeviceGetCount");
    sym(api->device_get, "cuDeviceGet");
    sym(api->device_get_name, "cuDeviceGetName");
    sym(api->device_get_attribute, "cuDeviceGetAttribute");
    sym(api->ctx_create, "cuCtxCreate_v2");
    sym(api->mem_alloc, "cuMemAlloc_v2");
    sym(api->mem_free, "cuMemFree_v2");
    sym(api->memcpy_htod, "cuMemcpyHtoD_v2");
    sym(api->memcpy_dtoh, "cuMemcpyDtoH_v2");
    sym(api->module_load_data, "cuModuleLoadData");
    sym(api->module_get_function, "cuModuleGetFunction");
    sym(api->func_set_attribute, "cuFuncSetAttribute");
    sym(api->func_get_attribute, "cuFuncGetAttribute");
    sym(api->launch_kernel, "cuLaunchKernel");
    sym(api->ctx_synchronize, "cuCtxSynchronize");
    sym(api->get_error_string, "cuGetErrorString");
    if (missing) {
      failure = "no CUDA device: libcuda.so.1 lacks driver API entry points Kiln needs";
      return;
    }
    int count = 0;
    if (api->init(0) != 0 || api->device_get_count(&count) != 0 || count == 0) {
      failure = "no CUDA device: the NVIDIA driver is installed but finds no GPU";
      return;
    }
    auto* d = new CudaDevice();
    int dev = 0, major = 0, minor = 0;
    char name[256] = {};
    check(*api, api->device_get(&dev, 0), "cuDeviceGet");
    check(*api, api->device_get_name(name, sizeof name, dev), "cuDeviceGetName");
    check(*api, api->device_get_attribute(&major, kAttrComputeMajor, dev), "cuDeviceGetAttribute");
    check(*api, api->device_get_attribute(&minor, kAttrComputeMinor, dev), "cuDeviceGetAttribute");
    check(*api, api->ctx_create(&d->ctx_, 0, dev), "cuCtxCreate");
    d->name_ = name;
    d->sm_ = major * 10 + minor;
    d->api_ = std::move(api);
    device = d;
  });
  if (!device) throw Error(failure);
  return *device;
}

uint64_t CudaDevice::alloc(size_t bytes) {
  uint64_t p = 0;
  check(*api_, api_->mem_alloc(&p, bytes ? bytes : 1), "cuMemAlloc");
  return p;
}
void CudaDevice::free(uint64_t p) { check(*api_, api_->mem_free(p), "cuMemFree"); }
void CudaDevice::upload(uint64_t dst, const void* src, size_t bytes) {
  if (bytes) check(*api_, api_->memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
}
void CudaDevice::download(void* dst, uint64_t src, size_t bytes) {
  if (bytes) check(*api_, api_->memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
}
void CudaDevice::synchronize() { check(*api_, api_->ctx_synchronize(), "cuCtxSynchronize"); }

CudaDevice::Function CudaDevice::load(const CudaSource& src, const CudaModule& m) {
  if (src.sm > sm_)
    throw Error("CUDA kernel '" + src.entry + "' was generated for sm_" + std::to_string(src.sm) +
                " but " + name_ + " is sm_" + std::to_string(sm_));
  const std::string& image = m.cubin.empty() ? m.ptx : m.cubin;
  void* module = nullptr;
  for (auto& [loaded, mod] : modules_)
    if (loaded == image) module = mod;
  if (!module) {
    check(*api_, api_->module_load_data(&module, image.c_str()),
          m.cubin.empty() ? "cuModuleLoadData(PTX)" : "cuModuleLoadData(cubin)");
    modules_.emplace_back(image, module);
  }
  void* fn = nullptr;
  check(*api_, api_->module_get_function(&fn, module, src.entry.c_str()), "cuModuleGetFunction");
  // Refused here, before any launch, with the kernel and the numbers; the
  // driver's own limit (which also knows the GPU) backs the arithmetic.
  int regs = 0, max_threads = 0;
  check(*api_, api_->func_get_attribute(&regs, kFuncAttrNumRegs, fn), "cuFuncGetAttribute");
  check(*api_, api_->func_get_attribute(&max_threads, kFuncAttrMaxThreads, fn),
        "cuFuncGetAttribute");
  check_cuda_registers(src, regs);
  if (src.threads > max_threads)
    throw Error("CUDA kernel '" + src.entry + "' on " + name_ + ": " + std::to_string(src.threads) +
                " threads per block of " + std::to_string(regs) +
                " registers each; the driver allows " + std::to_string(max_threads));
  if (src.shared_bytes > 48 * 1024)
    check(
        *api_,
        api_->func_set_attribute(fn, kFuncAttrMaxDynamicShared, static_cast<int>(src.shared_bytes)),
        "cuFuncSetAttribute(max dynamic shared memory)");
  return fn;
}

void CudaDevice::launch(const CudaSource& src, Function fn, const Grid& grid, void** params) {
  check_cuda_launch(src, grid);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;
  check(*api_,
        api_->launch_kernel(fn, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                            static_cast<unsigned>(grid[2]), static_cast<unsigned>(src.threads), 1,
                            1, static_cast<unsigned>(src.shared_bytes), nullptr, params, nullptr),
        "cuLaunchKernel");
}

void CudaDevice::run(const Kernel& k, const CudaSource& src, const CudaModule& m,
                     const std::vector<Arg>& args, const Grid& grid) {
  Function fn = load(src, m);
  std::vector<uint64_t> buffers(args.size(), 0);
  KernelParams params = pack_kernel_params(k, args, [&](size_t i) {
    size_t bytes = static_cast<size_t>(args[i].count * dtype_bytes(k.params[i].dtype));
    buffers[i] = alloc(bytes);
    upload(buffers[i], args[i].data, bytes);
    return buffers[i];
  });
  launch(src, fn, grid, params.ptrs.data());
  synchronize();
  for (size_t i = 0; i < args.size(); ++i) {
    if (k.params[i].kind != ParamKind::Buffer) continue;
    download(args[i].data, buffers[i],
             static_cast<size_t>(args[i].count * dtype_bytes(k.params[i].dtype)));
    free(buffers[i]);
  }
}

}  // namespace kiln
