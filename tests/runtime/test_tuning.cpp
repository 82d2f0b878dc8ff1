// The tuning database (TOML, checked against declared tunables), tuned
// dispatch, and the tuner's search, verification and restoring of inputs.
#include <catch2/catch.hpp>
#include <filesystem>

#include "ir/builder.h"
#include "ir/error.h"
#include "runtime/cold_copies.h"
#include "runtime/tuner.h"
#include "support/test_data.h"

using namespace kiln;

namespace {

// A kernel made for testing the tuner: y += x in place (so inputs must be
// restored between candidates), wrong when BLOCK == 128, unbuildable when
// BLOCK == 48 (not a divisor the kernel accepts).
Kernel build_tune_probe(const Spec& s) {
  KernelBuilder k("tune_probe", s);
  const int64_t B = s.constexpr_("BLOCK");
  if (B == 48) throw Error("kernel 'tune_probe': BLOCK 48 is not supported");
  auto x = k.buffer("x", DType::f32), y = k.buffer("y", DType::f32);
  auto n = k.scalar("n", DType::i32);
  auto offs = k.program_id(0) * static_cast<int>(B) + arange(B);
  auto m = offs < n;
  auto v = load(y + offs, m, 0.0) + load(x + offs, m, 0.0) * (B == 128 ? 2.0 : 1.0);
  store(y + offs, v, m);
  return k.finish();
}

const bool registered = register_kernel((KernelDef{
    .name = "tune_probe",
    .family = "test",
    .summary = "y += x, for tuner tests",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCK", 16}},
    .build = build_tune_probe,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t n = a.i("n");
          return LaunchShape{{cdiv(n, s.constexpr_("BLOCK")), 1, 1}, {{"x", n}, {"y", n}}};
        },
    .tunables = {{"BLOCK", {16, 32, 48, 64, 128}}},
    .shape_keys = {"n"},
}));

}  // namespace

TEST_CASE("tuning files: entries, buckets, overrides", "[runtime][tuning]") {
  TuningDb db;
  db.load_text(R"(
[[gemv]]
dtypes = { W = "f16" }
bucket = { m = 4096, k = 16384 }
BLOCK_M = 2
BLOCK_K = 128
)",
               "a.toml");
  CHECK(db.warnings().empty());
  TuningKey key{"gemv", {{"W", DType::f16}, {"X", DType::f32}}, {{"m", 4096}, {"k", 16384}}};
  auto hit = db.find(key);
  REQUIRE(hit);
  CHECK(hit->at("BLOCK_M") == 2);
  db.load_text(
      "[[gemv]]\ndtypes = { W = \"f16\" }\nbucket = { m = 4096, k = 16384 }\nBLOCK_M = 8\n",
      "user.toml");
  CHECK(db.find(key)->at("BLOCK_M") == 8);  // later files override
  // A bucket naming only k serves every m at that k; a whole bucket beats
  // it, and it beats the entry without a bucket.
  db.load_text(R"([[gemv]]
dtypes = { W = "f16" }
bucket = { k = 16384 }
BLOCK_M = 1
BLOCK_K = 64

[[gemv]]
dtypes = { W = "f16" }
BLOCK_M = 16
)",
               "partial.toml");
  CHECK(db.warnings().empty());
  CHECK(db.find(key)->at("BLOCK_M") == 8);
  TuningKey other_m = key;
  other_m.bucket["m"] = 1024;
  CHECK(db.find(other_m)->at("BLOCK_M") == 1);
  CHECK(db.find(other_m)->at("BLOCK_K") == 64);
  TuningKey other_k = key;
  other_k.bucket["k"] = 4096;
  CHECK(db.find(other_k)->at("BLOCK_M") == 16);
  ScalarArgs sizes;
  sizes.set_int("m", 4000);
  sizes.set_int("k", 14336);
  CHECK(shape_bucket(find_kernel("gemv"), sizes) ==
        std::map<std::string, int64_t>{{"k", 16384}, {"m", 4096}});
}

TEST_CASE("an entry with cpus applies on those CPU models only, and wins their ties",
          "[runtime][tuning]") {
  const std::string text = R"([[gemv]]
dtypes = { W = "f16" }
bucket = { k = 4096 }
BLOCK_M = 4

[[gemv]]
dtypes = { W = "f16" }
bucket = { k = 4096 }
cpus = ["znver5", "znver4"]
BLOCK_M = 1

[[gemv]]
dtypes = { W = "f16" }
bucket = { m = 2048, k = 4096 }
BLOCK_M = 8
)";
  TuningKey key{"gemv", {{"W", DType::f16}, {"X", DType::f32}}, {{"m", 1024}, {"k", 4096}}};
  TuningKey whole = key;
  whole.bucket["m"] = 2048;
  for (const char* cpu : {"znver4", "znver5", "sapphirerapids", ""}) {
    INFO("cpu '" << cpu << "'");
    TuningDb db(cpu);
    db.load_text(text, "cpus.toml");
    CHECK(db.warnings().empty());
    const bool listed = std::string(cpu).rfind("znver", 0) == 0;
    CHECK(db.find(key)->at("BLOCK_M") == (listed ? 1 : 4));
    CHECK(db.find(whole)->at("BLOCK_M") == 8);  // naming more sizes still wins
    // Written back with the restriction, so a merge keeps other machines' entries.
    TuningDb again(cpu);
    again.load_text(db.to_toml(), "written.toml");
    CHECK(again.warnings().empty());
    CHECK(again.size() == 3);
    CHECK(again.find(key)->at("BLOCK_M") == (listed ? 1 : 4));
  }
  TuningDb bad("znver5");
  bad.load_text(R"([[gemv]]
dtypes = { W = "f16" }
cpus = []
BLOCK_M = 1

[[gemv]]
dtypes = { W = "f16" }
cpus = ["znver5", 5]
BLOCK_M = 1
)",
                "badcpus.toml");
  REQUIRE(bad.warnings().size() == 2);
  CHECK_THAT(bad.warnings()[0], Catch::Contains("badcpus.toml:1: gemv entry: cpus lists no CPU"));
  CHECK_THAT(bad.warnings()[1], Catch::Contains("badcpus.toml:6: gemv entry: cpus must list"));
  CHECK(bad.size() == 0);
}

TEST_CASE("malformed or out-of-range entries warn with file and line, then are ignored",
          "[runtime][tuning][error]") {
  TuningDb db;
  db.load_text("[[gemv]\nBLOCK_M = ", "broken.toml");
  REQUIRE(db.warnings().size() == 1);
  CHECK_THAT(db.warnings()[0], Catch::StartsWith("broken.toml:1: malformed tuning file"));

  TuningDb db2;
  db2.load_text(R"([[gemv]]
dtypes = { W = "f16" }
bucket = { m = 64, k = 64 }
BLOCK_M = 3

[[gemv]]
dtypes = { W = "q9" }
bucket = { m = 64, k = 64 }
BLOCK_M = 2

[[nope]]
BLOCK = 1

[[gemv]]
bucket = { m = 64, k = 64 }
BLOCK_Q = 2

[[gemv]]
bucket = { n = 64 }
BLOCK_M = 2
)",
                "bad.toml");
  REQUIRE(db2.warnings().size() == 5);
  CHECK_THAT(db2.warnings()[0],
             Catch::StartsWith("bad.toml:1: gemv entry: BLOCK_M = 3 is outside"));
  CHECK_THAT(db2.warnings()[1], Catch::Contains("bad.toml:6:"));
  CHECK_THAT(db2.warnings()[2], Catch::StartsWith("bad.toml:11: unknown kernel 'nope'"));
  CHECK_THAT(db2.warnings()[3],
             Catch::Contains("bad.toml:14: gemv entry: 'BLOCK_Q' is not a tunable"));
  CHECK_THAT(
      db2.warnings()[4],
      Catch::Contains("bad.toml:18: gemv entry: bucket size 'n' is not a shape key of gemv"));
  CHECK(db2.size() == 0);
}

TEST_CASE("dispatch takes tuned constexprs by bucket, else the target's default, else the kernel's",
          "[runtime][tuning]") {
  Runtime rt(RuntimeOptions{1, "", false});
  rt.tuning().set(
      TuningKey{"gemv", {{"W", DType::f16}, {"X", DType::f32}}, {{"m", 128}, {"k", 256}}},
      {{"BLOCK_M", 2}, {"BLOCK_K", 32}});
  kiln::test::HostBuffer w(DType::f16, 100 * 200), x(DType::f32, 200), y(DType::f32, 100);
  const LaunchArgs args = {{"w", w}, {"x", x}, {"y", y}, {"m", int64_t{100}}, {"k", int64_t{200}}};
  Spec tuned = rt.select("gemv", {{"W", DType::f16}}, args);
  CHECK(tuned.constexprs.at("BLOCK_M") == 2);
  const LaunchArgs other = {{"w", w}, {"x", x}, {"y", y}, {"m", int64_t{10}}, {"k", int64_t{200}}};
  CHECK(rt.select("gemv", {{"W", DType::f16}}, other).constexprs.at("BLOCK_M") == 4);
  // An entry without a bucket serves every other shape.
  rt.tuning().set(TuningKey{"gemv", {{"W", DType::f16}, {"X", DType::f32}}, {}},
                  {{"BLOCK_M", 16}, {"BLOCK_K", 64}});
  CHECK(rt.select("gemv", {{"W", DType::f16}}, other).constexprs.at("BLOCK_M") == 16);
  CHECK(rt.select("gemv", {{"W", DType::f16}}, args).constexprs.at("BLOCK_M") == 2);
  rt.call("gemv", {{"W", DType::f16}}, args);
}

TEST_CASE("the tuner restores inputs, rejects wrong and broken candidates, and records",
          "[runtime][tuning]") {
  Runtime rt(RuntimeOptions{1, "", false});
  TuneOptions o;
  o.shape = {{"n", 1000}};
  o.budget_s = 30;
  o.reps = 3;
  TuneResult r = tune(rt, "tune_probe", o);
  std::map<int64_t, std::string> status;
  for (const TuneTrial& t : r.trials) status[t.constexprs.at("BLOCK")] = t.status;
  CHECK(r.heuristic.constexprs.at("BLOCK") == 16);
  CHECK(status.at(16) == "ok");  // only passes if y was restored before each check
  CHECK(status.at(32) == "ok");
  CHECK_THAT(status.at(48), Catch::Contains("rejected: kernel 'tune_probe': BLOCK 48"));
  CHECK_THAT(status.at(128), Catch::StartsWith("wrong result: y["));
  CHECK(r.best.status == "ok");
  CHECK(r.best.constexprs.at("BLOCK") != 48);
  CHECK(r.best.constexprs.at("BLOCK") != 128);
  CHECK(r.key.bucket.at("n") == 1024);
  // Recorded for the CPU model it was measured on.
  const std::string cpu = rt.backend().tuning_cpu();
  CHECK(r.key.cpus == (cpu.empty() ? std::vector<std::string>{} : std::vector{cpu}));

  std::string path =
      (std::filesystem::temp_directory_path() / ("kiln-tune-" + std::to_string(getpid()) + ".toml"))
          .string();
  TuningDb db;
  db.set(r.key, r.best.constexprs);
  db.save_to(path);
  TuningDb back(cpu);
  back.load_file(path);
  CHECK(back.warnings().empty());
  CHECK(back.find(r.key) == r.best.constexprs);
  std::filesystem::remove(path);
}

TEST_CASE("the tuner times cold copies of its buffers unless told warm", "[runtime][tuning]") {
  Runtime rt(RuntimeOptions{1, "", false});
  TuneOptions o;
  o.shape = {{"n", 1 << 18}};  // x and y of 1 MiB each
  o.budget_s = 30;
  o.reps = 3;
  TuneResult cold = tune(rt, "tune_probe", o);
  CHECK(cold.copies == static_cast<size_t>(kColdTotalBytes / (2 << 20)));
  // The candidates are still checked on the original buffers.
  CHECK(cold.heuristic.status == "ok");
  CHECK(cold.best.status == "ok");
  o.warm = true;
  TuneResult warm = tune(rt, "tune_probe", o);
  CHECK(warm.copies == 1);
  CHECK(warm.best.status == "ok");
  // Small buffers too, the largest and those as large (x and y, 4000 bytes
  // each): a forward reads a small matrix from DRAM as well.
  o.warm = false;
  o.shape = {{"n", 1000}};
  CHECK(tune(rt, "tune_probe", o).copies == static_cast<size_t>((kColdTotalBytes + 7999) / 8000));
}

TEST_CASE("the shipped tuning databases are valid", "[runtime][tuning]") {
  for (const char* cls : {"x86-64-v4"}) {
    INFO(cls);
    TuningDb db;
    db.load_text(default_tuning_text(cls), cls);
    CHECK(db.warnings().empty());
    CHECK(db.size() > 0);
  }
  // The measured defaults of x86-64-v4 for every shape.
  TuningDb db;
  db.load_text(default_tuning_text("x86-64-v4"), "x86-64-v4");
  auto gemv =
      db.find({"gemv", {{"W", DType::bf16}, {"X", DType::f32}}, {{"m", 2048}, {"k", 16384}}});
  REQUIRE(gemv);
  CHECK(gemv->at("BLOCK_M") == 4);
  CHECK(gemv->at("BLOCK_K") == 64);
  // Short rows, whatever m: on Zen 5 one row per program (a bucket naming
  // only k), elsewhere the 4 rows of every shape.
  TuningDb zen5("znver5");
  zen5.load_text(default_tuning_text("x86-64-v4"), "x86-64-v4");
  for (int64_t m : {256, 2048, 16384})
    for (DType w : {DType::bf16, DType::f16}) {
      TuningKey key{"gemv", {{"W", w}, {"X", DType::f32}}, {{"m", m}, {"k", 2048}}};
      REQUIRE(zen5.find(key));
      CHECK(zen5.find(key)->at("BLOCK_M") == 1);
      REQUIRE(db.find(key));
      CHECK(db.find(key)->at("BLOCK_M") == 4);
    }
}

TEST_CASE("non-tunable constexprs key separate tuning variants", "[runtime][tuning]") {
  TuningDb db;
  db.load_text(R"([[qgemv]]
bucket = { m = 64, k = 64, t = 1 }
variant = { FMT = 2 }
BLOCK_M = 2
)",
               "v.toml");
  REQUIRE(db.warnings().empty());
  Runtime rt(RuntimeOptions{1, "", false});
  rt.tuning() = db;
  std::vector<uint8_t> w(64 * 2 * 34);
  std::vector<int8_t> xq(64);
  std::vector<float> xd(2), y(64);
  std::vector<int32_t> xs(2);
  const LaunchArgs args = {{"w", w}, {"xq", xq},         {"xd", xd},         {"xs", xs},
                           {"y", y}, {"m", int64_t{64}}, {"k", int64_t{64}}, {"t", int64_t{1}}};
  CHECK(rt.select("qgemv", {}, args, {{"FMT", 2}}).constexprs.at("BLOCK_M") == 2);
  // No entry for FMT 8: the kernel's heuristic (one row for Q8_0 decode).
  CHECK(rt.select("qgemv", {}, args, {{"FMT", 8}}).constexprs.at("BLOCK_M") == 1);
  CHECK_THAT(TuningDb().to_toml(), Catch::Contains("written by `kiln tune`"));
  CHECK_THAT(db.to_toml(), Catch::Contains("variant = { FMT = 2 }"));
}

TEST_CASE("the tuner's heuristic trial is what dispatch picks without an entry",
          "[runtime][tuning]") {
  Runtime rt(RuntimeOptions{1, "", false});
  rt.tuning() = TuningDb();
  TuneOptions o;
  o.fixed = {{"FMT", 12}};
  o.shape = {{"m", 32}, {"k", 256}, {"t", 16}};
  o.budget_s = 0.5;
  o.reps = 3;
  TuneResult r = tune(rt, "qgemv_rows16", o);
  // Dispatch's choice for 16 tokens (qgemv_rows16's shape heuristic:
  // 6 for Q4_K), not the constexpr default (1).
  CHECK(r.heuristic.constexprs.at("BLOCK_T") == 6);
  CHECK(r.heuristic.status == "ok");
}
