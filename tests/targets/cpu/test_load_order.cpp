// Code generation for AMD Zen keeps a streaming loop's loads close to
// address order (cpu_target.cpp: LLVM's post-RA scheduler is off). Zen's
// scheduling model turns that scheduler on, and it hoisted the Q4_K GEMV's
// code loads far out of order (..., 896, 832, 512, 1408, 1344, 576, ...),
// which cost one core about a sixth of its DRAM bandwidth. The pre-RA
// scheduler still swaps neighbours within a few lines, which is harmless.
// Compiled for znver4 whatever the host.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "runtime/runtime.h"
#include "support/zen4_target.h"
#include "targets/cpu/cpu_jit.h"

using namespace kiln;

TEST_CASE("a Q4_K GEMV chunk loads its codes close to address order on znver4", "[targets][cpu]") {
  Spec spec = find_kernel("qgemv_rows16").make_spec({}, {{"FMT", 12}, {"BLOCK_T", 1}});
  std::string s = cpu_assembly(build_kernel(spec), test::zen4_target());
  // Full-vector loads at constant offsets from one address (a base
  // register, or a base and an index). The chunk loop's code loads are the
  // address with the most of them: 8 per pair of sub-blocks, 32 where the
  // compiler unrolls the loop over the pairs (each copy of the loop the
  // compiler made has its own; the first copy is checked).
  std::regex load(R"(vmovdqu64\s+(-?\d+)?\((%r\w+(?:,%r\w+)?)\), %zmm)");
  std::map<std::string, std::vector<long>> by_base;
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, load))
      by_base[m[2]].push_back(m[1].matched ? std::stol(m[1]) : 0);
  }
  std::vector<long> codes;
  for (const auto& [base, offs] : by_base)
    if (offs.size() > codes.size())
      codes.assign(offs.begin(), offs.begin() + std::min<size_t>(32, offs.size()));
  INFO(s);
  REQUIRE(codes.size() >= 8);
  long furthest = codes[0];
  for (size_t i = 1; i < codes.size(); ++i) {
    INFO("load " << i << " at " << codes[i] << " after one at " << furthest);
    CHECK(codes[i] >= furthest - 128);  // at most 2 cache lines behind
    furthest = std::max(furthest, codes[i]);
  }
}
