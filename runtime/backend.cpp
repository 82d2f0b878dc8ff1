#include "runtime/backend.h"

#include <utility>

#include "ir/error.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda_sim/cuda_sim_backend.h"

namespace kiln {

std::vector<std::string> backend_names() { return {"cpu", "cuda", "cuda-sim"}; }

std::unique_ptr<Backend> make_backend(const std::string& name, ThreadPool& pool) {
  if (name == "cpu") return make_cpu_backend(pool);
  if (name == "cuda") return make_cuda_backend();
  if (name == "cuda-sim") return make_cuda_sim_backend();
  std::string known;
  for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown backend '" + name + "' (known: " + known + ")");
}

void check_arg_kinds(const Kernel& k, const std::vector<Arg>& args) {
  const std::string who = "kernel '" + k.name + "'";
  if (args.size() != k.params.size()) {
    std::string names;
    for (const auto& p : k.params) names += (names.empty() ? "" : ", ") + p.name;
    throw Error(who + " takes " + std::to_string(k.params.size()) + " arguments (" + names +
                "), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    bool want_buffer = p.kind == ParamKind::Buffer;
    if (args[i].is_buffer != want_buffer)
      throw Error(who + ": argument " + std::to_string(i) + " ('" + p.name + "') must be a " +
                  (want_buffer ? "buffer" : "scalar"));
    if (want_buffer && args[i].count > 0 && !args[i].data)
      throw Error(who + ": buffer '" + p.name + "' is null");
    if (want_buffer && args[i].count < 0)
      throw Error(who + ": buffer '" + p.name + "' has a negative size");
    if (!want_buffer && args[i].is_float && !is_float(p.dtype))
      throw Error(who + ": scalar '" + p.name + "' is " + std::string(dtype_name(p.dtype)) +
                  " but a float was passed");
  }
}

DeviceBuffer::DeviceBuffer(Backend& b, size_t bytes)
    : backend_(&b), ptr_(bytes ? b.alloc(bytes) : nullptr), bytes_(bytes) {}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) backend_->free(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : backend_(o.backend_),
      ptr_(std::exchange(o.ptr_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) backend_->free(ptr_);
    backend_ = o.backend_;
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

}  // namespace kiln
