// Python's str methods over UTF-8 text. Chat templates call strip(),
// split(), startswith() and friends on message contents and slice them by
// character ([::-1], [:-1]); Python counts code points, treats more than
// ASCII as whitespace (U+3000, U+00A0, ...) and maps case beyond ASCII. The
// interpreter and the filters share these so that a content in any script
// renders as Python renders it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jinja::pystr {

// str.isspace() of one code point.
bool is_space(uint32_t cp);
// str.isprintable() of one code point (repr escapes the others).
bool is_printable(uint32_t cp);
// str.isalnum() of one code point (regex \w is this or '_').
bool is_alnum(uint32_t cp);

size_t length(std::string_view s);  // in code points
std::vector<uint32_t> codepoints(std::string_view s);
std::string encode(const std::vector<uint32_t>& cps, size_t begin, size_t end);

// strip/lstrip/rstrip: whitespace, or the characters of `chars`.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split(sep, maxsplit) / rsplit; no sep splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right = false);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count = -1);
// str.find / str.count in code points (-1 when absent).
int64_t find(std::string_view s, std::string_view sub, bool from_right = false);
int64_t count(std::string_view s, std::string_view sub);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize()
std::string title(std::string_view s);       // str.title()
bool is_lower(std::string_view s);           // str.islower()
bool is_upper(std::string_view s);           // str.isupper()

// Python's repr(str): quotes and escapes as Python picks them.
std::string repr(std::string_view s);

}  // namespace kiln::jinja::pystr
