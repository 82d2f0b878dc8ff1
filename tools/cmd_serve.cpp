// `kiln serve`: an OpenAI-compatible HTTP server over one model.
//
// HTTP/1.1 by cpp-httplib. POST /v1/completions and /v1/chat/completions
// (whole responses, or server-sent events with `stream: true`; chats laid
// out by the model's chat template, models/chat_template.h), POST
// /v1/embeddings (pooled final hidden states), GET
// /v1/models, /health and /metrics (Prometheus text). Requests are checked
// (tools/serve_api.h) before they queue; one engine thread runs them
// together by continuous batching (models/batch_scheduler.h) over a pool of
// KV pages. A streaming client that goes away cancels its sequence before
// the next step, which frees its pages. Every request ends in
// exactly one terminal event: the response, an error body, or, in a
// stream, `data: [DONE]` or one error event.
#include <arpa/inet.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "ir/error.h"
#include "models/batch_scheduler.h"
#include "models/generation.h"
#include "models/hf_checkpoint.h"
#include "models/speculative.h"
#include "tools/cli.h"
#include "tools/request_deadline.h"
#include "tools/serve_api.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

// One request's life: its choices' text as the engine makes it, and their
// ends.
struct Job {
  explicit Job(CompletionRequest r)
      : request(std::move(r)),
        choices(request.prompts.size() * static_cast<size_t>(request.n)),
        left(choices.size()) {}
  CompletionRequest request;
  Clock::time_point queued = Clock::now(), added;  // added: handed to the scheduler
  std::mutex mu;
  std::condition_variable cv;
  struct Choice {
    std::string text;         // decoded, not yet sent
    GenerationResult result;  // a stream's: its tokens and logprobs so far; then the whole
    bool done = false;
    std::string error;  // a failure while generating
    int status = 500;   // its status: 503 when a shutdown ended it
  };
  std::vector<Choice> choices;
  size_t left;  // choices not done
  std::atomic<bool> cancelled{false};
  // The engine thread's: TTFT taken; the choices' prompt and generated
  // tokens so far; the request's id in a trace.
  bool first_text = false;
  int64_t prompt_tokens = 0, generated = 0;
  int64_t trace_id = 0;
};

// Prometheus histogram with fixed buckets: seconds, or token counts.
struct Histogram {
  static std::vector<double> seconds() {
    return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  }
  static std::vector<double> tokens() { return {1, 4, 16, 64, 256, 1024, 4096, 16384, 65536}; }
  explicit Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1) {}
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
  void add(double s) {
    size_t i = 0;
    while (i < bounds.size() && s > bounds[i]) ++i;
    ++counts[i];
    sum += s;
  }
  std::string text(const std::string& name) const {
    std::string out = "# TYPE " + name + " histogram\n";
    uint64_t total = 0;
    for (size_t i = 0; i <= bounds.size(); ++i) {
      total += counts[i];
      const std::string le = i < bounds.size() ? fmt_bound(bounds[i]) : "+Inf";
      out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(total) + "\n";
    }
    return out + name + "_sum " + std::to_string(sum) + "\n" + name + "_count " +
           std::to_string(total) + "\n";
  }
  static std::string fmt_bound(double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", b);
    return buf;
  }
};

// The engine thread: requests join a BatchScheduler (continuous batching
// over the model's pool of KV pages) between its steps.
class Engine {
 public:
  // queue: requests that may wait beyond the max_batch running ones.
  // trace_dir: non-empty, a timeline of the steps, forwards, kernel
  // launches and requests is written there in parts (runtime/trace.h).
  Engine(Llm& model, size_t queue, SchedulerOptions o, std::string trace_dir)
      : capacity_(queue + static_cast<size_t>(o.max_batch)),
        model_(model),
        memory_(model.memory()),
        trace_dir_(std::move(trace_dir)),
        sched_(model, o) {
    if (!trace_dir_.empty()) {
      trace_ = std::make_unique<Trace>();
      sched_.trace(trace_.get());
    }
    worker_ = std::thread([this] { loop(); });
  }
  ~Engine() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
    if (trace_) write_trace();
  }

  std::shared_ptr<Job> submit(CompletionRequest r) {
    auto job = std::make_shared<Job>(std::move(r));
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++requests_;
      if (draining_) {
        ++rejected_;
        throw ApiError(503, "the server is shutting down");
      }
      if (unfinished_ >= capacity_) {
        ++rejected_;
        throw ApiError(503, "the server is full (" + std::to_string(capacity_) +
                                " requests running or waiting); try again later");
      }
      ++unfinished_;
      job->trace_id = static_cast<int64_t>(requests_);
      inbox_.push_back(job);
    }
    cv_.notify_all();
    return job;
  }

  // Shutting down: new requests are refused (503); running ones go on
  // until idle(), or until abort() ends them with an error.
  void drain() {
    std::lock_guard<std::mutex> lk(mu_);
    draining_ = true;
  }
  bool idle() const {
    std::lock_guard<std::mutex> lk(mu_);
    return unfinished_ == 0;
  }
  void abort() {
    aborted_ = true;
    cv_.notify_all();
  }

  std::string metrics() const {
    std::lock_guard<std::mutex> lk(mu_);
    auto line = [](const char* type, const std::string& name, double v) {
      return "# TYPE " + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
    };
    const SchedulerStats& st = stats_;
    return line("gauge", "kiln_queue_depth", static_cast<double>(inbox_.size() + st.waiting)) +
           line("gauge", "kiln_running_sequences", static_cast<double>(st.running)) +
           line("gauge", "kiln_kv_blocks_total", static_cast<double>(st.pages)) +
           line("gauge", "kiln_kv_blocks_used", static_cast<double>(st.pages_used)) +
           line("gauge", "kiln_kv_blocks_cached", static_cast<double>(st.pages_cached)) +
           line("counter", "kiln_steps_total", static_cast<double>(st.steps)) +
           line("counter", "kiln_preemptions_total", static_cast<double>(st.preemptions)) +
           line("counter", "kiln_requests_total", static_cast<double>(requests_)) +
           line("counter", "kiln_requests_rejected_total", static_cast<double>(rejected_)) +
           line("counter", "kiln_requests_cancelled_total", static_cast<double>(cancelled_)) +
           line("counter", "kiln_prompt_tokens_total", static_cast<double>(st.prompt_tokens)) +
           line("counter", "kiln_prompt_tokens_cached_total",
                static_cast<double>(st.cached_prompt_tokens)) +
           line("counter", "kiln_generated_tokens_total",
                static_cast<double>(st.generated_tokens)) +
           line("counter", "kiln_spec_steps_total", static_cast<double>(st.spec.steps)) +
           line("counter", "kiln_spec_draft_tokens_total",
                static_cast<double>(st.spec.draft_tokens)) +
           line("counter", "kiln_spec_accepted_tokens_total",
                static_cast<double>(st.spec.accepted_tokens)) +
           line("gauge", "kiln_spec_acceptance_rate", st.spec.acceptance_rate()) +
           line("gauge", "kiln_spec_mean_accepted_length", st.spec.mean_accepted_length()) +
           line("gauge", "kiln_generated_tokens_per_second", tokens_per_s_) + bytes_lines() +
           ttft_.text("kiln_time_to_first_token_seconds") +
           itl_.text("kiln_inter_token_latency_seconds") +
           queue_wait_.text("kiln_queue_wait_seconds") + e2e_.text("kiln_request_latency_seconds") +
           prompt_len_.text("kiln_request_prompt_tokens") +
           generated_len_.text("kiln_request_generated_tokens");
  }

 private:
  // Where memory goes, in bytes: the KV pool split by what holds its pages
  // (under mu_), the weights and the plans' scratch.
  std::string bytes_lines() const {
    const SchedulerStats& st = stats_;
    const Llm::MemoryUse& m = memory_;
    const double page = st.pages ? static_cast<double>(m.kv_cache) / st.pages : 0;
    // A page the prefix cache keeps is in use too until evicted: count it
    // once, as cached.
    const double cached = page * st.pages_cached, free = page * (st.pages - st.pages_used);
    return "# TYPE kiln_kv_cache_bytes gauge\n"
           "kiln_kv_cache_bytes{state=\"in_use\"} " +
           std::to_string(page * st.pages_used - cached) +
           "\n"
           "kiln_kv_cache_bytes{state=\"prefix_cached\"} " +
           std::to_string(cached) +
           "\n"
           "kiln_kv_cache_bytes{state=\"free\"} " +
           std::to_string(free) +
           "\n"
           "# TYPE kiln_weights_bytes gauge\n"
           "kiln_weights_bytes{form=\"file\"} " +
           std::to_string(m.weights) +
           "\n"
           "kiln_weights_bytes{form=\"copies\"} " +
           std::to_string(m.weight_copies) +
           "\n"
           "# TYPE kiln_scratch_bytes gauge\n"
           "kiln_scratch_bytes " +
           std::to_string(m.scratch) + "\n";
  }

  // The trace's events so far into the next part (trace-<pid>-<part>.json).
  void write_trace() {
    const std::string path = trace_dir_ + "/trace-" + std::to_string(getpid()) + "-" +
                             std::to_string(trace_parts_++) + ".json";
    try {
      trace_->write(path, trace_->take());
    } catch (const Error& e) {
      std::fprintf(stderr, "kiln serve: %s\n", e.what());
    }
  }

  void loop() {
    if (trace_) trace_->name_thread("scheduler");
    Clock::time_point window = Clock::now();
    int64_t window_tokens = 0;
    for (;;) {
      std::vector<std::shared_ptr<Job>> arrived;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stopping_ || !inbox_.empty() || !sched_.idle(); });
        if (stopping_) return;
        arrived.swap(inbox_);
      }
      // The callbacks take mu_: they run outside it (add may end a request
      // at once).
      for (auto& job : arrived) {
        job->added = Clock::now();
        for (size_t p = 0; p < job->request.prompts.size(); ++p) sched_.add(request_of(job, p));
      }
      const int64_t before = sched_.stats().generated_tokens;
      sched_.step();
      if (trace_ && trace_->size() >= kTracePart) write_trace();
      const double s = std::chrono::duration<double>(Clock::now() - window).count();
      const bool window_done = s >= 1 || sched_.idle();
      // Memory moves only as plans are recorded: read once a window, not
      // every step.
      std::optional<Llm::MemoryUse> memory;
      if (window_done) memory = model_.memory();
      std::lock_guard<std::mutex> lk(mu_);
      stats_ = sched_.stats();
      if (memory) memory_ = *memory;
      window_tokens += stats_.generated_tokens - before;
      if (window_done) {
        if (s > 0) tokens_per_s_ = static_cast<double>(window_tokens) / s;
        window = Clock::now();
        window_tokens = 0;
      }
    }
  }

  // A choice's end into the metrics (and the trace): its tokens' latencies,
  // its prompt's queue wait; the request's latency and token counts when
  // it is the last.
  void record_done(Job& job, int64_t c, const GenerationResult& g, bool last) {
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lk(mu_);
    for (double ms : g.token_ms) itl_.add(ms / 1e3);
    job.generated += static_cast<int64_t>(g.generated.size());
    if (c == 0) {
      // Each prompt's wait: in the engine's inbox, then for room in the batch.
      queue_wait_.add(std::chrono::duration<double>(job.added - job.queued).count() +
                      g.queue_ms / 1e3);
      job.prompt_tokens += static_cast<int64_t>(g.prompt.size());
    }
    if (!last) return;
    cancelled_ += job.cancelled.load() || g.stop_reason == "cancelled";
    --unfinished_;
    e2e_.add(std::chrono::duration<double>(now - job.queued).count());
    prompt_len_.add(static_cast<double>(job.prompt_tokens));
    generated_len_.add(static_cast<double>(job.generated));
    if (trace_)
      trace_->async_span("request", "request", job.trace_id, job.queued, now,
                         {{"prompt_tokens", job.prompt_tokens},
                          {"generated_tokens", job.generated},
                          {"choices", static_cast<int64_t>(job.choices.size())}});
  }

  // The scheduler's request for a job's prompt p: its choices' text into
  // the job as it comes, their ends with their timings into the metrics.
  SeqRequest request_of(const std::shared_ptr<Job>& job, size_t p) {
    SeqRequest r;
    const CompletionRequest& req = job->request;
    r.prompt = req.prompts[p];
    r.n = req.n;
    r.options = req.options;
    r.options.cancelled = [this, job] { return job->cancelled.load() || aborted_.load(); };
    const size_t first = p * static_cast<size_t>(req.n);
    r.on_text = [this, job, first](int64_t c, const std::string& piece,
                                   const GenerationResult& so_far) {
      if (!job->first_text) {
        std::lock_guard<std::mutex> lk(mu_);
        ttft_.add(std::chrono::duration<double>(Clock::now() - job->queued).count());
        job->first_text = true;
      }
      std::lock_guard<std::mutex> lk(job->mu);
      Job::Choice& ch = job->choices[first + static_cast<size_t>(c)];
      ch.text += piece;
      // Only a stream's writer reads the tokens so far, or waits for
      // text; waking a whole response's thread every token takes a core
      // from the next step.
      if (!job->request.stream) return;
      GenerationResult& r = ch.result;
      if (r.prompt_logprobs.empty()) r.prompt_logprobs = so_far.prompt_logprobs;
      r.generated.insert(r.generated.end(), so_far.generated.begin() + r.generated.size(),
                         so_far.generated.end());
      r.logprobs.insert(r.logprobs.end(), so_far.logprobs.begin() + r.logprobs.size(),
                        so_far.logprobs.end());
      job->cv.notify_all();
    };
    r.on_done = [this, job, first](int64_t c, const GenerationResult& g, const std::string& error) {
      // The metrics first: a client answered may read /metrics at once.
      // Only this thread ends choices, so `left` cannot move meanwhile.
      bool last;
      {
        std::lock_guard<std::mutex> lk(job->mu);
        last = job->left == 1;
      }
      record_done(*job, c, g, last);
      std::lock_guard<std::mutex> lk(job->mu);
      Job::Choice& ch = job->choices[first + static_cast<size_t>(c)];
      ch.result = g;
      ch.error = error;
      if (error.empty() && aborted_ && g.stop_reason == "cancelled") {
        ch.error = "the server shut down before the request finished (--shutdown-grace)";
        ch.status = 503;
      }
      ch.done = true;
      --job->left;
      job->cv.notify_all();
    };
    return r;
  }

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Job>> inbox_;
  SchedulerStats stats_;
  size_t unfinished_ = 0;
  bool stopping_ = false, draining_ = false;
  std::atomic<bool> aborted_{false};
  double tokens_per_s_ = 0;
  uint64_t requests_ = 0, rejected_ = 0, cancelled_ = 0;
  Histogram ttft_{Histogram::seconds()}, itl_{Histogram::seconds()};
  Histogram queue_wait_{Histogram::seconds()}, e2e_{Histogram::seconds()};
  Histogram prompt_len_{Histogram::tokens()}, generated_len_{Histogram::tokens()};
  Llm& model_;
  Llm::MemoryUse memory_;
  // Events per trace part: a long-running server's timeline in files of
  // bounded size (about 200 bytes an event).
  static constexpr size_t kTracePart = 500000;
  const std::string trace_dir_;
  std::unique_ptr<Trace> trace_;
  int trace_parts_ = 0;
  // After what its callbacks use: destroyed first, it ends what is left.
  BatchScheduler sched_;
  std::thread worker_;
};

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

std::string sse(const std::string& data) { return "data: " + data + "\n\n"; }

}  // namespace

int cmd_serve(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "no-prefix-cache", "draft-k-fixed"});
  a.allow_only({"help",
                "model",
                "host",
                "port",
                "queue",
                "threads",
                "ctx",
                "kv",
                "device",
                "max-body",
                "chat-template",
                "no-prefix-cache",
                "max-batch",
                "kv-blocks",
                "kv-page",
                "step-tokens",
                "request-timeout",
                "max-n",
                "shutdown-grace",
                "draft",
                "spec",
                "draft-k",
                "draft-k-fixed",
                "trace",
                "policy"});
  if (a.flag("help")) {
    std::puts(
        "usage: kiln serve -m MODEL.gguf|HF_DIR [--host 127.0.0.1] [--port 8080] [--queue 16]\n"
        "                  [--max-batch 8] [--kv-blocks N] [--kv-page 32] [--step-tokens 256]\n"
        "                  [--threads N] [--ctx N] [--kv f16|bf16|f32|q8_0] [--device cpu|cuda]\n"
        "                  [--max-body BYTES] [--request-timeout 10] [--chat-template NAME|FILE]\n"
        "                  [--no-prefix-cache] [--max-n 16] [--shutdown-grace 10]\n"
        "                  [--draft DRAFT.gguf|HF_DIR | --spec ngram[:N]] [--draft-k 4] "
        "[--draft-k-fixed]\n"
        "                  [--policy decode-first|prefill-first|round-robin|static] [--trace DIR]\n"
        "An OpenAI-compatible server: POST /v1/completions and /v1/chat/completions (stream:\n"
        "true for server-sent events), /v1/embeddings (the final hidden states pooled as\n"
        "the model's pooling_type says, else their mean; unit length), GET /v1/models,\n"
        "/health, /metrics. Chats are laid out\n"
        "by the model's tokenizer.chat_template (Jinja, rendered as transformers does), or\n"
        "--chat-template (a file holding a Jinja template, or the name of a hand-written layout\n"
        "such as chatml, llama3, gemma), else chatml. Chats take tools, tool_choice and\n"
        "parallel_tool_calls where the template writes tool calls (Hermes <tool_call>, Llama\n"
        "3.x JSON, Mistral [TOOL_CALLS], GPT-OSS), and chat_template_kwargs.\n"
        "Continuous batching: up to --max-batch sequences run together, each step one forward\n"
        "of their next tokens (decodes first, then chunks of prompts) up to --step-tokens;\n"
        "their keys and values live in a pool of --kv-blocks pages of --kv-page tokens\n"
        "(default: room for --max-batch full contexts). When the pool runs short the latest\n"
        "arrival is preempted and later recomputed. Up to --queue more requests wait, first\n"
        "come first served, and more are refused with 503. Full pages of prompts are kept\n"
        "for later prompts that begin alike (a shared system prompt is computed once),\n"
        "unless --no-prefix-cache. --policy orders a step's work: decode-first (the default),\n"
        "prefill-first (prompts and newcomers first, decodes with the tokens left), round-robin\n"
        "(steps of prompts and steps of decodes in turn, never mixed), static (a batch admitted\n"
        "only once the one before it has finished).\n"
        "A request's choices (n, times its prompts) run together,\n"
        "at most --max-n of them; n samples of a prompt read it once and share its pages.\n"
        "Speculative decoding (--draft, a smaller model of the same vocabulary with a pool of its\n"
        "own, or --spec ngram[:N], prompt lookup): decoding sequences guess up to --draft-k\n"
        "tokens, verified in the step's forward, as many as pay for the batch (none when its\n"
        "steps are bound by compute; --draft-k-fixed: always K).\n"
        "A request must arrive whole within --request-timeout\n"
        "seconds (else 408); its response may take as long as it needs.\n"
        "--trace DIR writes a timeline (Chrome trace / Perfetto JSON) of every step, forward,\n"
        "kernel launch and request into DIR/trace-PID-N.json, a part per 500k events and the\n"
        "last at exit.\n"
        "--port 0 takes a free port; the line 'kiln serve: listening on http://HOST:PORT'\n"
        "on stderr says which. SIGINT or SIGTERM stops accepting connections and lets the\n"
        "running requests finish for up to --shutdown-grace seconds (a second signal: at\n"
        "once); those still running then end with an error (a stream's last event), and\n"
        "the server exits 0.");
    return 0;
  }
  if (!a.has("model")) throw Error("serve needs -m MODEL (a GGUF file or a Hugging Face folder)");
  const int64_t port = a.get_int("port", 8080), queue = a.get_int("queue", 16);
  if (port < 0 || port > 65535) throw Error("--port expects 0 to 65535");
  if (queue < 1) throw Error("--queue expects at least 1");
  const double request_timeout =
      a.has("request-timeout") ? parse_double(a.get("request-timeout"), "--request-timeout") : 10;
  if (!(request_timeout > 0 && request_timeout <= 3600))
    throw Error("--request-timeout expects seconds, more than 0 and at most 3600");
  const double grace =
      a.has("shutdown-grace") ? parse_double(a.get("shutdown-grace"), "--shutdown-grace") : 10;
  if (!(grace >= 0 && grace <= 3600)) throw Error("--shutdown-grace expects seconds, 0 to 3600");
  if (a.has("trace")) check_writable_dir(a.get("trace"), "--trace");
  // SIGINT and SIGTERM are taken by one thread (sigwait) to shut down in
  // order: blocked here, before any thread starts, so every thread
  // inherits the mask. SIGUSR1 wakes that thread when the server ends
  // otherwise.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  SchedulerOptions so;
  so.max_batch = a.get_int("max-batch", 8);
  so.token_budget = a.get_int("step-tokens", 256);
  so.prefix_cache = !a.flag("no-prefix-cache");
  so.policy = parse_scheduler_policy(a.get("policy", "decode-first"));
  if (so.max_batch < 1 || so.max_batch > 256) throw Error("--max-batch expects 1 to 256");
  const int64_t max_n = a.get_int("max-n", std::min<int64_t>(16, so.max_batch));
  if (max_n < 1 || max_n > so.max_batch)
    throw Error("--max-n expects 1 to --max-batch (" + std::to_string(so.max_batch) +
                "): a request's choices run together");
  if (so.token_budget < so.max_batch)
    throw Error("--step-tokens expects at least --max-batch (" + std::to_string(so.max_batch) +
                ") tokens");
  const int64_t page = a.get_int("kv-page", 32);
  if (page < 1) throw Error("--kv-page expects at least 1");
  RuntimeOptions ro;
  ro.threads = static_cast<int>(a.get_int("threads", 0));
  ro.backend = a.get("device", "cpu");
  Runtime rt(ro);
  const std::string path = a.get("model");
  GgufFile file = open_model_file(path);
  const int64_t ctx = Llm::context_for(ModelConfig::from_gguf(file), a.get_int("ctx", 0));
  const int64_t blocks = a.get_int("kv-blocks", so.max_batch * ((ctx + page - 1) / page));
  if (blocks < 1) throw Error("--kv-blocks expects at least 1");
  Llm model(std::move(file), rt, ctx, parse_kv_type(a.get("kv", "f16")), page, blocks);
  // Speculative decoding: prompt lookup, or a draft model over a pool of
  // its own, as large as the target's.
  const SpecArgs spec = parse_spec_args(a);
  std::unique_ptr<Llm> draft;
  if (!spec.draft.empty()) {
    draft = std::make_unique<Llm>(spec.draft, rt, ctx, model.kv_type(), page, blocks);
    if (std::string w = draft_size_warning(model, *draft); !w.empty())
      std::fprintf(stderr, "kiln serve: %s\n", w.c_str());
    so.draft = draft.get();
  }
  if (!spec.spec.empty()) so.ngram = parse_spec_ngram(spec.spec);
  so.draft_k = spec.k;
  so.draft_k_fixed = spec.fixed;
  // The rows one sequence may hold: its context, or the whole pool if smaller.
  const int64_t max_rows = std::min(ctx, blocks * page);
  const std::string model_id = std::filesystem::path(path).filename().string();
  // The chat template: --chat-template (a layout's name or a Jinja file),
  // else the model's Jinja template, else chatml (as llama.cpp).
  const ChatTemplate chat = chat_template_for(
      a.get("chat-template", ""),
      std::string(model.file().find_string("tokenizer.chat_template").value_or("")),
      model.tokenizer());
  if (!chat.error.empty())
    std::fprintf(stderr, "kiln serve: chat requests will be refused: %s\n", chat.error.c_str());
  GrammarCache grammars(model.tokenizer());
  Engine engine(model, static_cast<size_t>(queue), so, a.get("trace", ""));
  std::atomic<uint64_t> next_id{0};
  std::random_device entropy;
  std::mutex seed_mu;

  DeadlineServer svr(std::chrono::milliseconds(static_cast<int64_t>(request_timeout * 1000)));
  svr.set_payload_max_length(static_cast<size_t>(a.get_int("max-body", 1 << 20)));
  svr.set_write_timeout(10, 0);  // a client that stops reading is dropped
  // One thread per waiting request beside a few for the rest: a full queue
  // answers 503 instead of leaving connections in the accept backlog.
  const size_t threads = static_cast<size_t>(queue + so.max_batch) + 4;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\": \"ok\"}", "application/json");
  });
  svr.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "{\"object\": \"list\", \"data\": [{\"id\": " + nlohmann::json(model_id).dump() +
            ", \"object\": \"model\", \"owned_by\": \"kiln\"}]}",
        "application/json");
  });
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(engine.metrics(), "text/plain; version=0.0.4");
  });
  auto completions = [&](Endpoint endpoint) {
    return [&, endpoint](const httplib::Request& req, httplib::Response& res) {
      std::shared_ptr<Job> job;
      uint64_t seed;
      {
        std::lock_guard<std::mutex> lk(seed_mu);
        seed = (static_cast<uint64_t>(entropy()) << 32) | entropy();
      }
      try {
        job = engine.submit(parse_request(endpoint, req.body, model.tokenizer(), chat, max_rows,
                                          seed, max_n, &grammars));
      } catch (const ApiError& e) {
        return reply_error(res, e);
      }
      const ResponseHead head{endpoint,
                              (endpoint == Endpoint::chat          ? "chatcmpl-"
                               : endpoint == Endpoint::completions ? "cmpl-"
                                                                   : "embd-") +
                                  std::to_string(++next_id),
                              static_cast<int64_t>(std::time(nullptr)), model_id};
      const Tokenizer& tok = model.tokenizer();
      if (!job->request.stream) {
        std::unique_lock<std::mutex> lk(job->mu);
        job->cv.wait(lk, [&] { return job->left == 0; });
        std::vector<GenerationResult> results;
        for (const Job::Choice& ch : job->choices) {
          if (!ch.error.empty()) return reply_error(res, ApiError(ch.status, ch.error));
          results.push_back(ch.result);
        }
        res.set_content(endpoint == Endpoint::embeddings
                            ? embeddings_body(head, job->request, results)
                            : completion_body(head, job->request, results, tok),
                        "application/json");
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [job, head, &tok](size_t, httplib::DataSink& sink) {
            const size_t n = job->choices.size();
            std::vector<std::string> held(n);  // incomplete UTF-8 sequences at the ends
            std::vector<StreamedChoice> sent(n);
            std::vector<bool> closed(n);
            // Chats read for tool calls or channels (CompletionRequest::reply).
            std::vector<ReplyChunker> replies;
            if (job->request.reply != ToolSyntax::none)
              for (size_t i = 0; i < n; ++i)
                replies.emplace_back(job->request.reply,
                                     tool_call_seed(head, static_cast<int64_t>(i)));
            for (;;) {
              // Chunks are built under the job's lock (the tokens so far
              // are read in place), sent outside it.
              std::vector<std::string> events;
              bool over = false;
              {
                std::unique_lock<std::mutex> lk(job->mu);
                job->cv.wait(lk, [&] {
                  for (size_t i = 0; i < n; ++i)
                    if (!closed[i] && (job->choices[i].done || !job->choices[i].text.empty()))
                      return true;
                  return false;
                });
                for (const Job::Choice& ch : job->choices)
                  if (!ch.error.empty()) {
                    events.push_back(error_body(ApiError(ch.status, ch.error)));
                    over = true;
                    break;
                  }
                for (size_t i = 0; i < n && !over; ++i) {
                  Job::Choice& ch = job->choices[i];
                  if (closed[i]) continue;
                  held[i] += ch.text;
                  ch.text.clear();
                  const int64_t index = static_cast<int64_t>(i);
                  nlohmann::ordered_json extra = nullptr;
                  if (!replies.empty()) {
                    std::tie(held[i], extra) = replies[i].take(tok, ch.result, ch.done);
                    if (!ch.done && held[i].empty() && extra.is_null()) continue;
                  }
                  if (ch.done) {
                    closed[i] = true;
                    const bool all_closed =
                        std::find(closed.begin(), closed.end(), false) == closed.end();
                    std::vector<GenerationResult> results;
                    if (all_closed)
                      for (const Job::Choice& c : job->choices) results.push_back(c.result);
                    std::string finish = finish_reason(ch.result);
                    if (!replies.empty() && replies[i].called() && finish != "length")
                      finish = "tool_calls";
                    events.push_back(chunk_body(head, job->request, tok, index, held[i], ch.result,
                                                sent[i], finish, all_closed ? &results : nullptr,
                                                extra));
                    if (all_closed) {
                      if (job->request.include_usage)
                        events.push_back(usage_chunk_body(head, job->request, results));
                      events.push_back("[DONE]");
                      over = true;
                    }
                    continue;
                  }
                  const size_t whole =
                      replies.empty() ? complete_utf8_prefix(held[i]) : held[i].size();
                  if (whole == 0 && extra.is_null()) continue;
                  events.push_back(chunk_body(head, job->request, tok, index,
                                              held[i].substr(0, whole), ch.result, sent[i], "",
                                              nullptr, extra));
                  held[i].erase(0, whole);
                }
              }
              for (const std::string& ev : events) {
                const std::string data = sse(ev);
                if (!sink.write(data.data(), data.size())) {
                  job->cancelled = true;  // the client has gone
                  return false;
                }
              }
              if (over) {
                sink.done();
                return true;
              }
            }
          },
          [job](bool success) {
            if (!success) job->cancelled = true;
          });
    };
  };
  svr.Post("/v1/completions", completions(Endpoint::completions));
  svr.Post("/v1/chat/completions", completions(Endpoint::chat));
  svr.Post("/v1/embeddings", completions(Endpoint::embeddings));

  const std::string host = a.get("host", "127.0.0.1");
  // cpp-httplib listens with a backlog of 5 connections: a burst of clients
  // beyond it saw resets. Its listening socket is taken as it is made and
  // listened on again with the system's maximum once bound.
  std::vector<int> made;
  svr.set_socket_options([&made](socket_t sock) {
    httplib::default_socket_options(sock);
    made.push_back(sock);
  });
  int bound = static_cast<int>(port);
  if (port == 0)
    bound = svr.bind_to_any_port(host);
  else if (!svr.bind_to_port(host, bound))
    bound = -1;
  if (bound < 0)
    throw Error("cannot listen on " + host + ":" + std::to_string(port) +
                " (in use, or not an address of this machine)");
  for (int sock : made) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port) == bound)
      ::listen(sock, SOMAXCONN);
  }
  std::fprintf(stderr,
               "kiln serve: listening on http://%s:%d (model %s, %lld positions, %lld sequences "
               "at once, %lld KV pages of %lld)\n",
               host.c_str(), bound, model_id.c_str(), static_cast<long long>(model.n_ctx()),
               static_cast<long long>(so.max_batch), static_cast<long long>(blocks),
               static_cast<long long>(page));
  std::fflush(stderr);
  std::atomic<bool> shutting_down{false};
  std::thread waiter([&] {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0 || sig == SIGUSR1) return;
    shutting_down = true;
    std::fprintf(stderr,
                 "kiln serve: %s: no new connections; waiting up to %g s for the running "
                 "requests\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", grace);
    engine.drain();
    svr.stop();  // closes the listening socket; listen returns once handlers end
    const auto until = Clock::now() + std::chrono::duration<double>(grace);
    while (!engine.idle()) {
      const double left = std::chrono::duration<double>(until - Clock::now()).count();
      if (left <= 0) break;
      const double wait = std::min(left, 0.05);
      const timespec ts{0, static_cast<long>(wait * 1e9)};
      const int again = sigtimedwait(&signals, nullptr, &ts);
      if (again == SIGINT || again == SIGTERM) break;  // a second signal: now
    }
    if (!engine.idle()) {
      std::fprintf(stderr, "kiln serve: ending the requests still running\n");
      engine.abort();
    }
  });
  const bool listened = svr.listen_after_bind();
  if (!shutting_down) pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
  if (!listened && !shutting_down) throw Error("the server stopped listening");
  std::fprintf(stderr, "kiln serve: stopped\n");
  return 0;
}

}  // namespace kiln
