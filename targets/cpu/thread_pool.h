// A persistent pool of worker threads that runs a grid in contiguous chunks.
//
// Kernel launches are short (a GEMV over 32 MiB takes about a millisecond,
// a decode step launches hundreds of kernels), so threads are created once
// and woken per launch. The calling thread works too. Chunks are claimed one
// at a time and shrink as the launch goes (each a 1/(2 threads) share of
// what is left, as in guided scheduling), so a thread slowed by a busy core
// takes fewer and the threads finish close together. A launch ends when
// every chunk is done, not when every worker has woken: on a shared machine
// a worker that is not scheduled in time simply finds no work left. A work
// item (a program) always runs whole on one thread, so results do not
// depend on the assignment.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
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
  // Claims and runs chunks of the launch `launch` until none is left.
  void run_chunks(uint32_t launch);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  // The current launch: its number (high 32 bits), its chunk count (next
  // 16) and its next unclaimed chunk (low 16). A claim is a compare-exchange
  // of the whole word, so a worker that wakes after its launch has ended can
  // never take a chunk of the next launch, nor run one with an old function.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> chunks_done_{0};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  std::vector<int64_t> bounds_;    // chunk c is [bounds_[c], bounds_[c + 1])
  std::atomic<bool> stop_{false};  // read by spinning workers too
  std::exception_ptr error_;
  std::mutex call_mu_;  // one parallel_for at a time
};

// fn(0) .. fn(n - 1) on up to `threads` short-lived threads (the caller's
// among them), each taking the next index when it is free: for a few long,
// uneven tasks (compiles), which the pool's contiguous chunks would leave
// to one thread while another idles, and which must not hold the pool that
// runs launches. The exception of each index that threw is kept in
// failed[index] (failed has n entries).
void run_on_threads(size_t n, size_t threads, const std::function<void(size_t)>& fn,
                    std::vector<std::exception_ptr>& failed);

}  // namespace kiln
