// `kiln serve`: an OpenAI-compatible HTTP server over one model.
//
// HTTP/1.1 by cpp-httplib. POST /v1/completions and /v1/chat/completions
// (whole responses, or server-sent events with `stream: true`; chats laid
// out by the model's chat template, models/chat_template.h), GET
// /v1/models, /health and /metrics (Prometheus text). Requests are checked (tools/serve_api.h)
// before they queue; a bounded FCFS queue feeds one engine thread that runs
// one sequence at a time on the model's KV cache. A streaming client that
// goes away cancels its sequence at the next token. Every request ends in
// exactly one terminal event: the response, an error body, or, in a
// stream, `data: [DONE]` or one error event.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "ir/error.h"
#include "models/chat_template.h"
#include "models/generation.h"
#include "tools/cli.h"
#include "tools/serve_api.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

// One request's life: its text as the engine makes it, and its end.
struct Job {
  CompletionRequest request;
  Clock::time_point queued = Clock::now();
  std::mutex mu;
  std::condition_variable cv;
  std::string text;  // decoded, not yet sent
  bool done = false;
  GenerationResult result;
  std::string error;  // a failure while generating
  std::atomic<bool> cancelled{false};
};

// Prometheus histogram with fixed buckets (seconds).
struct Histogram {
  std::vector<double> bounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  std::vector<uint64_t> counts = std::vector<uint64_t>(bounds.size() + 1);
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
      const std::string le = i < bounds.size() ? std::to_string(bounds[i]) : "+Inf";
      out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(total) + "\n";
    }
    return out + name + "_sum " + std::to_string(sum) + "\n" + name + "_count " +
           std::to_string(total) + "\n";
  }
};

// The model's one sequence slot, fed first come, first served.
class Engine {
 public:
  // prefix_cache: a request whose prompt begins with the tokens the cache
  // holds from the last one (a shared system prompt) prefills only the rest.
  Engine(Llm& model, size_t queue, bool prefix_cache)
      : model_(model), capacity_(queue), prefix_cache_(prefix_cache) {
    worker_ = std::thread([this] { loop(); });
  }
  ~Engine() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  std::shared_ptr<Job> submit(CompletionRequest r) {
    auto job = std::make_shared<Job>();
    job->request = std::move(r);
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++requests_;
      if (queue_.size() >= capacity_) {
        ++rejected_;
        throw ApiError(503, "the queue is full (" + std::to_string(capacity_) +
                                " requests wait); try again later");
      }
      queue_.push_back(job);
    }
    cv_.notify_all();
    return job;
  }

  std::string metrics() const {
    std::lock_guard<std::mutex> lk(mu_);
    auto line = [](const char* type, const std::string& name, double v) {
      return "# TYPE " + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
    };
    return line("gauge", "kiln_queue_depth", static_cast<double>(queue_.size())) +
           line("gauge", "kiln_running_sequences", running_) +
           line("counter", "kiln_requests_total", static_cast<double>(requests_)) +
           line("counter", "kiln_requests_rejected_total", static_cast<double>(rejected_)) +
           line("counter", "kiln_requests_cancelled_total", static_cast<double>(cancelled_)) +
           line("counter", "kiln_prompt_tokens_total", static_cast<double>(prompt_tokens_)) +
           line("counter", "kiln_prompt_tokens_cached_total", static_cast<double>(cached_tokens_)) +
           line("counter", "kiln_generated_tokens_total", static_cast<double>(generated_)) +
           line("gauge", "kiln_generated_tokens_per_second", tokens_per_s_) +
           ttft_.text("kiln_time_to_first_token_seconds") +
           itl_.text("kiln_inter_token_latency_seconds");
  }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        job = queue_.front();
        queue_.pop_front();
        running_ = 1;
      }
      run(*job);
      std::lock_guard<std::mutex> lk(mu_);
      running_ = 0;
    }
  }

  void run(Job& job) {
    GenerationOptions o = job.request.options;
    o.cancelled = [&job] { return job.cancelled.load(); };
    // The longest prefix of the prompt the cache holds, one token short of
    // the whole (its logits must be computed).
    const std::vector<int32_t>& prompt = job.request.prompt;
    size_t common = 0;
    while (prefix_cache_ && common + 1 < prompt.size() && common < in_cache_.size() &&
           in_cache_[common] == prompt[common])
      ++common;
    o.cached = static_cast<int64_t>(common);
    bool first = true;
    GenerationResult r;
    std::string error;
    const Clock::time_point start = Clock::now();
    try {
      model_.rewind(o.cached);
      r = generate(model_, prompt, o, [&](const std::string& piece) {
        if (first) {
          std::lock_guard<std::mutex> lk(mu_);
          ttft_.add(std::chrono::duration<double>(Clock::now() - job.queued).count());
          first = false;
        }
        std::lock_guard<std::mutex> lk(job.mu);
        job.text += piece;
        job.cv.notify_all();
      });
      // What the cache holds now: the prompt and the tokens fed back.
      in_cache_ = prompt;
      in_cache_.insert(in_cache_.end(), r.generated.begin(), r.generated.end());
      in_cache_.resize(static_cast<size_t>(model_.pos()));
    } catch (const Error& e) {
      error = e.what();
      in_cache_.clear();
      model_.reset();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      prompt_tokens_ += r.prompt.size();
      if (error.empty()) cached_tokens_ += common;
      generated_ += r.generated.size();
      cancelled_ += r.stop_reason == "cancelled";
      for (double ms : r.token_ms) itl_.add(ms / 1e3);
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (s > 0) tokens_per_s_ = static_cast<double>(r.generated.size()) / s;
    }
    std::lock_guard<std::mutex> lk(job.mu);
    job.result = std::move(r);
    job.error = error;
    job.done = true;
    job.cv.notify_all();
  }

  Llm& model_;
  const size_t capacity_;
  const bool prefix_cache_;
  std::vector<int32_t> in_cache_;  // the tokens whose keys and values the cache holds
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  double running_ = 0, tokens_per_s_ = 0;
  uint64_t requests_ = 0, rejected_ = 0, cancelled_ = 0, prompt_tokens_ = 0, generated_ = 0,
           cached_tokens_ = 0;
  Histogram ttft_, itl_;
  std::thread worker_;
};

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

std::string sse(const std::string& data) { return "data: " + data + "\n\n"; }

}  // namespace

int cmd_serve(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "no-prefix-cache"});
  a.allow_only({"help", "model", "host", "port", "queue", "threads", "ctx", "kv", "device",
                "max-body", "chat-template", "no-prefix-cache"});
  if (a.flag("help")) {
    std::puts(
        "usage: kiln serve -m MODEL.gguf|HF_DIR [--host 127.0.0.1] [--port 8080] [--queue 16]\n"
        "                  [--threads N] [--ctx N] [--kv f16|q8_0|...] [--device cpu|cuda]\n"
        "                  [--max-body BYTES] [--chat-template NAME|FILE] [--no-prefix-cache]\n"
        "An OpenAI-compatible server: POST /v1/completions and /v1/chat/completions (stream:\n"
        "true for server-sent events), GET /v1/models, /health, /metrics. Chats are laid out\n"
        "by the model's tokenizer.chat_template, or --chat-template (a family such as chatml,\n"
        "llama3, gemma, or a file holding a template), else chatml. One sequence runs at a\n"
        "time; up to\n"
        "--queue requests wait, first come first served, and more are refused with 503.\n"
        "A prompt that begins with the tokens the cache holds from the last request (a shared\n"
        "system prompt) prefills only the rest, unless --no-prefix-cache.\n"
        "--port 0 takes a free port; the line 'kiln serve: listening on http://HOST:PORT'\n"
        "on stderr says which.");
    return 0;
  }
  if (!a.has("model")) throw Error("serve needs -m MODEL (a GGUF file or a Hugging Face folder)");
  const int64_t port = a.get_int("port", 8080), queue = a.get_int("queue", 16);
  if (port < 0 || port > 65535) throw Error("--port expects 0 to 65535");
  if (queue < 1) throw Error("--queue expects at least 1");
  RuntimeOptions ro;
  ro.threads = static_cast<int>(a.get_int("threads", 0));
  ro.backend = a.get("device", "cpu");
  Runtime rt(ro);
  const std::string path = a.get("model");
  Llm model(path, rt, a.get_int("ctx", 0), parse_kv_type(a.get("kv", "f16")), 0);
  const std::string model_id = std::filesystem::path(path).filename().string();
  // The chat layout: --chat-template, else the model's, else chatml (as llama.cpp).
  ChatTemplate chat;
  std::string tmpl = a.has("chat-template") ? chat_template_option(a.get("chat-template")) : "";
  if (tmpl.empty())
    tmpl = std::string(model.file().find_string("tokenizer.chat_template").value_or("chatml"));
  try {
    chat.family = chat_template_family(tmpl);
  } catch (const Error& e) {
    chat.error = std::string(e.what()) + "; start the server with --chat-template NAME";
    std::fprintf(stderr, "kiln serve: chat requests will be refused: %s\n", chat.error.c_str());
  }
  Engine engine(model, static_cast<size_t>(queue), !a.flag("no-prefix-cache"));
  std::atomic<uint64_t> next_id{0};
  std::random_device entropy;
  std::mutex seed_mu;

  httplib::Server svr;
  svr.set_payload_max_length(static_cast<size_t>(a.get_int("max-body", 1 << 20)));
  svr.set_read_timeout(10, 0);  // a client that stops sending is dropped
  svr.set_write_timeout(10, 0);
  // One thread per waiting request beside a few for the rest: a full queue
  // answers 503 instead of leaving connections in the accept backlog.
  const size_t threads = static_cast<size_t>(queue) + 4;
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
        job = engine.submit(
            parse_request(endpoint, req.body, model.tokenizer(), chat, model.n_ctx(), seed));
      } catch (const ApiError& e) {
        return reply_error(res, e);
      }
      const std::string id =
          (endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id);
      const int64_t created = static_cast<int64_t>(std::time(nullptr));
      if (!job->request.stream) {
        std::unique_lock<std::mutex> lk(job->mu);
        job->cv.wait(lk, [&] { return job->done; });
        if (!job->error.empty()) return reply_error(res, ApiError(500, job->error));
        res.set_content(completion_body(endpoint, id, created, model_id, job->result,
                                        job->request.return_token_ids),
                        "application/json");
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [job, id, created, endpoint, &model_id](size_t, httplib::DataSink& sink) {
            auto send = [&](const std::string& data) {
              const std::string ev = sse(data);
              return sink.write(ev.data(), ev.size());
            };
            std::string held;  // an incomplete UTF-8 sequence at the end
            bool first = true;
            for (;;) {
              std::unique_lock<std::mutex> lk(job->mu);
              job->cv.wait(lk, [&] { return job->done || !job->text.empty(); });
              held += job->text;
              job->text.clear();
              const bool done = job->done;
              lk.unlock();
              if (done) {
                if (!job->error.empty())
                  send(error_body(ApiError(500, job->error)));
                else if (send(chunk_body(endpoint, id, created, model_id, held, first,
                                         finish_reason(job->result), &job->result)))
                  send("[DONE]");
                sink.done();
                return true;
              }
              const size_t n = complete_utf8_prefix(held);
              if (n && !send(chunk_body(endpoint, id, created, model_id, held.substr(0, n), first,
                                        "", nullptr))) {
                job->cancelled = true;  // the client has gone
                return false;
              }
              first = first && n == 0;
              held.erase(0, n);
            }
          },
          [job](bool success) {
            if (!success) job->cancelled = true;
          });
    };
  };
  svr.Post("/v1/completions", completions(Endpoint::completions));
  svr.Post("/v1/chat/completions", completions(Endpoint::chat));

  const std::string host = a.get("host", "127.0.0.1");
  int bound = static_cast<int>(port);
  if (port == 0)
    bound = svr.bind_to_any_port(host);
  else if (!svr.bind_to_port(host, bound))
    bound = -1;
  if (bound < 0)
    throw Error("cannot listen on " + host + ":" + std::to_string(port) +
                " (in use, or not an address of this machine)");
  std::fprintf(stderr, "kiln serve: listening on http://%s:%d (model %s, %lld positions)\n",
               host.c_str(), bound, model_id.c_str(), static_cast<long long>(model.n_ctx()));
  std::fflush(stderr);
  if (!svr.listen_after_bind()) throw Error("the server stopped listening");
  return 0;
}

}  // namespace kiln
