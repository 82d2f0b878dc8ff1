#include "targets/cpu/thread_pool.h"

#include <algorithm>

namespace kiln {

namespace {
uint32_t launch_of(uint64_t ticket) { return static_cast<uint32_t>(ticket >> 32); }
int64_t chunks_of(uint64_t ticket) { return static_cast<int64_t>((ticket >> 16) & 0xffff); }
int64_t next_of(uint64_t ticket) { return static_cast<int64_t>(ticket & 0xffff); }
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t launch) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (launch_of(t) != launch || next_of(t) >= chunks_of(t)) return;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
      continue;
    // The claimed chunk keeps this launch (fn_, bounds_) alive until it is
    // counted done: parallel_for waits for every chunk.
    int64_t c = next_of(t);
    try {
      (*fn_)(bounds_[c], bounds_[c + 1]);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    chunks_done_.fetch_add(1, std::memory_order_release);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    // Spin briefly: back-to-back launches (one per op of a forward pass)
    // arrive within microseconds, faster than a futex wake-up.
    uint32_t launch = launch_of(ticket_.load(std::memory_order_acquire));
    for (int spin = 0; launch == seen && spin < 20000 && !stop_.load(std::memory_order_relaxed);
         ++spin) {
      std::this_thread::yield();
      launch = launch_of(ticket_.load(std::memory_order_acquire));
    }
    if (launch == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || launch_of(ticket_.load()) != seen; });
      if (stop_) return;
      launch = launch_of(ticket_.load());
    }
    seen = launch;
    run_chunks(launch);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  std::lock_guard<std::mutex> call(call_mu_);
  if (workers_.empty() || n <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  uint32_t launch;
  int64_t chunks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    // Guided chunks never drop below n / 8192 items, which keeps their
    // count far under the ticket's 16 bits.
    const int64_t smallest = std::max<int64_t>(1, n / 8192);
    bounds_.assign(1, 0);
    for (int64_t left = n; left > 0;) {
      int64_t c = std::min(left, std::max(smallest, (left + 2 * size() - 1) / (2 * size())));
      bounds_.push_back(bounds_.back() + c);
      left -= c;
    }
    chunks = static_cast<int64_t>(bounds_.size()) - 1;
    error_ = nullptr;
    chunks_done_.store(0, std::memory_order_relaxed);
    launch = launch_of(ticket_.load(std::memory_order_relaxed)) + 1;
    ticket_.store(static_cast<uint64_t>(launch) << 32 | static_cast<uint64_t>(chunks) << 16,
                  std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks(launch);
  while (chunks_done_.load(std::memory_order_acquire) != chunks) std::this_thread::yield();
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

void run_on_threads(size_t n, size_t threads, const std::function<void(size_t)>& fn,
                    std::vector<std::exception_ptr>& failed) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < std::min(n, threads); ++i) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
}

}  // namespace kiln
