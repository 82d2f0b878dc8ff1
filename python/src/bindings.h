// The nanobind module's parts, one per area: the DSL and kernel
// definitions (dsl.cpp), devices, launches on arrays, generated code and
// tuning (launch.cpp), and the model runtime (model.cpp). Each registers
// its classes and functions on the module.
#pragma once

#include <nanobind/nanobind.h>

namespace kiln::py {

void bind_dsl(nanobind::module_& m);
void bind_launch(nanobind::module_& m);
void bind_model(nanobind::module_& m);

}  // namespace kiln::py
