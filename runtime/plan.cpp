#include "runtime/plan.h"

#include "ir/error.h"
#include "runtime/cpu_launch.h"

namespace kiln {

void Plan::launch(const std::string& label, const std::string& kernel,
                  const std::map<std::string, DType>& dtypes, const std::vector<PlanArg>& args,
                  const Sizes& sizes, const std::map<std::string, int64_t>& fixed,
                  const std::map<std::string, int64_t>& probe) {
  Step st;
  st.label = label;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Arg* a = std::get_if<Arg>(&args[i])) {
      st.args.push_back(*a);
      continue;
    }
    const std::string& slot = std::get<Dynamic>(args[i]).slot;
    auto p = probe.find(slot);
    if (p == probe.end())
      throw Error("plan step '" + label + "': dynamic scalar '" + slot + "' has no probe value");
    st.args.push_back(Arg::scalar_int(p->second));
    st.dynamic.emplace_back(i, slot);
  }
  Spec spec = rt_.select(kernel, dtypes, st.args, sizes, fixed);
  st.kernel = &rt_.compile(spec);
  Runtime::CheckedLaunch checked = rt_.check_launch(spec, st.kernel->kernel, st.args, sizes);
  st.grid = checked.grid;
  st.bytes = checked.bytes;
  steps_.push_back(std::move(st));
}

void Plan::host(const std::string& label, std::function<void()> fn) {
  Step st;
  st.label = label;
  st.host = std::move(fn);
  steps_.push_back(std::move(st));
}

int64_t Plan::kernel_launches() const {
  int64_t n = 0;
  for (const Step& s : steps_) n += s.kernel != nullptr;
  return n;
}

void Plan::run(bool interpret) {
  using clock = std::chrono::steady_clock;
  for (Step& st : steps_) {
    auto t0 = profiling_ ? clock::now() : clock::time_point{};
    if (st.host) {
      st.host();
    } else {
      for (const auto& [index, slot] : st.dynamic) {
        auto v = slots_.find(slot);
        if (v == slots_.end())
          throw Error("plan step '" + st.label + "': dynamic scalar '" + slot + "' was not set");
        st.args[index] = Arg::scalar_int(v->second);
      }
      if (interpret)
        kiln::interpret(st.kernel->kernel, st.args, st.grid);
      else
        launch_cpu(st.kernel->kernel, st.kernel->cpu.fn, st.args, st.grid, rt_.pool(), st.bytes);
    }
    if (profiling_) {
      auto& p = prof_[st.label];
      p.first += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      p.second += 1;
    }
  }
}

}  // namespace kiln
