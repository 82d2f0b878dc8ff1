// The one exception type Kiln throws for bad input: malformed kernels, bad
// launches, unknown names. Tools catch it at the top and print its message,
// so every message must name the thing and the reason on its own.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kiln
