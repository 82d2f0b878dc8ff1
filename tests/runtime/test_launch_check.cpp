// Runtime's check mode (runtime/launch_check.h): a compiled launch against
// the interpreter on its own inputs, which names the first buffer element
// that differs, and the tolerance it allows per kernel.
#include <catch2/catch.hpp>

#include "ir/passes.h"
#include "runtime/launch_check.h"
#include "runtime/plan.h"
#include "support/runtime_fixture.h"

using namespace kiln;

namespace {

struct AddLaunch {
  Spec spec = find_kernel("add").make_spec();
  Kernel k = build_kernel(spec);
  std::vector<float> x = std::vector<float>(100, 1.5f), y = std::vector<float>(100, 2.0f),
                     z = std::vector<float>(100, 0.0f);
  BoundArgs bound = test::runtime().bind(spec, {{"x", x}, {"y", y}, {"z", z}, {"n", int64_t{100}}});
  // In parameter order, for the checker and the plan below the runtime.
  std::vector<Arg> args = bound.args();
  Grid grid = test::runtime().check_launch(spec, k, bound).grid;
};

}  // namespace

TEST_CASE("a compiled launch agrees with the interpreter or is named", "[runtime][check]") {
  AddLaunch l;
  const LaunchTolerance tol = launch_tolerance(l.k, 0, 0);
  CHECK(check_against_interpreter(l.k, l.args, l.grid, tol,
                                  [&] { test::runtime().launch(l.spec, l.bound); }) == "");
  CHECK(l.z[99] == 3.5f);
  // A "compiled" result one element off beyond the tolerance.
  std::string why = check_against_interpreter(l.k, l.args, l.grid, tol, [&] {
    test::runtime().launch(l.spec, l.bound);
    l.z[37] += 1e-3f;
  });
  CHECK_THAT(why, Catch::Contains("kernel 'add', buffer 'z'[37]: compiled 3.501") &&
                      Catch::Contains("interpreter 3.5"));
  // Within it.
  CHECK(check_against_interpreter(l.k, l.args, l.grid, tol, [&] {
          test::runtime().launch(l.spec, l.bound);
          l.z[37] += 1e-5f;
        }) == "");
}

TEST_CASE("launch tolerances widen for f16 and bf16 buffers", "[runtime][check]") {
  const Kernel f32 = build_kernel(find_kernel("add").make_spec());
  const Kernel f16 = build_kernel(find_kernel("add").make_spec({{"T", DType::f16}}));
  CHECK(launch_tolerance(f32, 0, 0).rtol == 1e-4);
  CHECK(launch_tolerance(f32, 0, 0).atol == 1e-5);
  CHECK(launch_tolerance(f32, 3e-3, 2e-4).rtol == 3e-3);
  CHECK(launch_tolerance(f32, 3e-3, 2e-4).atol == 2e-4);
  CHECK(launch_tolerance(f16, 0, 0).rtol == 1e-4 + 0x1p-10);
}

TEST_CASE("a runtime in check mode runs plans checked", "[runtime][check]") {
  Runtime rt(RuntimeOptions{1, test::cache_dir(), false, "cpu", true});
  CHECK(rt.checking());
  AddLaunch l;
  Plan plan(rt);
  plan.launch("add", "add", {},
              {{"x", l.args[0]}, {"y", l.args[1]}, {"z", l.args[2]}, {"n", l.args[3]}});
  plan.run(rt);
  CHECK(l.z[0] == 3.5f);
}
