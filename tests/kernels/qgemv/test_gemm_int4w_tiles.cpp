// gemm_int4w_tiles against a double-precision product of the dequantised
// weights and the interpreter (support/int4w_gemm.h, which states the
// tolerance): group sizes and zero points, rows and tokens off the tiles.
#include <catch2/catch.hpp>

#include "support/int4w_gemm.h"

using kiln::test::check_int4w;
using kiln::test::Int4wCase;

TEST_CASE("gemm_int4w_tiles matches the dequantised product", "[kernels][qgemv]") {
  for (Int4wCase c : {Int4wCase{19, 512, 64, 1, 9}, Int4wCase{33, 1024, 128, 0, 3},
                      Int4wCase{16, 256, 32, 1, 17}, Int4wCase{20, 512, 0, 0, 8}})
    check_int4w("gemm_int4w_tiles", c, 16, 8);
  check_int4w("gemm_int4w_tiles", Int4wCase{70, 512, 128, 1, 37}, 32, 16);
}
