// The compile cache: what the key holds, warm loads without codegen, and
// corrupt or unusable cache directories.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "ir/error.h"
#include "runtime/compile_key.h"
#include "runtime/runtime.h"
#include "support/test_data.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kiln-test-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  return p.string();
}

std::string only_entry(const std::string& root) {
  for (const auto& f : fs::directory_iterator(fs::path(root) / "cpu-v1"))
    if (f.path().extension() == ".kobj") return f.path().string();
  return "";
}

// Runs add on 100 elements and returns z.
std::vector<float> run_add(Runtime& rt, const Spec& spec) {
  std::vector<float> x(100, 1.5f), y(100, 2.0f), z(100, 0.0f);
  rt.launch(spec, {Arg::buffer(x.data(), 100), Arg::buffer(y.data(), 100),
                   Arg::buffer(z.data(), 100), Arg::scalar_int(100)});
  return z;
}

}  // namespace

TEST_CASE("compile keys cover what changes code and nothing else", "[runtime][cache]") {
  const KernelDef& add = find_kernel("add");
  CpuTarget host = host_cpu_target();
  auto digest = [&](const Spec& s, const CpuTarget& t) {
    return make_compile_key(build_kernel(s), t).digest();
  };
  std::string base = digest(add.make_spec(), host);
  CHECK(base.size() == 64);
  CHECK(digest(add.make_spec(), host) == base);
  CHECK(digest(add.make_spec({{"T", DType::f16}}), host) != base);
  CHECK(digest(add.make_spec({}, {{"BLOCK", 512}}), host) != base);
  CHECK(digest(add.make_spec(), named_cpu_target("x86-64-v3")) != base);
  CompileKey k = make_compile_key(build_kernel(add.make_spec()), host);
  CHECK_THAT(k.canonical(), Catch::Contains("param x f32"));
  CHECK_THAT(k.canonical(), Catch::Contains("constexpr BLOCK 1024"));
  CHECK_THAT(k.canonical(), Catch::Contains("llvm 19."));
  CHECK(k.kiln_version.find('+') != std::string::npos);
}

TEST_CASE("a warm runtime loads kernels from disk and computes the same", "[runtime][cache]") {
  std::string dir = temp_dir("warm");
  Spec spec = find_kernel("add").make_spec();
  std::vector<float> cold_z, warm_z;
  {
    Runtime cold(RuntimeOptions{1, dir, false});
    CHECK_FALSE(cold.compile(spec).from_disk);
    cold_z = run_add(cold, spec);
    CHECK(cold.cache().misses == 1);
  }
  {
    Runtime warm(RuntimeOptions{1, dir, false});
    CHECK(warm.compile(spec).from_disk);
    warm_z = run_add(warm, spec);
    CHECK(warm.cache().hits == 1);
  }
  CHECK(cold_z == warm_z);
  CHECK(cold_z[99] == 3.5f);
  fs::remove_all(dir);
}

TEST_CASE("truncated or corrupt entries are detected, recompiled and replaced",
          "[runtime][cache][error]") {
  std::string dir = temp_dir("corrupt");
  Spec spec = find_kernel("add").make_spec();
  { Runtime(RuntimeOptions{1, dir, false}).compile(spec); }
  std::string entry = only_entry(dir);
  REQUIRE_FALSE(entry.empty());
  auto size = fs::file_size(entry);
  for (int mode = 0; mode < 3; ++mode) {
    INFO("mode " << mode);
    if (mode == 0) fs::resize_file(entry, size / 2);  // truncated
    if (mode == 1) {                                  // one flipped payload byte
      std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size - 10));
      f.put('\x5a');
    }
    if (mode == 2) std::ofstream(entry, std::ios::trunc) << "garbage";
    Runtime rt(RuntimeOptions{1, dir, false});
    const CompiledKernel& c = rt.compile(spec);
    CHECK_FALSE(c.from_disk);
    CHECK(rt.cache().corrupt == 1);
    CHECK(run_add(rt, spec)[0] == 3.5f);
    CHECK(fs::file_size(entry) == size);  // replaced by a good entry
    Runtime again(RuntimeOptions{1, dir, false});
    CHECK(again.compile(spec).from_disk);
  }
  fs::remove_all(dir);
}

TEST_CASE("an unusable cache directory falls back to memory", "[runtime][cache][error]") {
  std::string file = temp_dir("notadir");
  std::ofstream(file) << "I am a file";
  Runtime rt(RuntimeOptions{1, file, false});
  CHECK_FALSE(rt.cache().persistent());
  Spec spec = find_kernel("add").make_spec();
  CHECK(run_add(rt, spec)[5] == 3.5f);
  fs::remove(file);
}

TEST_CASE("cache list and clear see every entry", "[runtime][cache]") {
  std::string dir = temp_dir("list");
  {
    Runtime rt(RuntimeOptions{1, dir, false});
    rt.compile(find_kernel("add").make_spec());
    rt.compile(find_kernel("softmax").make_spec());
  }
  CompileCache cache(dir);
  auto entries = cache.list();
  REQUIRE(entries.size() == 2);
  for (const auto& e : entries) CHECK(e.valid);
  CHECK(cache.clear() == 2);
  CHECK(cache.list().empty());
  fs::remove_all(dir);
}
