// A persistent pool of worker threads that runs a grid in contiguous shards.
//
// Kernel launches are short (a GEMV over 32 MiB takes about a millisecond),
// so threads are created once and woken per launch. Work item i always goes
// to the same shard for a given thread count, which keeps results
// deterministic for a fixed --threads N. The calling thread runs shard 0.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(begin, end) over [0, n) split into size() contiguous shards
  // (shard w: [w*n/T, (w+1)*n/T)); returns when all are done. The first
  // exception thrown by a shard is rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);
  void run_shard(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex call_mu_;  // one parallel_for at a time
};

}  // namespace kiln
