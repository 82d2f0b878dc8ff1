// The DSL in Python: a kernel's build function receives the KernelBuilder
// and the Spec and writes the same tile program as in C++, with Python's
// operators on Values; kiln.kernel (kiln/__init__.py) registers it through
// register_kernel below. The callables a definition holds are kept for the
// life of the process, as the registry keeps the definition.
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <optional>
#include <set>

#include "bindings.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::py {
namespace {

// The builders whose build function is running. A Value, Var, Buffer or
// builder a Python function kept past its build points at freed memory: every
// use checks its builder here first and raises instead.
std::set<const KernelBuilder*>& live_builders() {
  static std::set<const KernelBuilder*> live;
  return live;
}

void check_live(const KernelBuilder* b) {
  if (b && !live_builders().count(b))
    throw Error(
        "a kiln DSL object (Value, Var, Buffer or KernelBuilder) used after its kernel's build "
        "function returned: keep them inside the build function");
}

std::string py_type(nb::handle h) { return nb::type_name(h.type()).c_str(); }

bool is_int(nb::handle h) { return PyBool_Check(h.ptr()) || PyLong_Check(h.ptr()); }

// A Value, a Var, or a Python number as a constant of ref's dtype.
Value self_value(const Value& v) {
  check_live(v.builder());
  return v;
}
Value self_value(const Var& v) {
  check_live(v.builder());
  return v.get();
}

Value operand(const Value& ref, nb::handle h) {
  check_live(ref.builder());
  if (nb::isinstance<Value>(h)) return self_value(nb::cast<Value>(h));
  if (nb::isinstance<Var>(h)) return self_value(nb::cast<Var&>(h));
  if (is_int(h)) return constant_like(ref, static_cast<double>(nb::cast<int64_t>(h)), true);
  if (PyFloat_Check(h.ptr())) return constant_like(ref, nb::cast<double>(h), false);
  throw Error("expected a kiln Value or a number, got " + py_type(h));
}

// A Value or Var alone (no dtype to give a number).
Value value(nb::handle h, const char* what) {
  if (nb::isinstance<Value>(h)) return self_value(nb::cast<Value>(h));
  if (nb::isinstance<Var>(h)) return self_value(nb::cast<Var&>(h));
  throw Error(std::string(what) + ": expected a kiln Value, got " + py_type(h));
}

Index index(nb::handle h) {
  if (is_int(h)) return Index(nb::cast<int64_t>(h));
  return Index(value(h, "loop bound"));
}

// Python's operators on Value and Var (a Var reads its current value).
template <class Self>
void bind_operators(nb::class_<Self>& c) {
#define KILN_BINARY(NAME, RNAME, OP)             \
  c.def(NAME, [](const Self& a, nb::handle b) {  \
    Value x = self_value(a);                     \
    return x OP operand(x, b);                   \
  });                                            \
  c.def(RNAME, [](const Self& a, nb::handle b) { \
    Value x = self_value(a);                     \
    return operand(x, b) OP x;                   \
  });
  KILN_BINARY("__add__", "__radd__", +)
  KILN_BINARY("__sub__", "__rsub__", -)
  KILN_BINARY("__mul__", "__rmul__", *)
  KILN_BINARY("__truediv__", "__rtruediv__", /)
  KILN_BINARY("__mod__", "__rmod__", %)
  KILN_BINARY("__and__", "__rand__", &)
  KILN_BINARY("__or__", "__ror__", |)
  KILN_BINARY("__xor__", "__rxor__", ^)
  KILN_BINARY("__lshift__", "__rlshift__", <<)
  KILN_BINARY("__rshift__", "__rrshift__", >>)
#undef KILN_BINARY
#define KILN_COMPARE(NAME, OP)                  \
  c.def(NAME, [](const Self& a, nb::handle b) { \
    Value x = self_value(a);                    \
    return x OP operand(x, b);                  \
  });
  KILN_COMPARE("__lt__", <)
  KILN_COMPARE("__le__", <=)
  KILN_COMPARE("__gt__", >)
  KILN_COMPARE("__ge__", >=)
  KILN_COMPARE("__eq__", ==)
  KILN_COMPARE("__ne__", !=)
#undef KILN_COMPARE
  c.def("__neg__", [](const Self& a) { return -self_value(a); });
  c.def("__invert__", [](const Self& a) { return ~self_value(a); });
  c.def("__abs__", [](const Self& a) { return abs(self_value(a)); });
  c.def(
      "to", [](const Self& a, DType t) { return self_value(a).to(t); }, "dtype"_a);
  c.def(
      "bitcast", [](const Self& a, DType t) { return self_value(a).bitcast(t); }, "dtype"_a);
  c.def_prop_ro("dtype", [](const Self& a) { return self_value(a).dtype(); });
  c.def_prop_ro("shape", [](const Self& a) { return self_value(a).shape(); });
  c.def("__bool__", [](const Self&) -> bool {
    throw Error(
        "a kiln Value has no truth value while the kernel is built: branch with k.if_(cond, ...) "
        "or choose with kiln.where(cond, a, b)");
  });
}

const Buffer& live(const Buffer& b) {
  check_live(b.builder());
  return b;
}
const Pointer& live(const Pointer& p) {
  check_live(p.buffer.builder());
  return p;
}
KernelBuilder& live(KernelBuilder& k) {
  check_live(&k);
  return k;
}

Pointer offset(const Buffer& b, nb::handle offsets) {
  return live(b) + value(offsets, "buffer offsets");
}

std::optional<Value> optional_value(nb::handle h, const char* what) {
  if (h.is_none()) return std::nullopt;
  return value(h, what);
}

Value load_py(const Pointer& ptr, nb::handle mask, nb::handle other) {
  const Pointer& p = live(ptr);
  auto m = optional_value(mask, "load mask");
  if (!m) return load(p);
  if (nb::isinstance<Value>(other) || nb::isinstance<Var>(other))
    return load(p, *m, value(other, "load other"));
  return load(p, *m, nb::cast<double>(other));
}

// A reduction over one axis, or over all of them when axis is None.
template <Value (*Axis)(const Value&, int), Value (*All)(const Value&)>
Value reduce(nb::handle x, nb::handle axis) {
  Value v = value(x, "reduction");
  return axis.is_none() ? All(v) : Axis(v, nb::cast<int>(axis));
}

Value sum_axis(const Value& x, int a) { return sum(x, a); }
Value sum_all(const Value& x) { return sum(x); }
Value max_axis(const Value& x, int a) { return max(x, a); }
Value max_all(const Value& x) { return max(x); }
Value min_axis(const Value& x, int a) { return min(x, a); }
Value min_all(const Value& x) { return min(x); }

// Keeps a Python callable for the life of the process (the registry's).
nb::handle keep(nb::handle fn) {
  fn.inc_ref();
  return fn;
}

}  // namespace

void bind_dsl(nb::module_& m) {
  nb::enum_<DType>(m, "DType")
      .value("f32", DType::f32)
      .value("f16", DType::f16)
      .value("bf16", DType::bf16)
      .value("f8e4m3", DType::f8e4m3)
      .value("f8e5m2", DType::f8e5m2)
      .value("i8", DType::i8)
      .value("u8", DType::u8)
      .value("i16", DType::i16)
      .value("u16", DType::u16)
      .value("i32", DType::i32)
      .value("u32", DType::u32)
      .value("i64", DType::i64)
      .value("bool", DType::boolean);
  m.def("parse_dtype", [](const std::string& s) { return parse_dtype(s); });

  nb::class_<Spec>(m, "Spec")
      .def_ro("kernel", &Spec::kernel)
      .def_ro("dtypes", &Spec::dtypes)
      .def_ro("constexprs", &Spec::constexprs)
      .def("dtype", &Spec::dtype, "role"_a)
      .def("__getitem__", &Spec::constexpr_, "constexpr"_a)
      .def("__str__", &Spec::str)
      .def("__repr__", [](const Spec& s) { return "<kiln.Spec " + s.str() + ">"; });

  nb::class_<Value> value_cls(m, "Value");
  bind_operators(value_cls);
  nb::class_<Var> var_cls(m, "Var");
  bind_operators(var_cls);
  var_cls.def_prop_rw(
      "value", [](const Var& v) { return self_value(v); },
      [](Var& v, nb::handle x) { v = operand(self_value(v), x); });
  var_cls.def(
      "set", [](Var& v, nb::handle x) { v = operand(self_value(v), x); }, "value"_a);
  // var += x: the var takes its value combined with x, and stays the var.
  auto compound = [](auto op) {
    return [op](Var& v, nb::handle x) {
      Value cur = self_value(v);
      v = op(cur, operand(cur, x));
      return v;
    };
  };
  var_cls.def("__iadd__", compound(std::plus<>()));
  var_cls.def("__isub__", compound(std::minus<>()));
  var_cls.def("__imul__", compound(std::multiplies<>()));

  nb::class_<Pointer>(m, "Pointer").def("__add__", [](const Pointer& p, nb::handle o) {
    return live(p) + value(o, "pointer offsets");
  });
  nb::class_<Buffer>(m, "Buffer")
      .def_prop_ro("dtype", [](const Buffer& b) { return live(b).dtype(); })
      .def("__add__", &offset)
      .def("__radd__", &offset)
      .def("at",
           [](const Buffer& b, nb::handle base) { return live(b).at(value(base, "Buffer.at")); });

  nb::class_<KernelBuilder>(m, "KernelBuilder")
      .def(
          "buffer",
          [](KernelBuilder& k, const std::string& n, DType t) { return live(k).buffer(n, t); },
          "name"_a, "dtype"_a)
      .def(
          "scratch",
          [](KernelBuilder& k, const std::string& n, DType t, int64_t e) {
            return live(k).scratch(n, t, e);
          },
          "name"_a, "dtype"_a, "elems"_a)
      .def(
          "scalar",
          [](KernelBuilder& k, const std::string& n, DType t) { return live(k).scalar(n, t); },
          "name"_a, "dtype"_a)
      .def(
          "program_id", [](KernelBuilder& k, int axis) { return live(k).program_id(axis); },
          "axis"_a = 0)
      .def(
          "num_programs", [](KernelBuilder& k, int axis) { return live(k).num_programs(axis); },
          "axis"_a = 0)
      .def(
          "var", [](KernelBuilder& k, nb::handle init) { return live(k).var(value(init, "var")); },
          "init"_a)
      .def(
          "for_",
          [](KernelBuilder& k, nb::handle lo, nb::handle hi, nb::handle step, nb::callable body) {
            live(k).for_(index(lo), index(hi), index(step), [&](Value i) { body(i); });
          },
          "lo"_a, "hi"_a, "step"_a, "body"_a)
      .def(
          "if_",
          [](KernelBuilder& k, nb::handle cond, nb::callable then_body, nb::object else_body) {
            std::function<void()> otherwise;
            if (!else_body.is_none()) otherwise = [&] { else_body(); };
            live(k).if_(
                value(cond, "if_ condition"), [&] { then_body(); }, otherwise);
          },
          "cond"_a, "then"_a, "otherwise"_a.none() = nb::none());

  // ---- the free functions of the DSL ----
  m.def("arange", &arange, "n"_a);
  m.def("full", &full, "shape"_a, "value"_a, "dtype"_a);
  m.def("zeros", &zeros, "dtype"_a, "shape"_a);
  m.def("broadcast_to",
        [](nb::handle v, const Shape& s) { return broadcast_to(value(v, "broadcast_to"), s); });
  m.def("reshape", [](nb::handle v, const Shape& s) { return reshape(value(v, "reshape"), s); });
  m.def("expand_dims",
        [](nb::handle v, int axis) { return expand_dims(value(v, "expand_dims"), axis); });
  m.def("transpose", [](nb::handle v) { return transpose(value(v, "transpose")); });
  m.def("slice", [](nb::handle v, const std::vector<int64_t>& starts, const Shape& sizes) {
    return slice(value(v, "slice"), starts, sizes);
  });
  m.def("minimum", [](nb::handle a, nb::handle b) {
    Value x = value(a, "minimum");
    return minimum(x, operand(x, b));
  });
  m.def("maximum", [](nb::handle a, nb::handle b) {
    Value x = value(a, "maximum");
    return maximum(x, operand(x, b));
  });
  m.def("fma", [](nb::handle a, nb::handle b, nb::handle c) {
    Value x = value(a, "fma");
    return fma(x, operand(x, b), operand(x, c));
  });
  m.def("where", [](nb::handle cond, nb::handle a, nb::handle b) {
    Value c = value(cond, "where condition");
    const bool a_value = nb::isinstance<Value>(a) || nb::isinstance<Var>(a);
    Value ref = a_value ? value(a, "where") : value(b, "where (one of a, b must be a Value)");
    return where(c, operand(ref, a), operand(ref, b));
  });
  m.def(
      "lookup",
      [](const std::vector<int64_t>& table, DType t, nb::handle i) {
        return lookup(table, t, value(i, "lookup"));
      },
      "table"_a, "dtype"_a, "index"_a);
#define KILN_UNARY(NAME) m.def(#NAME, [](nb::handle x) { return NAME(value(x, #NAME)); });
  KILN_UNARY(abs)
  KILN_UNARY(floor)
  KILN_UNARY(exp)
  KILN_UNARY(exp2)
  KILN_UNARY(log)
  KILN_UNARY(log2)
  KILN_UNARY(sqrt)
  KILN_UNARY(rsqrt)
  KILN_UNARY(tanh)
  KILN_UNARY(sigmoid)
  KILN_UNARY(erf)
#undef KILN_UNARY
  m.def("sum", &reduce<sum_axis, sum_all>, "x"_a, "axis"_a = nb::none());
  m.def("max", &reduce<max_axis, max_all>, "x"_a, "axis"_a = nb::none());
  m.def("min", &reduce<min_axis, min_all>, "x"_a, "axis"_a = nb::none());
  m.def(
      "argmax", [](nb::handle x, int axis) { return argmax(value(x, "argmax"), axis); }, "x"_a,
      "axis"_a);
  m.def(
      "dot",
      [](nb::handle a, nb::handle b, nb::handle acc) {
        return dot(value(a, "dot"), value(b, "dot"), value(acc, "dot accumulator"));
      },
      "a"_a, "b"_a, "acc"_a);
  m.def("dot_groups", [](nb::handle a, nb::handle b) {
    return dot_groups(value(a, "dot_groups"), value(b, "dot_groups"));
  });
  m.def("load", &load_py, "ptr"_a, "mask"_a = nb::none(), "other"_a = 0.0);
  m.def(
      "store",
      [](const Pointer& ptr, nb::handle v, nb::handle mask) {
        const Pointer& p = live(ptr);
        Value x = value(v, "store");
        if (auto mk = optional_value(mask, "store mask"))
          store(p, x, *mk);
        else
          store(p, x);
      },
      "ptr"_a, "value"_a, "mask"_a = nb::none());
  m.def(
      "atomic_add",
      [](const Pointer& ptr, nb::handle v, nb::handle mask) {
        const Pointer& p = live(ptr);
        Value x = value(v, "atomic_add");
        auto mk = optional_value(mask, "atomic_add mask");
        return mk ? atomic_add(p, x, *mk) : atomic_add(p, x);
      },
      "ptr"_a, "value"_a, "mask"_a = nb::none());

  nb::class_<ScalarArgs>(m, "Sizes")
      .def("__getitem__", [](const ScalarArgs& a, const std::string& name) -> nb::object {
        try {
          return nb::int_(a.i(name));
        } catch (const Error&) {
        }
        try {
          return nb::float_(a.f(name));
        } catch (const Error&) {
        }
        throw Error("the launch has no size or scalar '" + name + "'");
      });

  m.def(
      "register_kernel",
      [](const std::string& name, nb::callable build, nb::callable launch,
         const std::vector<std::pair<std::string, std::vector<DType>>>& dtype_roles,
         const std::vector<std::pair<std::string, int64_t>>& constexprs,
         const std::vector<std::pair<std::string, std::vector<int64_t>>>& tunables,
         const std::vector<std::string>& shape_keys, const std::string& family,
         const std::string& summary, double rtol, double atol) {
        KernelDef d;
        d.name = name;
        d.family = family;
        d.summary = summary;
        d.dtype_roles = dtype_roles;
        d.constexpr_defaults = constexprs;
        for (const auto& [t, values] : tunables) d.tunables.push_back({t, values});
        d.shape_keys = shape_keys;
        d.rtol = rtol;
        d.atol = atol;
        d.origin = "python";
        nb::handle b = keep(build), l = keep(launch);
        d.build = [name, b](const Spec& s) {
          nb::gil_scoped_acquire gil;
          KernelBuilder k(name, s);
          live_builders().insert(&k);
          struct Ended {
            const KernelBuilder* k;
            ~Ended() { live_builders().erase(k); }
          } ended{&k};
          b(nb::cast(&k, nb::rv_policy::reference), s);
          return k.finish();
        };
        d.launch_shape = [name, l](const Spec& s, const ScalarArgs& a) {
          nb::gil_scoped_acquire gil;
          nb::object r = l(s, nb::cast(&a, nb::rv_policy::reference));
          nb::tuple t;
          if (!nb::try_cast(r, t) || t.size() != 2)
            throw Error("kernel '" + name +
                        "': its launch function must return (grid, {buffer: elements})");
          LaunchShape shape;
          std::vector<int64_t> grid = nb::cast<std::vector<int64_t>>(t[0]);
          if (grid.empty() || grid.size() > 3)
            throw Error("kernel '" + name + "': a grid has 1 to 3 axes, got " +
                        std::to_string(grid.size()));
          for (size_t i = 0; i < grid.size(); ++i) shape.grid[i] = grid[i];
          shape.buffer_elems = nb::cast<std::map<std::string, int64_t>>(t[1]);
          return shape;
        };
        register_kernel(std::move(d));
      },
      "name"_a, "build"_a, "launch"_a, "dtypes"_a, "constexprs"_a, "tunables"_a, "shape_keys"_a,
      "family"_a, "summary"_a, "rtol"_a, "atol"_a);
  m.def("kernels", [] {
    std::vector<std::string> names;
    for (const KernelDef& d : all_kernels()) names.push_back(d.name);
    return names;
  });
}

}  // namespace kiln::py
