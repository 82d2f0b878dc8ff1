// Attention sinks (attention_sinks.h) in every attention kernel against the
// double-precision reference (a sink logit per head in each softmax's
// denominator) and the interpreter, with and without a sliding window, and
// bit for bit: a sink of -inf gives exactly the sink-free kernel's output.
//
// Tolerance: as the kernels' own tests (2e-5 absolute): the sink adds one
// exp2 and one division per head and row.
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::HostBuffer;

namespace {
constexpr double kAtol = 2e-5;
const std::map<std::string, int64_t> kSplit16 = {{"SPLIT", 16}}, kNone;

HostBuffer run(const std::string& kernel, const AttentionCase& c, kiln::test::AttentionData& d,
               bool interpret = false) {
  return kiln::test::run_any_attention(kernel, c, d, interpret,
                                       kernel == "split" ? kSplit16 : kNone);
}

AttentionCase with_sinks(int64_t n_tokens, int64_t pos0, int64_t window) {
  AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
  c.sinks = true;
  c.window = window;
  c.n_tokens = n_tokens;
  c.pos0 = pos0;
  c.kv_len = pos0 + n_tokens + 2;
  c.max_ctx = c.kv_len + 5;
  return c;
}

const char* const kKernels[] = {"attention_decode", "split", "attention_prefill"};
}  // namespace

TEST_CASE("attention with sinks matches a double-precision reference", "[kernels][attention]") {
  for (const char* kernel : kKernels)
    for (int64_t window : {0, 6})
      for (auto [nt, pos0] : {std::pair{1, 0}, std::pair{1, 70}, std::pair{9, 40}}) {
        AttentionCase c = with_sinks(nt, pos0, window);
        INFO(kernel << " " << c.describe());
        kiln::test::AttentionData d(c);
        CHECK(kiln::test::worst_error(run(kernel, c, d), kiln::test::attention_reference(c, d),
                                      kAtol, 0) <= 1.0);
      }
}

TEST_CASE("attention with sinks matches the interpreter", "[kernels][attention]") {
  AttentionCase c = with_sinks(3, 20, 0);
  c.max_ctx = 0;
  for (const char* kernel : kKernels) {
    INFO(kernel);
    kiln::test::AttentionData d(c);
    HostBuffer out = run(kernel, c, d), outi = run(kernel, c, d, true);
    CHECK(kiln::test::worst_error(out, kiln::test::as_doubles(outi), kAtol, 0) <= 1.0);
  }
}

TEST_CASE("sinks of -inf give the sink-free kernel's bits", "[kernels][attention]") {
  for (const char* kernel : kKernels)
    for (int64_t window : {0, 6}) {
      AttentionCase c = with_sinks(5, 33, window);
      INFO(kernel << " " << c.describe());
      kiln::test::AttentionData d(c);
      for (int64_t h = 0; h < c.n_heads; ++h)
        d.sinks.set(h, -std::numeric_limits<double>::infinity());
      HostBuffer with = run(kernel, c, d);
      c.sinks = false;
      HostBuffer without = run(kernel, c, d);
      CHECK(std::memcmp(with.bytes().data(), without.bytes().data(), with.bytes().size()) == 0);
    }
}
