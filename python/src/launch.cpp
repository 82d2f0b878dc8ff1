// Devices, launches on NumPy arrays and DLPack tensors, generated code and
// tuning, for Python. Arrays bind by parameter name (runtime/named_args.h):
// an array must be C-contiguous and of the parameter's dtype (or raw
// uint8/uint16 of its width), on the host or, for the cuda backend, on the
// GPU; the errors name the parameter. Launches and tuning run with the GIL
// released (a kernel defined in Python takes it back to build).
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "ir/error.h"
#include "runtime/device.h"
#include "runtime/generated_code.h"
#include "runtime/plugin.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::py {
namespace {

DType array_dtype(const std::string& name, nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return DType::f32;
    if (code == Code::Float && t.bits == 16) return DType::f16;
    if (code == Code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == Code::Bool) return DType::boolean;
    if (code == Code::Int) {
      if (t.bits == 8) return DType::i8;
      if (t.bits == 16) return DType::i16;
      if (t.bits == 32) return DType::i32;
      if (t.bits == 64) return DType::i64;
    }
    if (code == Code::UInt) {
      if (t.bits == 8) return DType::u8;
      if (t.bits == 16) return DType::u16;
      if (t.bits == 32) return DType::u32;
    }
  }
  throw Error("argument '" + name + "': Kiln has no dtype for arrays of " + std::to_string(t.bits) +
              "-bit type code " + std::to_string(t.code));
}

LaunchArg launch_arg(const std::string& name, nb::handle v, const std::string& backend) {
  if (PyBool_Check(v.ptr()) || PyLong_Check(v.ptr())) {
    int64_t i;
    if (!nb::try_cast(v, i))
      throw Error("argument '" + name + "': the integer does not fit in 64 bits");
    return LaunchArg(i);
  }
  if (PyFloat_Check(v.ptr())) return LaunchArg(nb::cast<double>(v));
  nb::ndarray<> a;
  if (!nb::try_cast(v, a))
    throw Error("argument '" + name +
                "': expected a writable array (NumPy, or a DLPack tensor) or a number, got " +
                std::string(nb::type_name(v.type()).c_str()));
  int64_t count = 1, stride = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != stride)
      throw Error("argument '" + name +
                  "': the array is not C-contiguous (copy it with numpy.ascontiguousarray)");
    stride *= static_cast<int64_t>(a.shape(d));
    count *= static_cast<int64_t>(a.shape(d));
  }
  const DType t = array_dtype(name, a.dtype());
  if (a.device_type() == nb::device::cpu::value) return LaunchArg(a.data(), count, t);
  if (a.device_type() == nb::device::cuda::value && backend == "cuda")
    return LaunchArg::device(a.data(), count, t);
  throw Error("argument '" + name + "': the array is on a device the '" + backend +
              "' backend cannot read");
}

LaunchArgs launch_args(const nb::dict& args, const std::string& backend) {
  LaunchArgs out;
  for (auto [k, v] : args) {
    std::string name = nb::cast<std::string>(k);
    out.emplace_back(name, launch_arg(name, v, backend));
  }
  return out;
}

nb::dict trial_dict(const TuneTrial& t) {
  nb::dict d;
  d["constexprs"] = t.constexprs;
  d["ms"] = t.median_ms;
  d["status"] = t.status;
  return d;
}

}  // namespace

void bind_launch(nb::module_& m) {
  nb::class_<Device>(m, "Device")
      .def(nb::init<const std::string&, int>(), "backend"_a = "cpu", "threads"_a = 0)
      .def_prop_ro("name", &Device::name)
      .def("_select",
           [](Device& d, const std::string& kernel, const nb::dict& args,
              const std::map<std::string, DType>& dtypes,
              const std::map<std::string, int64_t>& constexprs) {
             LaunchArgs la = launch_args(args, d.name());
             nb::gil_scoped_release release;
             return d.select(kernel, la, dtypes, constexprs);
           })
      .def("_launch",
           [](Device& d, const std::string& kernel, const nb::dict& args,
              const std::map<std::string, DType>& dtypes,
              const std::map<std::string, int64_t>& constexprs) {
             LaunchArgs la = launch_args(args, d.name());
             nb::gil_scoped_release release;
             d.launch(kernel, la, dtypes, constexprs);
           })
      .def("_launch_spec",
           [](Device& d, const Spec& spec, const nb::dict& args) {
             LaunchArgs la = launch_args(args, d.name());
             nb::gil_scoped_release release;
             d.launch(spec, la);
           })
      .def("_interpret",
           [](Device& d, const Spec& spec, const nb::dict& args) {
             LaunchArgs la = launch_args(args, "cpu");
             nb::gil_scoped_release release;
             d.interpret(spec, la);
           })
      .def("_tune",
           [](Device& d, const std::string& kernel, const std::map<std::string, int64_t>& shape,
              const std::map<std::string, DType>& dtypes,
              const std::map<std::string, int64_t>& fixed,
              const std::map<std::string, double>& floats, double budget_s, bool warm) {
             TuneOptions o;
             o.shape = shape;
             o.dtypes = dtypes;
             o.fixed = fixed;
             o.floats = floats;
             o.budget_s = budget_s;
             o.warm = warm;
             TuneResult r;
             {
               nb::gil_scoped_release release;
               r = d.tune(kernel, o);
             }
             nb::dict out;
             out["best"] = trial_dict(r.best);
             out["heuristic"] = trial_dict(r.heuristic);
             nb::list trials;
             for (const TuneTrial& t : r.trials) trials.append(trial_dict(t));
             out["trials"] = trials;
             out["bytes"] = r.bytes;
             out["key"] = r.key.str();
             return out;
           });

  m.def(
      "generated_code",
      [](const std::string& kernel, const std::string& form, const std::string& target, int sm,
         int warps, const std::map<std::string, DType>& dtypes,
         const std::map<std::string, int64_t>& constexprs) {
        CodeTarget t{target, sm, warps};
        CodeForm f = parse_code_form(form);
        nb::gil_scoped_release release;
        return generated_code(code_spec(kernel, dtypes, constexprs, t), f, t);
      },
      "kernel"_a, "form"_a = "ir", "target"_a = "host", "sm"_a = 80, "warps"_a = 0,
      "dtypes"_a = std::map<std::string, DType>{},
      "constexprs"_a = std::map<std::string, int64_t>{});
  m.def(
      "load_plugin", [](const std::string& path) { return load_plugin(path); }, "path"_a);
}

}  // namespace kiln::py
