#include "kernels/attention/attention_window.h"

#include <string>

#include "ir/error.h"

namespace kiln {

Value window_begin(const Value& pos, const Value& window) {
  auto w = broadcast_to(window, pos.shape());
  auto zero = zeros(DType::i32, pos.shape());
  return where(w > zero, maximum(pos - w + 1, zero), zero);
}

void check_window(const std::string& kernel, int64_t window) {
  if (window < 0)
    throw Error("kernel '" + kernel + "': window = " + std::to_string(window) +
                " is negative (0: no sliding window)");
}

}  // namespace kiln
