// A hash map keyed by std::string that can be searched with a string_view.
//
// Readers and tokenizers look names up by views into a mapped file or into
// the text being encoded; a transparent hash avoids building a std::string
// for every lookup.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kiln {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringViewHash, std::equal_to<>>;

}  // namespace kiln
