// A persistent pool of worker threads that runs a grid in contiguous chunks.
//
// Kernel launches are short (a GEMV over 32 MiB takes about a millisecond),
// so threads are created once and woken per launch. The calling thread
// works too. Threads take contiguous chunks (about 8 per thread) from a
// shared counter, so a thread slowed by a busy core takes fewer; a work
// item (a program) always runs whole on one thread, so results do not
// depend on the assignment.
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

  // Runs fn(begin, end) over [0, n) in contiguous chunks on all threads;
  // returns when all are done. The first exception thrown by a chunk is
  // rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex call_mu_;  // one parallel_for at a time
};

}  // namespace kiln
