// gemv_int4w against a double-precision product of the dequantised weights
// and the interpreter (support/int4w_gemm.h, which states the tolerance).
#include <catch2/catch.hpp>

#include "support/int4w_gemm.h"

using kiln::test::check_int4w;
using kiln::test::Int4wCase;

TEST_CASE("gemv_int4w matches the dequantised product", "[kernels][qgemv]") {
  for (Int4wCase c :
       {Int4wCase{1, 32, 32, 0, 1}, Int4wCase{7, 256, 64, 1, 1}, Int4wCase{33, 1024, 128, 0, 1},
        Int4wCase{130, 512, 0, 1, 1}, Int4wCase{5, 4096, 128, 1, 1}})
    for (int bm : {1, 4, 8}) check_int4w("gemv_int4w", c, bm, 1);
}

TEST_CASE("gemv_int4w over several tokens (prompt GEMM) matches per token", "[kernels][qgemv]") {
  for (int64_t t : {2, 5, 9})
    for (int bt : {1, 4}) check_int4w("gemv_int4w", Int4wCase{19, 512, 64, 1, t}, 8, bt);
}
