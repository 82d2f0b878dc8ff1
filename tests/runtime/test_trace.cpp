// Traces (runtime/trace.h): a plan's replays add one span per launch and
// copy with the launch's kernel, label, spec, grid and bytes; spans nest on
// their thread; the profile table is the spans summed per label; the file
// is Trace Event Format JSON (checked against a schema by
// tests/tools/trace.py, which also runs kiln run and kiln serve with it).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/plan.h"
#include "runtime/trace.h"
#include "support/runtime_fixture.h"

using namespace kiln;

TEST_CASE("a traced plan adds a span per launch and copy, and the profile sums them",
          "[runtime][trace]") {
  Runtime& rt = test::runtime();
  std::vector<float> x(100, 1.5f), y(100, 2.0f), z(100, 0.0f), host(100, 0.0f);
  Plan plan(rt);
  const Plan::Args args = {{"x", Arg::buffer(x.data(), 100)},
                           {"y", Arg::buffer(y.data(), 100)},
                           {"z", Arg::buffer(z.data(), 100)},
                           {"n", Arg::scalar_int(100)}};
  plan.launch("first.add", "add", {}, args);
  plan.launch("second.add", "add", {}, args);
  plan.download("out", host.data(), z.data(), 100 * sizeof(float));
  Trace trace;
  plan.run(rt);  // untraced: nothing recorded
  CHECK(trace.size() == 0);
  plan.trace(&trace);
  {
    TraceScope outer(&trace, "forward", "forward", {{"tokens", int64_t{1}}});
    for (int i = 0; i < 3; ++i) plan.run(rt);
  }
  const std::vector<Trace::Event> events = trace.events();
  REQUIRE(events.size() == 3 * 3 + 1);
  const Trace::Event& fwd = events.back();  // ends last
  CHECK(fwd.name == "forward");
  CHECK(std::get<int64_t>(*fwd.arg("tokens")) == 1);
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Trace::Event& e = events[i];
    INFO(i << " " << e.name);
    CHECK(e.tid == fwd.tid);
    CHECK(e.ts_ns >= fwd.ts_ns);
    CHECK(e.ts_ns + e.dur_ns <= fwd.ts_ns + fwd.dur_ns);
    CHECK(e.dur_ns >= 0);
    if (i > 0) CHECK(e.ts_ns >= events[i - 1].ts_ns + events[i - 1].dur_ns);  // in order
    if (i % 3 == 2) {
      CHECK(e.name == "download");
      CHECK(e.cat == "copy");
      CHECK(std::get<int64_t>(*e.arg("bytes")) == 400);
      continue;
    }
    CHECK(e.name == "add");
    CHECK(e.cat == "kernel");
    CHECK(std::get<std::string>(*e.arg("label")) == (i % 3 == 0 ? "first.add" : "second.add"));
    CHECK(std::get<std::string>(*e.arg("spec")).rfind("add", 0) == 0);
    CHECK(std::get<int64_t>(*e.arg("bytes")) == 1200);  // x, y and z
    CHECK_FALSE(std::get<std::string>(*e.arg("grid")).empty());
  }
  // The profile: per label, the spans' time and count.
  const std::vector<ProfileRow> rows = profile_rows(events);
  REQUIRE(rows.size() == 3);
  double sum = 0;
  for (const ProfileRow& r : rows) {
    CHECK(r.calls == 3);
    double want = 0;
    for (const Trace::Event& e : events)
      if (e.arg("label") && std::get<std::string>(*e.arg("label")) == r.label)
        want += e.dur_ns / 1e6;
    CHECK(r.ms == Approx(want));
    sum += r.ms;
  }
  CHECK(rows[0].ms >= rows[1].ms);
  CHECK(rows[1].ms >= rows[2].ms);
  CHECK(sum <= fwd.dur_ns / 1e6);
}

TEST_CASE("trace threads, async spans and the written file", "[runtime][trace]") {
  Trace trace;
  trace.name_thread("main");
  const auto t0 = Trace::Clock::now();
  std::thread([&] {
    trace.name_thread("worker \"1\"");
    TraceScope s(&trace, "step", "serve");
    s.add("sequences", int64_t{3});
    s.add("note", std::string("a \"quoted\" note"));
  }).join();
  trace.async_span("request", "request", 7, t0, Trace::Clock::now(), {{"ms", 1.5}});
  const std::vector<Trace::Event> events = trace.events();
  REQUIRE(events.size() == 2);
  CHECK(events[0].tid != events[1].tid);
  CHECK(events[1].id == 7);
  const std::string path = "/tmp/kiln-test-trace-" + std::to_string(getpid()) + ".json";
  trace.write(path);
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  const std::string s = text.str();
  std::remove(path.c_str());
  CHECK_THAT(s, Catch::StartsWith("{\"displayTimeUnit\":\"ms\",\"traceEvents\":["));
  CHECK_THAT(s, Catch::Contains("\"name\":\"thread_name\""));
  CHECK_THAT(s, Catch::Contains("worker \\\"1\\\""));  // escaped
  CHECK_THAT(s, Catch::Contains("\"ph\":\"X\""));
  CHECK_THAT(s, Catch::Contains("\"ph\":\"b\""));
  CHECK_THAT(s, Catch::Contains("\"ph\":\"e\""));
  CHECK_THAT(s, Catch::Contains("\"sequences\":3"));
  // take() empties the events, keeps the threads.
  CHECK(trace.take().size() == 2);
  CHECK(trace.size() == 0);
  CHECK_THROWS_WITH(trace.write("/proc/kiln-no/trace.json"),
                    Catch::Contains("trace /proc/kiln-no/trace.json: cannot be written"));
}
