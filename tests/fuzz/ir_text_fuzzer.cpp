// libFuzzer entry point for the text-form parser: any input must either
// parse to a verified kernel or raise kiln::Error. Anything else (another
// exception, a crash, a sanitizer report) is a bug. A kernel that parses
// must also print back to text that parses to the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Kernel k;
  try {
    k = kiln::parse_kernel(text);
  } catch (const kiln::Error&) {
    return 0;
  }
  std::string printed = kiln::print_kernel(k);
  // A printed kernel failing to re-parse, or printing differently, is a bug:
  // let the exception escape (or abort) so libFuzzer reports the input.
  if (kiln::print_kernel(kiln::parse_kernel(printed)) != printed) std::abort();
  return 0;
}
