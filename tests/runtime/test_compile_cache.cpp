// The compile cache: what the key holds, warm loads without codegen (and,
// found by spec, without building the IR), and corrupt or unusable cache
// directories.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "ir/error.h"
#include "ir/printer.h"
#include "runtime/compile_key.h"
#include "runtime/cpu/cpu_policy.h"
#include "runtime/plan.h"
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
  rt.launch(spec, {{"x", x}, {"y", y}, {"z", z}, {"n", int64_t{100}}});
  return z;
}

}  // namespace

// A backend that only names itself: what a compile key reads of one.
struct NamedBackend : Backend {
  std::string name_, target_, codegen_;
  NamedBackend(std::string n, std::string t, std::string c)
      : name_(std::move(n)), target_(std::move(t)), codegen_(std::move(c)) {}
  std::string name() const override { return name_; }
  std::string target() const override { return target_; }
  std::string codegen_version() const override { return codegen_; }
  std::string tuning_class() const override { return target_; }
  TargetDesc target_desc() const override { return {}; }
  const KernelPolicy& policy() const override { return cpu_kernel_policy(); }
  bool host_visible() const override { return true; }
  std::unique_ptr<Program> compile(const Kernel&, const std::string&, CompileCache&) override {
    return nullptr;
  }
  std::unique_ptr<BoundLaunch> bind(const Program&, const Kernel&, const std::vector<Arg>&,
                                    const Grid&, int64_t) override {
    return nullptr;
  }
  void* alloc(size_t) override { return nullptr; }
  void free(void*) override {}
  void upload(void*, const void*, size_t) override {}
  void download(void*, const void*, size_t) override {}
};

TEST_CASE("compile keys cover what changes code and nothing else", "[runtime][cache]") {
  const KernelDef& add = find_kernel("add");
  NamedBackend cpu("cpu", "x86_64 znver4 +avx512f", "llvm 19, kiln 0.1.0+aaaa");
  auto digest = [&](const Spec& s, const Backend& b) {
    return make_compile_key(build_kernel(s), b).digest();
  };
  std::string base = digest(add.make_spec(), cpu);
  CHECK(base.size() == 64);
  CHECK(digest(add.make_spec(), cpu) == base);
  CHECK(digest(add.make_spec({{"T", DType::f16}}), cpu) != base);
  CHECK(digest(add.make_spec({}, {{"BLOCK", 512}}), cpu) != base);
  CHECK(digest(add.make_spec(), NamedBackend("cpu", "x86_64 haswell +avx2", cpu.codegen_)) != base);
  CHECK(digest(add.make_spec(), NamedBackend("cpu", cpu.target_, "llvm 19, kiln 0.1.0+bbbb")) !=
        base);
  CHECK(digest(add.make_spec(), NamedBackend("cuda-sim", cpu.target_, cpu.codegen_)) != base);
  CompileKey k = make_compile_key(build_kernel(add.make_spec()), cpu);
  CHECK_THAT(k.canonical(), Catch::Contains("param x f32"));
  CHECK_THAT(k.canonical(), Catch::Contains("constexpr BLOCK 1024"));
  CHECK_THAT(k.canonical(), Catch::Contains("backend cpu"));
}

TEST_CASE("each backend's key names its own code generator only", "[runtime][cache]") {
  ThreadPool pool(1);
  auto cpu = make_backend("cpu", pool);
  auto sim = make_backend("cuda-sim", pool);
  CHECK_THAT(cpu->codegen_version(), Catch::Contains("llvm 19."));
  CHECK_THAT(sim->codegen_version(), Catch::Contains("host compiler"));
  // "kiln VERSION+FINGERPRINT": the CPU's fingerprint hashes codegen/cpu,
  // targets/cpu and runtime/cpu only, the CUDA backends' the cuda folders.
  auto fingerprint = [](const std::string& v) { return v.substr(v.rfind('+') + 1); };
  CHECK(fingerprint(cpu->codegen_version()).size() == 16);
  CHECK(fingerprint(cpu->codegen_version()) != fingerprint(sim->codegen_version()));
}

TEST_CASE("an unknown backend is named with the known ones", "[runtime][error]") {
  ThreadPool pool(1);
  REQUIRE_THROWS_WITH(make_backend("tpu", pool),
                      Catch::Contains("unknown backend 'tpu'") && Catch::Contains("cuda-sim"));
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

TEST_CASE("a warm runtime finds a spec's program without building its IR", "[runtime][cache]") {
  std::string dir = temp_dir("by-spec");
  Spec spec = find_kernel("add").make_spec();
  std::string cold_digest;
  {
    Runtime cold(RuntimeOptions{1, dir, false});
    const CompiledKernel& c = cold.compile(spec);
    CHECK(c.has_body);
    CHECK_FALSE(c.from_disk);
    cold_digest = c.digest;
  }
  Runtime warm(RuntimeOptions{1, dir, false});
  const CompiledKernel& c = warm.compile(spec);
  CHECK(c.from_disk);
  CHECK_FALSE(c.has_body);
  CHECK(c.digest == cold_digest);
  const Kernel built = build_kernel(spec);
  REQUIRE(c.kernel.params.size() == built.params.size());
  for (size_t i = 0; i < built.params.size(); ++i) {
    CHECK(c.kernel.params[i].name == built.params[i].name);
    CHECK(c.kernel.params[i].dtype == built.params[i].dtype);
  }
  CHECK(run_add(warm, spec)[42] == 3.5f);
  // The interpreter gets the body, built on demand.
  CHECK(print_kernel(warm.full_kernel(c)) == print_kernel(built));
  std::vector<float> x(100, 1.5f), y(100, 2.0f), z(100, 0.0f);
  Plan plan(warm);
  plan.launch("add", "add", {},
              {{"x", Arg::buffer(x.data(), 100)},
               {"y", Arg::buffer(y.data(), 100)},
               {"z", Arg::buffer(z.data(), 100)},
               {"n", Arg::scalar_int(100)}});
  plan.run(warm, /*interpret=*/true);
  CHECK(z[99] == 3.5f);
  // Another spec, another key: built and compiled.
  CHECK(warm.compile(find_kernel("add").make_spec({}, {{"BLOCK", 512}})).has_body);
  fs::remove_all(dir);
}

TEST_CASE("spec index keys name the spec, the backend and its code generator", "[runtime][cache]") {
  NamedBackend cpu("cpu", "x86_64 znver4 +avx512f", "llvm 19, kiln 0.1.0+aaaa");
  const Spec spec = find_kernel("add").make_spec();
  const std::string base = spec_index_key(spec, cpu);
  CHECK(base.size() == 64);
  CHECK(spec_index_key(spec, cpu) == base);
  CHECK(spec_index_key(find_kernel("add").make_spec({{"T", DType::f16}}), cpu) != base);
  CHECK(spec_index_key(find_kernel("add").make_spec({}, {{"BLOCK", 512}}), cpu) != base);
  CHECK(spec_index_key(spec, NamedBackend("cpu", "x86_64 haswell +avx2", cpu.codegen_)) != base);
  CHECK(spec_index_key(spec, NamedBackend("cpu", cpu.target_, "llvm 19, kiln 0.1.0+bbbb")) != base);
  CHECK(spec_index_key(spec, NamedBackend("cuda-sim", cpu.target_, cpu.codegen_)) != base);
}

TEST_CASE("a malformed or dangling spec entry falls back to building the IR",
          "[runtime][cache][error]") {
  std::string dir = temp_dir("bad-spec");
  Spec spec = find_kernel("add").make_spec();
  { Runtime(RuntimeOptions{1, dir, false}).compile(spec); }
  std::string index;
  for (const auto& f : fs::directory_iterator(fs::path(dir) / "cpu-v1"))
    if (f.path().extension() == ".kspec") index = f.path().string();
  REQUIRE_FALSE(index.empty());
  const std::string good = [&] {
    std::ifstream in(index);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const std::string dangling = "KILN-SPEC 1\ndigest " + std::string(64, 'a') + "\n";
  std::string upper = good;
  for (size_t i = upper.size() - 65; i < upper.size() - 1; ++i)
    upper[i] = static_cast<char>(std::toupper(upper[i]));
  for (const std::string& bad : {std::string("garbage"), dangling, upper, good.substr(0, 40)}) {
    INFO(bad);
    std::ofstream(index, std::ios::trunc) << bad;
    Runtime rt(RuntimeOptions{1, dir, false});
    const CompiledKernel& c = rt.compile(spec);
    CHECK(c.has_body);   // the IR was built
    CHECK(c.from_disk);  // and its object found by the IR's digest
    CHECK(rt.cache().corrupt == 0);
    CHECK(run_add(rt, spec)[0] == 3.5f);
    Runtime again(RuntimeOptions{1, dir, false});  // the entry was rewritten
    CHECK_FALSE(again.compile(spec).has_body);
  }
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
  CHECK(fs::is_empty(fs::path(dir) / "cpu-v1"));  // the spec entries went too
  fs::remove_all(dir);
}
