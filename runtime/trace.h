// A timeline of what a run did: spans on threads, written in the Trace
// Event Format that Perfetto (ui.perfetto.dev) and chrome://tracing load.
//
// When a model's output is slow, one wants to see where the milliseconds
// went: which kernel launch, inside which forward, inside which serving
// step, on which thread. Plans add one span per launch or copy (its kernel,
// spec, grid and bytes as arguments), models one per forward, the scheduler
// one per serving step; `kiln run --profile`'s table is an aggregate of the
// same spans (profile_rows), so the table and the timeline never disagree.
// Recording is thread-safe; a span costs a clock read and a lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace kiln {

class Trace {
 public:
  using Clock = std::chrono::steady_clock;
  using Value = std::variant<int64_t, double, std::string>;
  using Args = std::vector<std::pair<std::string, Value>>;
  struct Event {
    std::string name, cat;
    int64_t ts_ns = 0, dur_ns = 0;  // from the trace's start
    int tid = 0;
    int64_t id = -1;  // >= 0: an async span (a request), not nested in its thread's
    Args args;
    const Value* arg(const std::string& key) const;
  };

  Trace();

  // A span [t0, t1) on the calling thread.
  void span(std::string name, std::string cat, Clock::time_point t0, Clock::time_point t1,
            Args args = {});
  // A span that overlaps others on its thread (a request, from its arrival
  // to its end): Perfetto draws each id on a track of its own.
  void async_span(std::string name, std::string cat, int64_t id, Clock::time_point t0,
                  Clock::time_point t1, Args args = {});
  // Names the calling thread in the timeline ("scheduler", "http").
  void name_thread(const std::string& name);

  size_t size() const;
  std::vector<Event> events() const;
  // The events so far, removed from the trace (a server writes its trace in
  // parts); thread names stay.
  std::vector<Event> take();
  // Writes `events` with the thread names as one Trace Event Format JSON
  // object ({"traceEvents": [...]}); errors name the file.
  void write(const std::string& path, const std::vector<Event>& events) const;
  void write(const std::string& path) const { write(path, events()); }

 private:
  int tid();  // under mu_

  mutable std::mutex mu_;
  Clock::time_point start_;
  std::vector<Event> events_;
  std::vector<std::pair<std::thread::id, std::string>> threads_;  // index + 1 = tid
};

// A span from construction to destruction; nothing when `trace` is null.
class TraceScope {
 public:
  TraceScope(Trace* trace, std::string name, std::string cat, Trace::Args args = {});
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
  // Arguments known only at the end (tokens produced).
  void add(std::string key, Trace::Value v);

 private:
  Trace* trace_;
  std::string name_, cat_;
  Trace::Args args_;
  Trace::Clock::time_point t0_;
};

// What `--profile` prints: per plan step label, the time and count of its
// launch and copy spans ("kernel" and "copy" categories), largest first.
struct ProfileRow {
  std::string label;
  double ms = 0;
  int64_t calls = 0;
};
std::vector<ProfileRow> profile_rows(const std::vector<Trace::Event>& events);

}  // namespace kiln
