#include "runtime/cold_copies.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace kiln {

ColdCopies::ColdCopies(const Kernel& k, const BoundArgs& bound, int64_t large, int64_t total)
    : args_{bound} {
  const std::vector<Arg>& args = bound.args();
  auto size_of = [&](size_t i) {
    return args[i].is_buffer ? args[i].count * dtype_bytes(k.params[i].dtype) : int64_t{0};
  };
  int64_t largest = 0;
  for (size_t i = 0; i < args.size() && i < k.params.size(); ++i)
    largest = std::max(largest, size_of(i));
  std::vector<std::pair<size_t, size_t>> copied;  // (argument, bytes)
  int64_t bytes = 0;
  for (size_t i = 0; i < args.size() && i < k.params.size(); ++i) {
    const int64_t size = size_of(i);
    if (size == 0 || size < std::min(large, largest)) continue;
    copied.emplace_back(i, static_cast<size_t>(size));
    bytes += size;
  }
  for (int64_t n = 1; !copied.empty() && n * bytes < total; ++n) {
    BoundArgs copy = bound;
    for (auto [i, size] : copied) {
      memory_.emplace_back(size);
      std::memcpy(memory_.back().data(), args[i].data, size);
      copy = copy.with_buffer(i, memory_.back().data(), false);
    }
    args_.push_back(std::move(copy));
  }
}

const BoundArgs& ColdCopies::next() {
  const BoundArgs& a = args_[next_];
  next_ = next_ + 1 == args_.size() ? 0 : next_ + 1;
  return a;
}

}  // namespace kiln
