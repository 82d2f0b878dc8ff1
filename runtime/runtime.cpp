#include "runtime/runtime.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>
#include <thread>

#include "ir/error.h"
#include "ir/passes.h"
#include "runtime/compile_key.h"

namespace kiln {

Kernel build_kernel(const Spec& spec) {
  const KernelDef& def = find_kernel(spec.kernel);
  return run_pipeline(def.build(spec));
}

ScalarArgs scalar_args(const Kernel& k, const BoundArgs& bound) {
  ScalarArgs scalars;
  for (const auto& [name, v] : bound.sizes()) scalars.set_int(name, v);
  const std::vector<Arg>& args = bound.args();
  for (size_t i = 0; i < args.size() && i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    if (p.kind == ParamKind::Buffer) continue;
    if (is_float(p.dtype))
      scalars.set_float(p.name, args[i].f);
    else
      scalars.set_int(p.name, args[i].i);
  }
  return scalars;
}

Runtime::Runtime(int threads) : Runtime(RuntimeOptions{threads}) {}

Runtime::Runtime(const RuntimeOptions& o)
    : pool_(o.threads),
      backend_(make_backend(o.backend, pool_)),
      cache_(o.cache_dir),
      tuning_(backend_->tuning_cpu()),
      check_(o.check) {
  if (check_ && !backend_->host_visible())
    throw Error(
        "checking launches against the interpreter needs a backend whose buffers are "
        "host memory (cpu, cuda-sim), not '" +
        backend_->name() + "'");
  if (!o.use_tuning_db) return;
  std::string cls = backend_->tuning_class();
  tuning_.load_text(default_tuning_text(cls), "runtime/tuning/" + cls + ".toml");
  if (!user_tuning_path().empty()) tuning_.load_file(user_tuning_path());
}

Runtime::~Runtime() = default;

std::string Runtime::user_tuning_path() const {
  if (!cache_.persistent()) return "";
  return cache_.root() + "/tuning/" + backend_->tuning_class() + ".toml";
}

const CompiledKernel& Runtime::compile(const Spec& spec) {
  compile_all({spec});
  std::lock_guard<std::mutex> lock(mu_);
  return *compiled_.at(spec.str());
}

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

bool Runtime::indexed(const Spec& spec) const {
  return backend_->loads_by_digest() && cache_.persistent() &&
         find_kernel(spec.kernel).origin.empty();
}

std::unique_ptr<CompiledKernel> Runtime::prepare(const Spec& spec) {
  auto t0 = std::chrono::steady_clock::now();
  auto c = std::make_unique<CompiledKernel>();
  c->spec = spec;
  if (indexed(spec)) {
    if (auto digest = cache_.find_digest(spec_index_key(spec, *backend_))) {
      if ((c->program = backend_->load(*digest, spec.kernel, cache_))) {
        c->kernel = signature(spec);
        c->has_body = false;
        c->digest = *digest;
        c->from_disk = true;
      }
    }
  }
  if (!c->program) {
    c->kernel = build_kernel(spec);
    c->digest = make_compile_key(c->kernel, *backend_).digest();
  }
  c->compile_ms = ms_since(t0);
  return c;
}

void Runtime::generate(CompiledKernel& c) {
  auto t0 = std::chrono::steady_clock::now();
  c.program = backend_->compile(c.kernel, c.digest, cache_);
  if (indexed(c.spec)) cache_.remember_digest(spec_index_key(c.spec, *backend_), c.digest);
  c.from_disk = c.program->from_cache;
  c.compile_ms += ms_since(t0);
}

void Runtime::compile_all(const std::vector<Spec>& specs) {
  const bool parallel = backend_->parallel_compile();
  // A backend that compiles one kernel at a time gets one caller at a time.
  std::unique_lock<std::mutex> serial(compile_mu_, std::defer_lock);
  if (!parallel) serial.lock();
  std::vector<const Spec*> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::string> seen;
    for (const Spec& s : specs) {
      std::string key = s.str();
      if (!compiled_.count(key) && seen.insert(key).second) todo.push_back(&s);
    }
  }
  if (todo.empty()) return;
  auto t0 = std::chrono::steady_clock::now();
  const size_t threads = parallel ? std::max(1u, std::thread::hardware_concurrency()) : 1;
  std::vector<std::unique_ptr<CompiledKernel>> done(todo.size());
  std::vector<std::exception_ptr> failed(todo.size());
  // First every kernel found by spec in the disk cache or its IR built
  // (milliseconds), then code generation, the largest IR first: the longest
  // compile never starts last, so the wall time nears the work over the
  // threads.
  run_on_threads(
      todo.size(), threads, [&](size_t i) { done[i] = prepare(*todo[i]); }, failed);
  std::vector<size_t> order;
  for (size_t i = 0; i < todo.size(); ++i)
    if (done[i] && !done[i]->program) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return done[a]->kernel.values.size() > done[b]->kernel.values.size();
  });
  std::vector<std::exception_ptr> generate_failed(order.size());
  run_on_threads(
      order.size(), threads, [&](size_t j) { generate(*done[order[j]]); }, generate_failed);
  for (size_t j = 0; j < order.size(); ++j)
    if (generate_failed[j]) failed[order[j]] = generate_failed[j];
  {
    // A kernel another caller compiled meanwhile keeps its first program.
    std::lock_guard<std::mutex> lock(mu_);
    compile_wall_ms_ += ms_since(t0);
    for (size_t i = 0; i < todo.size(); ++i)
      if (done[i] && done[i]->program) compiled_.emplace(todo[i]->str(), std::move(done[i]));
  }
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

Runtime::CompileStats Runtime::compile_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  CompileStats st;
  for (const auto& [key, c] : compiled_) {
    ++st.kernels;
    st.ms += c->compile_ms;
  }
  st.wall_ms = compile_wall_ms_;
  return st;
}

// The parameters of a spec's kernel, built once: select() needs the scalar
// names on every call, and building IR per op call would dominate it.
const Kernel& Runtime::signature(const Spec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = signatures_.find(spec.str());
  if (it != signatures_.end()) return it->second;
  Kernel k = find_kernel(spec.kernel).build(spec);
  k.body.ops.clear();  // only the parameter list is kept
  k.values.clear();
  k.vars.clear();
  return signatures_.emplace(spec.str(), std::move(k)).first->second;
}

const Kernel& Runtime::full_kernel(const CompiledKernel& c) {
  if (c.has_body) return c.kernel;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = bodies_.find(c.spec.str());
  if (it == bodies_.end()) it = bodies_.emplace(c.spec.str(), build_kernel(c.spec)).first;
  return it->second;
}

Spec Runtime::make_spec(const std::string& kernel, const std::map<std::string, DType>& dtypes,
                        const std::map<std::string, int64_t>& constexprs) {
  return find_kernel(kernel).make_spec(dtypes, constexprs, backend_->target_desc());
}

Spec Runtime::select(const std::string& kernel, const std::map<std::string, DType>& dtypes,
                     const LaunchArgs& args, const std::map<std::string, int64_t>& fixed) {
  return select(kernel, dtypes, bind_named(signature(make_spec(kernel, dtypes, fixed)), args),
                fixed);
}

Spec Runtime::select(const std::string& kernel, const std::map<std::string, DType>& dtypes,
                     const BoundArgs& args, const std::map<std::string, int64_t>& fixed) {
  const KernelDef& def = find_kernel(kernel);
  if (def.shape_keys.empty()) return make_spec(kernel, dtypes, fixed);
  return explain(kernel, dtypes, scalar_args(signature(make_spec(kernel, dtypes, fixed)), args),
                 fixed)
      .spec;
}

Runtime::Selection Runtime::explain(const std::string& kernel,
                                    const std::map<std::string, DType>& dtypes,
                                    const ScalarArgs& scalars,
                                    const std::map<std::string, int64_t>& fixed) {
  const KernelDef& def = find_kernel(kernel);
  auto make = [&](const std::map<std::string, int64_t>& c) { return make_spec(kernel, dtypes, c); };
  Selection sel;
  sel.spec = make(fixed);
  // What the spec holds before any choice for a shape: a default, or the
  // kernel's own heuristic for the dtypes and target.
  std::map<std::string, int64_t> by_heuristic;
  if (def.heuristic) by_heuristic = def.heuristic(sel.spec);
  for (const auto& [name, v] : sel.spec.constexprs)
    sel.origin[name] = fixed.count(name)          ? "given"
                       : by_heuristic.count(name) ? "kernel heuristic (dtypes and target)"
                                                  : "default";
  if (def.shape_keys.empty()) return sel;
  TuningKey key{kernel, sel.spec.dtypes, shape_bucket(def, scalars), spec_variant(def, sel.spec)};
  std::map<std::string, int64_t> chosen;
  std::string why;
  if (auto m = tuning_.match(key)) {
    chosen = m->constexprs;
    why = "tuning database " + m->source + " (" + m->key.str() + ")";
  } else if (def.shape_heuristic) {
    chosen = def.shape_heuristic(sel.spec, scalars);
    why = "shape heuristic";
  }
  for (const auto& [name, v] : fixed) chosen[name] = v;
  sel.spec = make(chosen);
  for (const auto& [name, v] : chosen)
    if (!fixed.count(name)) sel.origin[name] = why;
  return sel;
}

void Runtime::call(const std::string& kernel, const std::map<std::string, DType>& dtypes,
                   const LaunchArgs& args, const std::map<std::string, int64_t>& fixed) {
  const Spec spec = make_spec(kernel, dtypes, fixed);
  const BoundArgs bound = bind_named(signature(spec), args);
  launch(select(kernel, dtypes, bound, fixed), bound);
}

BoundArgs Runtime::bind(const Spec& spec, const LaunchArgs& args) {
  return bind_named(signature(spec), args);
}

Runtime::CheckedLaunch Runtime::check_launch(const Spec& spec, const Kernel& k,
                                             const BoundArgs& bound) {
  const std::vector<Arg>& args = bound.args();
  check_arg_kinds(k, args);
  const std::string who = "kernel '" + k.name + "'";
  LaunchShape shape = find_kernel(spec.kernel).launch_shape(spec, scalar_args(k, bound));
  CheckedLaunch checked{shape.grid};
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    if (p.kind != ParamKind::Buffer) continue;
    auto need = shape.buffer_elems.find(p.name);
    if (need == shape.buffer_elems.end()) continue;
    if (need->second < 0)
      throw Error(who + ": the launch sizes give buffer '" + p.name + "' a negative size");
    if (args[i].count < need->second)
      throw Error(who + ": buffer '" + p.name + "' holds " + std::to_string(args[i].count) +
                  " elements, the launch needs " + std::to_string(need->second));
    checked.bytes += need->second * dtype_bytes(p.dtype);
  }
  checked.buffer_bytes = checked.bytes;
  if (shape.compute_bound) checked.bytes = -1;
  return checked;
}

void Runtime::launch(const Spec& spec, const LaunchArgs& args) { launch(spec, bind(spec, args)); }

void Runtime::launch(const Spec& spec, const BoundArgs& args) {
  const CompiledKernel& c = compile(spec);
  CheckedLaunch checked = check_launch(spec, c.kernel, args);
  if (backend_->host_visible() || args.host_arrays().empty()) {
    backend_->bind(*c.program, c.kernel, args.args(), checked.grid, checked.bytes)->run();
    return;
  }
  BoundArgs staged = args;
  std::vector<DeviceBuffer> copies;
  copies.reserve(args.host_arrays().size());
  for (size_t i : args.host_arrays()) {
    const Arg& a = args.args()[i];
    copies.emplace_back(*backend_,
                        static_cast<size_t>(a.count * dtype_bytes(c.kernel.params[i].dtype)));
    backend_->upload(copies.back().data(), a.data, copies.back().bytes());
    staged = staged.with_buffer(i, copies.back().data(), true);
  }
  backend_->bind(*c.program, c.kernel, staged.args(), checked.grid, checked.bytes)->run();
  backend_->synchronize();
  for (size_t j = 0; j < copies.size(); ++j)
    backend_->download(args.args()[args.host_arrays()[j]].data, copies[j].data(),
                       copies[j].bytes());
}

void Runtime::interpret(const Spec& spec, const LaunchArgs& args) {
  interpret(spec, bind(spec, args));
}

void Runtime::interpret(const Spec& spec, const BoundArgs& args) {
  if (!backend_->host_visible()) {
    size_t buffers = 0;
    for (const Arg& a : args.args()) buffers += a.is_buffer;
    if (args.host_arrays().size() != buffers)
      throw Error("kernel '" + spec.kernel + "': the interpreter runs on host arrays only");
  }
  Kernel k = build_kernel(spec);
  kiln::interpret(k, args.args(), check_launch(spec, k, args).grid);
}

}  // namespace kiln
