// Compiling many kernels at once (Runtime::compile_all, Plan::compile): the
// same programs as one at a time, failures reported after the rest are
// done, and plans that compile when recorded or first run.
#include <catch2/catch.hpp>
#include <filesystem>

#include "ir/error.h"
#include "runtime/plan.h"
#include "runtime/runtime.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;
namespace fs = std::filesystem;

namespace {

// add's specs over dtypes and block sizes: distinct kernels, one program each.
std::vector<Spec> add_specs() {
  std::vector<Spec> specs;
  for (int64_t block : {64, 128, 256, 512})
    for (DType t : {DType::f32, DType::i32})
      specs.push_back(find_kernel("add").make_spec({{"T", t}}, {{"BLOCK", block}}));
  return specs;
}

// z = x + y over 300 elements of the spec's dtype, read back as doubles.
std::vector<double> run_add(Runtime& rt, const Spec& spec) {
  const DType t = spec.dtypes.at("T");
  HostBuffer x(t, 300), y(t, 300), z(t, 300);
  for (int64_t i = 0; i < 300; ++i) x.set(i, i), y.set(i, 2 * i + 1);
  rt.launch(spec, {{"x", x}, {"y", y}, {"z", z}, {"n", int64_t{300}}});
  std::vector<double> out;
  for (int64_t i = 0; i < 300; ++i) out.push_back(z.get(i));
  return out;
}

}  // namespace

TEST_CASE("compile_all compiles each distinct spec once, as compile would", "[runtime]") {
  fs::path dir = fs::temp_directory_path() / ("kiln-test-compile-all-" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::vector<Spec> specs = add_specs();
  std::vector<Spec> with_repeats = specs;
  with_repeats.insert(with_repeats.end(), specs.begin(), specs.begin() + 3);
  {
    Runtime rt(RuntimeOptions{2, dir.string(), false});
    rt.compile_all(with_repeats);
    CHECK(rt.compile_stats().kernels == static_cast<int64_t>(specs.size()));
    CHECK(rt.cache().misses == static_cast<int>(specs.size()));
    for (const Spec& s : specs) {
      INFO(s.str());
      std::vector<double> z = run_add(rt, s);
      CHECK(z[0] == 1);
      CHECK(z[299] == 299 + 599);
    }
    rt.compile_all(specs);  // nothing left to do
    CHECK(rt.compile_stats().kernels == static_cast<int64_t>(specs.size()));
  }
  // Every object reached the disk cache whole.
  Runtime warm(RuntimeOptions{2, dir.string(), false});
  warm.compile_all(specs);
  CHECK(warm.cache().hits == static_cast<int>(specs.size()));
  CHECK(warm.cache().corrupt == 0);
  fs::remove_all(dir);
}

TEST_CASE("compile_all throws the first failure after compiling the rest", "[runtime][error]") {
  Runtime rt(RuntimeOptions{2, "", false});
  std::vector<Spec> specs = add_specs();
  Spec unknown = specs[0];
  unknown.kernel = "no_such_kernel";
  specs.insert(specs.begin() + 2, unknown);
  REQUIRE_THROWS_WITH(rt.compile_all(specs), Catch::Contains("no_such_kernel"));
  CHECK(rt.compile_stats().kernels == static_cast<int64_t>(specs.size()) - 1);
}

TEST_CASE("a plan compiles its launches together, before its first replay", "[runtime]") {
  Runtime rt(RuntimeOptions{2, "", false});
  const int64_t n = 300;
  HostBuffer x(DType::f32, n), y(DType::f32, n), z(DType::f32, n), w(DType::f32, n);
  for (int64_t i = 0; i < n; ++i) x.set(i, i), y.set(i, 0.5);
  Plan p(rt);
  for (int64_t block : {64, 128, 256}) {
    // w = (x + y) + y three times over, through z.
    p.launch("add", "add", {{"T", DType::f32}},
             {{"x", x.arg()}, {"y", y.arg()}, {"z", z.arg()}, {"n", Arg::scalar_int(n)}}, {},
             {{"BLOCK", block}});
    p.launch("again", "add", {{"T", DType::f32}},
             {{"x", z.arg()}, {"y", y.arg()}, {"z", w.arg()}, {"n", Arg::scalar_int(n)}}, {},
             {{"BLOCK", block}});
  }
  CHECK(rt.compile_stats().kernels == 0);
  CHECK(p.kernel_launches() == 6);
  p.run(rt);
  CHECK(rt.compile_stats().kernels == 3);
  CHECK(w.get(0) == 1.0);
  CHECK(w.get(n - 1) == n);
}
