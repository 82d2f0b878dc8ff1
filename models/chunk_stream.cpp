#include "models/chunk_stream.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

namespace kiln {

void stream_chunks(int64_t n_chunks, int threads,
                   const std::function<void(int64_t chunk, std::vector<uint8_t>* out)>& encode,
                   const GgufWriter::ByteSink& sink) {
  const int workers =
      static_cast<int>(std::min<int64_t>(std::max(threads, 1), std::max<int64_t>(n_chunks, 1)));
  const int64_t window = 2 * static_cast<int64_t>(workers);
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(window));
  for (int64_t first = 0; first < n_chunks; first += window) {
    const int64_t count = std::min(window, n_chunks - first);
    std::atomic<int64_t> next{0};
    std::exception_ptr error;
    std::atomic<bool> failed{false};
    auto work = [&] {
      try {
        for (int64_t i; !failed && (i = next++) < count;)
          encode(first + i, &out[static_cast<size_t>(i)]);
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < workers && w < count; ++w) pool.emplace_back(work);
    work();
    for (std::thread& th : pool) th.join();
    if (error) std::rethrow_exception(error);
    for (int64_t i = 0; i < count; ++i) {
      const std::vector<uint8_t>& b = out[static_cast<size_t>(i)];
      sink(b.data(), b.size());
    }
  }
}

}  // namespace kiln
