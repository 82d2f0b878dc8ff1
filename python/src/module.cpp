// kiln._kiln: Kiln's library to Python. kiln.Error carries every Kiln error
// message; nothing a Python caller passes may crash the interpreter.
#include "bindings.h"
#include "ir/error.h"
#include "runtime/plugin.h"

namespace nb = nanobind;

NB_MODULE(_kiln, m) {
  m.doc() = "Kiln: kernels written once in a tile DSL, JIT-compiled for CPUs and CUDA";
  nb::exception<kiln::Error>(m, "Error", PyExc_RuntimeError);
  // A kernel defined in Python keeps its build and launch functions for the
  // life of the process (the registry holds them, as it holds every
  // definition), so they are alive at exit by design, not leaked.
  nb::set_leak_warnings(false);
  m.attr("abi") = kiln::plugin_abi();
  kiln::py::bind_dsl(m);
  kiln::py::bind_launch(m);
  kiln::py::bind_model(m);
}
