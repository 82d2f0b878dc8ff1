#include "runtime/device.h"

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
  return rt_.select(kernel, dtypes, args, constexprs);
}

void Device::launch(const std::string& kernel, const LaunchArgs& args,
                    const std::map<std::string, DType>& dtypes,
                    const std::map<std::string, int64_t>& constexprs) {
  launch(select(kernel, args, dtypes, constexprs), args);
}

void Device::launch(const Spec& spec, const LaunchArgs& args) {
  rt_.launch(spec, args);
  rt_.backend().synchronize();
}

void Device::interpret(const Spec& spec, const LaunchArgs& args) { rt_.interpret(spec, args); }

TuneResult Device::tune(const std::string& kernel, const TuneOptions& options) {
  TuneResult r = kiln::tune(rt_, kernel, options);
  if (r.best.status == "ok") rt_.tuning().set(r.key, r.best.constexprs);
  return r;
}

}  // namespace kiln
