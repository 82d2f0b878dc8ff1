// The kernel registry: every library kernel is present, builds and verifies
// for every dtype it declares, and specs resolve defaults as documented.
#include <catch2/catch.hpp>

#include "codegen/cuda/cuda_codegen.h"
#include "ir/printer.h"
#include "kernels/registry.h"
#include "runtime/runtime.h"

using namespace kiln;

TEST_CASE("every registered kernel builds for every declared dtype", "[kernels][registry]") {
  std::vector<std::string> names;
  for (const KernelDef& d : all_kernels()) names.push_back(d.name);
  CHECK(names == std::vector<std::string>{"add",
                                          "add_rows",
                                          "attention_decode",
                                          "attention_decode_batch",
                                          "attention_decode_merge",
                                          "attention_decode_split",
                                          "attention_decode_tiles",
                                          "attention_prefill",
                                          "attention_prefill_tiles",
                                          "attention_prefill_varlen",
                                          "aura_dequant",
                                          "aura_encode",
                                          "aura_rotate",
                                          "convert",
                                          "dot_peak",
                                          "fill",
                                          "gemm",
                                          "gemm_int4w_tiles",
                                          "gemm_tiles",
                                          "gemv",
                                          "gemv_awq",
                                          "gemv_int4w",
                                          "gemv_int4w_rows16",
                                          "gemv_w8a8",
                                          "get_rows",
                                          "glu",
                                          "kv_cache_store",
                                          "mma_peak",
                                          "moe_combine",
                                          "moe_sort",
                                          "moe_topk",
                                          "qgemm_tiles",
                                          "qgemv",
                                          "qgemv_rows16",
                                          "quantize_q8",
                                          "quantize_rows_i8",
                                          "read_peak",
                                          "rmsnorm",
                                          "rope",
                                          "scaled_add",
                                          "softmax"});
  for (const KernelDef& d : all_kernels()) {
    CHECK(build_kernel(d.make_spec()).name == d.name);
    for (const auto& [role, dtypes] : d.dtype_roles)
      for (DType t : dtypes) {
        INFO(d.name << " " << role << "=" << dtype_name(t));
        Kernel k = build_kernel(d.make_spec({{role, t}}));
        CHECK(k.name == d.name);
        CHECK_FALSE(print_kernel(k).empty());
      }
  }
}

TEST_CASE("specs take defaults, the kernel's heuristic, then the caller's values",
          "[kernels][registry]") {
  const KernelDef& g = find_kernel("gemv");
  Spec f16 = g.make_spec({{"W", DType::f16}});
  CHECK(f16.constexprs.at("BLOCK_M") == 4);  // measured per-target choices are tuning entries
  CHECK(f16.constexprs.at("BLOCK_K") == 64);
  Spec mine = g.make_spec({{"W", DType::f16}}, {{"BLOCK_M", 2}});
  CHECK(mine.constexprs.at("BLOCK_M") == 2);
  CHECK(mine.str() == "gemv[W=f16,X=f32,BLOCK_K=64,BLOCK_M=2,SCALE_BLOCK=0]");
  // get_rows' heuristic: a byte table without a format is read as Q8_0 blocks.
  const KernelDef& r = find_kernel("get_rows");
  CHECK(r.make_spec({{"W", DType::f32}}).constexprs.at("FMT") == 0);
  CHECK(r.make_spec({{"W", DType::u8}}).constexprs.at("FMT") == 8);
  CHECK(r.make_spec({{"W", DType::u8}}, {{"FMT", 12}}).constexprs.at("FMT") == 12);
  // A heuristic sees the target: the GPU tile kernels keep their mma-sized
  // tiles for a SIMT target and take register-sized ones on a CPU.
  const TargetDesc gpu = cuda_target_desc();
  const KernelDef& q = find_kernel("qgemm_tiles");
  CHECK(q.make_spec({}, {}, gpu).constexprs.at("BLOCK_M") == 64);
  CHECK(q.make_spec({}, {}, gpu).constexprs.at("BLOCK_T") == 32);
  CHECK(q.make_spec().constexprs.at("BLOCK_M") == 8);
  CHECK(q.make_spec({}, {{"BLOCK_M", 16}}).constexprs.at("BLOCK_M") == 16);
  CHECK(q.make_spec({}, {}, gpu).target.warp_size == 32);
  CHECK(find_kernel("mma_peak").make_spec().constexprs.at("TILE") == 16);
  CHECK(find_kernel("mma_peak").make_spec({}, {}, gpu).constexprs.at("TILE") == 64);
}
