#include "runtime/device.h"

#include <algorithm>

#include "ir/error.h"

namespace kiln {

Device::Device(const std::string& backend, int threads)
    : rt_([&] {
        RuntimeOptions o;
        o.threads = threads;
        o.backend = backend;
        return o;
      }()) {}

Spec Device::select(const std::string& kernel, const LaunchArgs& args,
                    const std::map<std::string, DType>& dtypes,
                    const std::map<std::string, int64_t>& constexprs) {
  BoundArgs b = bind_named(rt_.signature(rt_.make_spec(kernel, dtypes, constexprs)), args);
  return rt_.select(kernel, dtypes, b.args, b.sizes, constexprs);
}

void Device::launch(const std::string& kernel, const LaunchArgs& args,
                    const std::map<std::string, DType>& dtypes,
                    const std::map<std::string, int64_t>& constexprs) {
  launch(select(kernel, args, dtypes, constexprs), args);
}

void Device::launch(const Spec& spec, const LaunchArgs& args) {
  BoundArgs b = bind_named(rt_.signature(spec), args);
  Backend& be = rt_.backend();
  if (be.host_visible()) {
    rt_.launch(spec, b.args, b.sizes);
    return;
  }
  // Host arrays travel to device buffers and back (all of them: the kernel
  // may write any).
  std::vector<DeviceBuffer> staged;
  std::vector<void*> host;
  const Kernel& k = rt_.signature(spec);
  for (size_t i : b.host_arrays) {
    size_t bytes = static_cast<size_t>(b.args[i].count * dtype_bytes(k.params[i].dtype));
    staged.emplace_back(be, bytes);
    be.upload(staged.back().data(), b.args[i].data, bytes);
    host.push_back(b.args[i].data);
    b.args[i].data = staged.back().data();
  }
  rt_.launch(spec, b.args, b.sizes);
  be.synchronize();
  for (size_t j = 0; j < staged.size(); ++j)
    be.download(host[j], staged[j].data(), staged[j].bytes());
}

void Device::interpret(const Spec& spec, const LaunchArgs& args) {
  BoundArgs b = bind_named(rt_.signature(spec), args);
  if (b.host_arrays.size() !=
      static_cast<size_t>(
          std::count_if(b.args.begin(), b.args.end(), [](const Arg& a) { return a.is_buffer; })))
    throw Error("kernel '" + spec.kernel + "': the interpreter runs on host arrays only");
  rt_.interpret(spec, b.args, b.sizes);
}

TuneResult Device::tune(const std::string& kernel, const TuneOptions& options) {
  TuneResult r = kiln::tune(rt_, kernel, options);
  if (r.best.status == "ok") rt_.tuning().set(r.key, r.best.constexprs);
  return r;
}

}  // namespace kiln
