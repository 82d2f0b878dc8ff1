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
    st.dynamic.push_back({i, &slots_[slot], slot});
  }
  Spec spec = rt_.select(kernel, dtypes, st.args, sizes, fixed);
  st.kernel = &rt_.compile(spec);
  Runtime::CheckedLaunch checked = rt_.check_launch(spec, st.kernel->kernel, st.args, sizes);
  st.grid = checked.grid;
  st.cpu = std::make_unique<CpuLaunch>(st.kernel->kernel, st.kernel->cpu.fn, st.args, st.grid,
                                       checked.bytes);
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
      for (const Step::Dynamic& d : st.dynamic) {
        if (!d.value->has_value())
          throw Error("plan step '" + st.label + "': dynamic scalar '" + d.slot + "' was not set");
        st.args[d.arg] = Arg::scalar_int(**d.value);
        st.cpu->set_scalar(d.arg, **d.value);
      }
      if (interpret)
        kiln::interpret(st.kernel->kernel, st.args, st.grid);
      else
        st.cpu->run(rt_.pool());
    }
    if (profiling_) {
      auto& p = prof_[st.label];
      p.first += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      p.second += 1;
    }
  }
}

}  // namespace kiln
