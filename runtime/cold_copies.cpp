#include "runtime/cold_copies.h"

#include <cstring>
#include <utility>

namespace kiln {

ColdCopies::ColdCopies(const Kernel& k, const std::vector<Arg>& args, int64_t large, int64_t total)
    : args_{args} {
  std::vector<std::pair<size_t, size_t>> copied;  // (argument, bytes)
  int64_t bytes = 0;
  for (size_t i = 0; i < args.size() && i < k.params.size(); ++i)
    if (args[i].is_buffer) {
      auto size = static_cast<size_t>(args[i].count * dtype_bytes(k.params[i].dtype));
      if (static_cast<int64_t>(size) < large) continue;
      copied.emplace_back(i, size);
      bytes += static_cast<int64_t>(size);
    }
  for (int64_t n = 1; !copied.empty() && n * bytes < total; ++n) {
    std::vector<Arg> copy = args;
    for (auto [i, size] : copied) {
      memory_.emplace_back(size);
      std::memcpy(memory_.back().data(), args[i].data, size);
      copy[i].data = memory_.back().data();
    }
    args_.push_back(std::move(copy));
  }
}

const std::vector<Arg>& ColdCopies::next() {
  const std::vector<Arg>& a = args_[next_];
  next_ = next_ + 1 == args_.size() ? 0 : next_ + 1;
  return a;
}

}  // namespace kiln
