#include "targets/cuda/kernel_params.h"

#include <cstring>
#include <string>

#include "ir/error.h"
#include "ir/scalar_eval.h"

namespace kiln {

KernelParams pack_kernel_params(const Kernel& k, const std::vector<Arg>& args,
                                const std::function<uint64_t(size_t)>& address) {
  if (args.size() != k.params.size())
    throw Error("CUDA kernel '" + k.name + "' takes " + std::to_string(k.params.size()) +
                " arguments, got " + std::to_string(args.size()));
  KernelParams p{std::vector<uint64_t>(args.size()), std::vector<void*>(args.size())};
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& param = k.params[i];
    const Arg& a = args[i];
    if (param.kind == ParamKind::Buffer) {
      p.slots[i] = address(i);
    } else if (is_float(param.dtype)) {
      float f = static_cast<float>(a.is_float ? a.f : static_cast<double>(a.i));
      std::memcpy(&p.slots[i], &f, 4);
    } else {
      int64_t v = normalize_int(a.i, param.dtype);
      std::memcpy(&p.slots[i], &v, 8);
    }
    p.ptrs[i] = &p.slots[i];
  }
  return p;
}

}  // namespace kiln
