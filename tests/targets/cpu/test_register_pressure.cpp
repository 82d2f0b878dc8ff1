// The block sizes Kiln ships for AVX-512 keep a GEMV's accumulator tile in
// registers. A tile of BLOCK_M x BLOCK_K f32 needs BLOCK_M * BLOCK_K / 16
// of the 32 zmm registers; 8 x 64 takes all of them, and its main loop
// then spills and reloads accumulators every step (the 16-bit defaults
// were 8 x 64 once: 0.57-0.78 of the DRAM probe against 0.75-0.98 at
// 4 x 64). Checked in the assembly for znver4, whatever the host: no
// single-block loop that does FMAs moves a vector register to or from the
// stack. The shipped FP8 entry is looked up with its SCALE_BLOCK, as the
// runtime looks it up (without it, the entry never applied).
#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "runtime/tuning_db.h"
#include "support/zen4_target.h"
#include "targets/cpu/cpu_jit.h"

using namespace kiln;

namespace {

// Vector registers stored to or loaded from the stack in each loop of `s`
// that is one basic block (a label, straight-line code, a branch back to
// the label: the shape of a GEMV's main loop) and does FMAs. Masks or
// pointers kept on the stack are not counted.
std::vector<int> fma_loop_spills(const std::string& s) {
  std::vector<int> spills;
  std::istringstream in(s);
  std::string label;
  int fmas = 0, stack = 0;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind(".LBB", 0) == 0 && l.back() == ':') {
      label = l.substr(0, l.size() - 1);
      fmas = stack = 0;
      continue;
    }
    fmas += l.find("vfmadd") != std::string::npos;
    stack += l.find("(%rsp)") != std::string::npos && l.find("mm") != std::string::npos;
    auto j = l.find(".LBB");
    if (l.rfind("\tj", 0) == 0 && j != std::string::npos && !label.empty() &&
        l.substr(j) == label && fmas)
      spills.push_back(stack);
  }
  return spills;
}

// The GEMV of W over f32 x with `blocks`; FP8 weights with 128 x 128 block
// scales, as checkpoints have them.
Spec gemv_spec(DType w, std::map<std::string, int64_t> blocks = {}) {
  if (w == DType::f8e4m3) blocks["SCALE_BLOCK"] = 128;
  return find_kernel("gemv").make_spec({{"W", w}, {"X", DType::f32}}, blocks);
}

std::vector<int> gemv_spills(DType w, const std::map<std::string, int64_t>& blocks) {
  return fma_loop_spills(cpu_assembly(build_kernel(gemv_spec(w, blocks)), test::zen4_target()));
}

}  // namespace

TEST_CASE("the shipped AVX-512 GEMV block sizes keep the accumulators in registers",
          "[targets][cpu]") {
  for (const char* cpu : {"znver5", "sapphirerapids"}) {
    TuningDb db(cpu);
    db.load_text(default_tuning_text("x86-64-v4"), "x86-64-v4");
    for (DType w : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3})
      for (int64_t k : {4096, 16384}) {  // buckets: powers of two
        // Looked up as the runtime does, with the spec's variant.
        Spec spec = gemv_spec(w);
        auto blocks = db.find({"gemv",
                               spec.dtypes,
                               {{"m", 4096}, {"k", k}},
                               spec_variant(find_kernel("gemv"), spec)});
        REQUIRE(blocks);
        INFO(cpu << ": " << dtype_name(w) << " k " << k << ": BLOCK_M " << blocks->at("BLOCK_M")
                 << ", BLOCK_K " << blocks->at("BLOCK_K"));
        auto spills = gemv_spills(w, *blocks);
        REQUIRE_FALSE(spills.empty());
        for (int n : spills) CHECK(n == 0);
      }
  }
}

TEST_CASE("a GEMV tile of 32 accumulator registers is seen to spill", "[targets][cpu]") {
  // The check above can fail: 8 x 64 f32 accumulators leave no register
  // for the weights and x.
  auto spills = gemv_spills(DType::f16, {{"BLOCK_M", 8}, {"BLOCK_K", 64}});
  REQUIRE_FALSE(spills.empty());
  int total = 0;
  for (int n : spills) total += n;
  CHECK(total > 0);
}
