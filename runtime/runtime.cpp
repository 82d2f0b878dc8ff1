#include "runtime/runtime.h"

#include <cstdio>
#include <cstring>

#include "ir/error.h"
#include "ir/passes.h"
#include "ir/printer.h"

namespace kiln {

Kernel build_kernel(const Spec& spec) {
  const KernelDef& def = find_kernel(spec.kernel);
  return run_pipeline(def.build(spec));
}

Runtime::Runtime(int threads) : pool_(threads), jit_(std::make_unique<CpuJit>()) {}
Runtime::~Runtime() = default;

const CompiledKernel& Runtime::compile(const Spec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = spec.str();
  auto it = compiled_.find(key);
  if (it != compiled_.end()) return *it->second;
  auto c = std::make_unique<CompiledKernel>();
  c->spec = spec;
  c->kernel = build_kernel(spec);
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(structural_hash(c->kernel)));
  c->cpu = jit_->compile(c->kernel, "kiln_" + spec.kernel + "_" + hash);
  return *compiled_.emplace(key, std::move(c)).first->second;
}

Grid Runtime::check_launch(const Spec& spec, const Kernel& k, const std::vector<Arg>& args,
                           const Sizes& sizes) {
  const std::string who = "kernel '" + k.name + "'";
  if (args.size() != k.params.size()) {
    std::string names;
    for (const auto& p : k.params) names += (names.empty() ? "" : ", ") + p.name;
    throw Error(who + " takes " + std::to_string(k.params.size()) + " arguments (" + names +
                "), got " + std::to_string(args.size()));
  }
  ScalarArgs scalars;
  for (const auto& [name, v] : sizes) scalars.set_int(name, v);
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    bool want_buffer = p.kind == ParamKind::Buffer;
    if (args[i].is_buffer != want_buffer)
      throw Error(who + ": argument " + std::to_string(i) + " ('" + p.name + "') must be a " +
                  (want_buffer ? "buffer" : "scalar"));
    if (want_buffer && args[i].count > 0 && !args[i].data)
      throw Error(who + ": buffer '" + p.name + "' is null");
    if (!want_buffer) {
      if (is_float(p.dtype))
        scalars.set_float(p.name, args[i].f);
      else
        scalars.set_int(p.name, args[i].i);
    }
  }
  LaunchShape shape = find_kernel(spec.kernel).launch_shape(spec, scalars);
  for (int a = 0; a < 3; ++a)
    if (shape.grid[a] < 0 || shape.grid[a] > INT32_MAX)
      throw Error(who + ": grid axis " + std::to_string(a) + " has " +
                  std::to_string(shape.grid[a]) + " programs (0.." + std::to_string(INT32_MAX) +
                  " allowed)");
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
  }
  return shape.grid;
}

void Runtime::launch(const Spec& spec, const std::vector<Arg>& args, const Sizes& sizes) {
  const CompiledKernel& c = compile(spec);
  Grid grid = check_launch(spec, c.kernel, args, sizes);
  std::vector<void*> buffers;
  std::vector<int64_t> scalars;
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = c.kernel.params[i];
    if (p.kind == ParamKind::Buffer) {
      buffers.push_back(args[i].data);
    } else if (is_float(p.dtype)) {
      int64_t bits;
      std::memcpy(&bits, &args[i].f, sizeof bits);
      scalars.push_back(bits);
    } else {
      scalars.push_back(args[i].i);
    }
  }
  LaunchArgs la{buffers.data(),
                scalars.data(),
                {static_cast<int32_t>(grid[0]), static_cast<int32_t>(grid[1]),
                 static_cast<int32_t>(grid[2])}};
  int64_t total = grid[0] * grid[1] * grid[2];
  KernelRangeFn fn = c.cpu.fn;
  pool_.parallel_for(total, [&](int64_t b, int64_t e) { fn(&la, b, e); });
}

void Runtime::interpret(const Spec& spec, const std::vector<Arg>& args, const Sizes& sizes) {
  Kernel k = build_kernel(spec);
  Grid grid = check_launch(spec, k, args, sizes);
  kiln::interpret(k, args, grid);
}

}  // namespace kiln
