#include "runtime/trace.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace kiln {

const Trace::Value* Trace::Event::arg(const std::string& key) const {
  for (const auto& [k, v] : args)
    if (k == key) return &v;
  return nullptr;
}

Trace::Trace() : start_(Clock::now()) {}

int Trace::tid() {
  const auto id = std::this_thread::get_id();
  for (size_t i = 0; i < threads_.size(); ++i)
    if (threads_[i].first == id) return static_cast<int>(i) + 1;
  threads_.emplace_back(id,
                        threads_.empty() ? "main" : "thread " + std::to_string(threads_.size()));
  return static_cast<int>(threads_.size());
}

void Trace::span(std::string name, std::string cat, Clock::time_point t0, Clock::time_point t1,
                 Args args) {
  using ns = std::chrono::nanoseconds;
  Event e{std::move(name),
          std::move(cat),
          std::chrono::duration_cast<ns>(t0 - start_).count(),
          std::chrono::duration_cast<ns>(t1 - t0).count(),
          0,
          -1,
          std::move(args)};
  std::lock_guard<std::mutex> lock(mu_);
  e.tid = tid();
  events_.push_back(std::move(e));
}

void Trace::async_span(std::string name, std::string cat, int64_t id, Clock::time_point t0,
                       Clock::time_point t1, Args args) {
  using ns = std::chrono::nanoseconds;
  Event e{std::move(name),
          std::move(cat),
          std::chrono::duration_cast<ns>(t0 - start_).count(),
          std::chrono::duration_cast<ns>(t1 - t0).count(),
          0,
          id,
          std::move(args)};
  std::lock_guard<std::mutex> lock(mu_);
  e.tid = tid();
  events_.push_back(std::move(e));
}

void Trace::name_thread(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  threads_[tid() - 1].second = name;
}

size_t Trace::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::vector<Trace::Event> Trace::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::vector<Trace::Event> Trace::take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(events_, {});
}

void Trace::write(const std::string& path, const std::vector<Event>& events) const {
  using nlohmann::json;
  const int pid = static_cast<int>(getpid());
  json all = json::array();
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", pid},
                   {"tid", 0},
                   {"args", {{"name", "kiln"}}}});
    for (size_t i = 0; i < threads_.size(); ++i)
      all.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", static_cast<int>(i) + 1},
                     {"args", {{"name", threads_[i].second}}}});
  }
  for (const Event& e : events) {
    json args = json::object();
    for (const auto& [k, v] : e.args) std::visit([&](const auto& x) { args[k] = x; }, v);
    // Microseconds, as the format has them; fractions keep nanoseconds.
    if (e.id < 0) {
      all.push_back({{"name", e.name},
                     {"cat", e.cat},
                     {"ph", "X"},
                     {"ts", e.ts_ns / 1e3},
                     {"dur", e.dur_ns / 1e3},
                     {"pid", pid},
                     {"tid", e.tid},
                     {"args", args}});
      continue;
    }
    all.push_back({{"name", e.name},
                   {"cat", e.cat},
                   {"ph", "b"},
                   {"id", e.id},
                   {"ts", e.ts_ns / 1e3},
                   {"pid", pid},
                   {"tid", e.tid},
                   {"args", args}});
    all.push_back({{"name", e.name},
                   {"cat", e.cat},
                   {"ph", "e"},
                   {"id", e.id},
                   {"ts", (e.ts_ns + e.dur_ns) / 1e3},
                   {"pid", pid},
                   {"tid", e.tid}});
  }
  const std::string text = json{{"traceEvents", all}, {"displayTimeUnit", "ms"}}.dump() + "\n";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error("trace " + path + ": cannot be written");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) throw Error("trace " + path + ": write failed (disk full?)");
}

TraceScope::TraceScope(Trace* trace, std::string name, std::string cat, Trace::Args args)
    : trace_(trace), name_(std::move(name)), cat_(std::move(cat)), args_(std::move(args)) {
  if (trace_) t0_ = Trace::Clock::now();
}

TraceScope::~TraceScope() {
  if (trace_)
    trace_->span(std::move(name_), std::move(cat_), t0_, Trace::Clock::now(), std::move(args_));
}

void TraceScope::add(std::string key, Trace::Value v) {
  if (trace_) args_.emplace_back(std::move(key), std::move(v));
}

std::vector<ProfileRow> profile_rows(const std::vector<Trace::Event>& events) {
  std::map<std::string, ProfileRow> by_label;
  for (const Trace::Event& e : events) {
    if (e.cat != "kernel" && e.cat != "copy") continue;
    const Trace::Value* label = e.arg("label");
    const std::string key = label && std::holds_alternative<std::string>(*label)
                                ? std::get<std::string>(*label)
                                : e.name;
    ProfileRow& r = by_label[key];
    r.label = key;
    r.ms += e.dur_ns / 1e6;
    r.calls += 1;
  }
  std::vector<ProfileRow> rows;
  for (auto& [k, r] : by_label) rows.push_back(std::move(r));
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.ms > b.ms; });
  return rows;
}

}  // namespace kiln
