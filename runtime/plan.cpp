#include "runtime/plan.h"

#include "ir/error.h"
#include "runtime/launch_check.h"

namespace kiln {

void Plan::launch(const std::string& label, const std::string& kernel,
                  const std::map<std::string, DType>& dtypes, const Args& args, const Sizes& sizes,
                  const std::map<std::string, int64_t>& fixed) {
  const Kernel& sig = rt_.signature(rt_.make_spec(kernel, dtypes, fixed));
  const std::string who = "plan step '" + label + "': kernel '" + kernel + "'";
  for (const auto& [name, a] : args) {
    bool known = false;
    for (const Param& p : sig.params) known |= p.name == name;
    if (!known) {
      std::string names;
      for (const Param& p : sig.params) names += (names.empty() ? "" : ", ") + p.name;
      throw Error(who + " has no parameter '" + name + "' (it takes " + names + ")");
    }
  }
  Step st;
  st.label = label;
  for (size_t i = 0; i < sig.params.size(); ++i) {
    auto it = args.find(sig.params[i].name);
    if (it == args.end())
      throw Error(who + ": parameter '" + sig.params[i].name + "' is not bound");
    if (const Arg* a = std::get_if<Arg>(&it->second)) {
      st.args.push_back(*a);
      continue;
    }
    const Dynamic& d = std::get<Dynamic>(it->second);
    st.args.push_back(Arg::scalar_int(d.bound));
    st.dynamic.push_back({i, &slots_[d.slot], d.slot});
  }
  // A graph's tensors are the backend's buffers: no host arrays to stage.
  BoundArgs bound;
  bound.args_ = st.args;
  bound.sizes_ = sizes;
  st.spec = rt_.select(kernel, dtypes, bound, fixed);
  Runtime::CheckedLaunch checked = rt_.check_launch(st.spec, rt_.signature(st.spec), bound);
  st.grid = checked.grid;
  st.launch_bytes = checked.bytes;
  st.buffer_bytes = checked.buffer_bytes;
  steps_.push_back(std::move(st));
  ready_ = false;
}

void Plan::compile() {
  if (ready_) return;
  std::vector<Spec> specs;
  for (const Step& st : steps_)
    if (st.is_launch() && !st.kernel) specs.push_back(st.spec);
  rt_.compile_all(specs);
  for (Step& st : steps_) {
    if (!st.is_launch() || st.kernel) continue;
    st.kernel = &rt_.compile(st.spec);
    st.bound = rt_.backend().bind(*st.kernel->program, st.kernel->kernel, st.args, st.grid,
                                  st.launch_bytes);
  }
  ready_ = true;
}

std::vector<Spec> Plan::specs() const {
  std::vector<Spec> out;
  for (const Step& st : steps_)
    if (st.is_launch()) out.push_back(st.spec);
  return out;
}

void Plan::add_copy(const std::string& label, Step::Copy kind, void* dst, const void* src,
                    size_t bytes) {
  Step st;
  st.label = label;
  st.copy = kind;
  st.dst = dst;
  st.src = src;
  st.bytes = bytes;
  steps_.push_back(std::move(st));
}

void Plan::upload(const std::string& label, void* dst, const void* src, size_t bytes) {
  add_copy(label, Step::Copy::upload, dst, src, bytes);
}

void Plan::download(const std::string& label, void* dst, const void* src, size_t bytes) {
  add_copy(label, Step::Copy::download, dst, src, bytes);
}

int64_t Plan::kernel_launches() const {
  int64_t n = 0;
  for (const Step& s : steps_) n += s.is_launch();
  return n;
}

void Plan::run_copy(Step& st) {
  Backend& b = rt_.backend();
  switch (st.copy) {
    case Step::Copy::upload: b.upload(st.dst, st.src, st.bytes); break;
    case Step::Copy::download: b.download(st.dst, st.src, st.bytes); break;
    case Step::Copy::none: break;
  }
}

void Plan::run(Runtime& rt, bool interpret) {
  if (&rt != &rt_)
    throw Error("a plan recorded on backend '" + rt_.backend().name() +
                "' cannot be replayed on another runtime (backend '" + rt.backend().name() +
                "'): its programs and buffers belong to the first");
  if (interpret && !rt_.backend().host_visible())
    throw Error("the reference interpreter reads host memory; backend '" + rt_.backend().name() +
                "' keeps its buffers on the device");
  compile();
  for (Step& st : steps_) {
    const auto t0 = trace_ ? Trace::Clock::now() : Trace::Clock::time_point{};
    if (!st.is_launch()) {
      run_copy(st);
    } else {
      for (const Step::Dynamic& d : st.dynamic) {
        if (!d.value->has_value())
          throw Error("plan step '" + st.label + "': dynamic scalar '" + d.slot + "' was not set");
        st.args[d.arg] = Arg::scalar_int(**d.value);
        st.bound->set_scalar(d.arg, **d.value);
      }
      if (interpret) {
        kiln::interpret(rt_.full_kernel(*st.kernel), st.args, st.grid);
      } else if (rt.checking()) {
        const Kernel& k = rt_.full_kernel(*st.kernel);
        const KernelDef& def = find_kernel(st.spec.kernel);
        std::string why = check_against_interpreter(
            k, st.args, st.grid, launch_tolerance(k, def.rtol, def.atol), [&] { st.bound->run(); });
        if (!why.empty())
          throw Error("plan step '" + st.label + "' (" + st.spec.str() +
                      ") differs from the interpreter: " + why);
      } else {
        st.bound->run();
      }
    }
    if (trace_) {
      // A device's launches are asynchronous: time them to completion.
      rt_.backend().synchronize();
      const auto t1 = Trace::Clock::now();
      if (st.is_launch())
        trace_->span(st.spec.kernel, "kernel", t0, t1,
                     {{"label", st.label},
                      {"spec", st.spec.str()},
                      {"grid", std::to_string(st.grid[0]) + "," + std::to_string(st.grid[1]) + "," +
                                   std::to_string(st.grid[2])},
                      {"bytes", st.buffer_bytes}});
      else
        trace_->span(st.copy == Step::Copy::upload ? "upload" : "download", "copy", t0, t1,
                     {{"label", st.label}, {"bytes", static_cast<int64_t>(st.bytes)}});
    }
  }
}

}  // namespace kiln
