#include "runtime/runtime.h"

#include <cstdio>

#include "ir/error.h"
#include "ir/passes.h"
#include "ir/printer.h"
#include "runtime/cpu_launch.h"

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
  check_arg_kinds(k, args);
  const std::string who = "kernel '" + k.name + "'";
  ScalarArgs scalars;
  for (const auto& [name, v] : sizes) scalars.set_int(name, v);
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    if (p.kind == ParamKind::Buffer) continue;
    if (is_float(p.dtype))
      scalars.set_float(p.name, args[i].f);
    else
      scalars.set_int(p.name, args[i].i);
  }
  LaunchShape shape = find_kernel(spec.kernel).launch_shape(spec, scalars);
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
  launch_cpu(c.kernel, c.cpu.fn, args, check_launch(spec, c.kernel, args, sizes), pool_);
}

void Runtime::interpret(const Spec& spec, const std::vector<Arg>& args, const Sizes& sizes) {
  Kernel k = build_kernel(spec);
  Grid grid = check_launch(spec, k, args, sizes);
  kiln::interpret(k, args, grid);
}

}  // namespace kiln
