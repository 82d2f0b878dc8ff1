#include "targets/cpu/thread_pool.h"

#include <algorithm>

namespace kiln {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  // Chunks are taken in order from a shared counter: a thread that runs late
  // (a busy core on a shared machine) takes fewer of them instead of
  // holding up the launch. Each work item still runs whole on one thread,
  // so results do not depend on which thread ran it.
  for (;;) {
    int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) return;
    int64_t end = std::min(n_, begin + chunk_);
    try {
      (*fn_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly: back-to-back launches (one per layer of a forward pass)
    // arrive within microseconds, faster than a futex wake-up.
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < 20000; ++spin) {
      std::this_thread::yield();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      g = generation_.load();
    }
    seen = g;
    if (stop_) return;
    run_chunks();
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  std::lock_guard<std::mutex> call(call_mu_);
  if (workers_.empty() || n <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = std::max<int64_t>(1, n / (8 * size()));
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    pending_.store(static_cast<int>(workers_.size()));
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks();
  while (pending_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  if (error_) std::rethrow_exception(error_);
}

}  // namespace kiln
