// PackedWeights makes the copies the backend's kernel policy asks for: the
// cpu's 16-row layouts, none for the GPU's (cuda-sim runs its policy).
//
// It splits each tensor's 16-row groups across the host threads:
// the copy must not depend on the split. Every interleaved tensor of
// generated models (2-D matrices and 3-D expert stacks, Q4_K, Q6_K, Q8_0
// and Q4_0) is compared byte for byte with one serial interleave of the
// whole tensor, for runtimes of 1, 2 and 3 threads (3 splits 16-row groups
// unevenly).
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kernels/quant/rows16.h"
#include "models/gguf.h"
#include "models/model_generator.h"
#include "models/model_presets.h"
#include "models/packed_weights.h"
#include "support/runtime_fixture.h"
#include "support/temp_dir.h"

using namespace kiln;

namespace {

void check_packed(const std::string& family, WeightFormat format) {
  const test::TempDir tmp("kiln-test-packed");
  const std::string path = tmp.path("m.gguf");
  GenModelOptions o;
  o.format = format;
  o.seed = 5;
  generate_model(find_model_preset(family, "tiny"), o, path);
  for (int threads : {1, 2, 3}) {
    GgufFile file = GgufFile::open(path);
    Runtime rt(RuntimeOptions{threads, test::cache_dir(), false, "cpu"});
    PackedWeights packed(file, rt);
    int interleaved = 0;
    for (const GgufTensor& t : file.tensors()) {
      const uint8_t* copy = packed.rows16(t);
      if (!copy) continue;
      ++interleaved;
      const int64_t k = t.shape[0], rows = t.shape[1] * (t.shape.size() == 3 ? t.shape[2] : 1);
      const TensorType qt = t.type;
      // The pages were released after packing; reading them maps them again.
      std::vector<uint8_t> serial = ggml::interleave_rows16(qt, t.data, rows, k);
      INFO(family << " " << weight_format_name(format) << " " << t.name << ", " << threads
                  << " threads");
      REQUIRE(std::equal(serial.begin(), serial.end(), copy));
    }
    CHECK(interleaved > 0);
  }
}

}  // namespace

TEST_CASE("packed weights: the 16-row copies do not depend on the thread split") {
  check_packed("llama", WeightFormat::q4_k_m);
  check_packed("llama", WeightFormat::q4_0);
  check_packed("llama-moe", WeightFormat::q8_0);
}

TEST_CASE("packed weights: the GPU policy keeps the file's layout, with no copies") {
  const test::TempDir tmp("kiln-test-packed");
  const std::string path = tmp.path("m.gguf");
  GenModelOptions o;
  o.format = WeightFormat::q4_k_m;
  generate_model(find_model_preset("llama", "tiny"), o, path);
  GgufFile file = GgufFile::open(path);
  Runtime sim(RuntimeOptions{1, test::cache_dir(), false, "cuda-sim"});
  Runtime cpu(RuntimeOptions{1, test::cache_dir(), false, "cpu"});
  PackedWeights gpu_copies(file, sim), cpu_copies(file, cpu);
  int interleaved = 0;
  for (const GgufTensor& t : file.tensors()) {
    INFO(t.name);
    CHECK(gpu_copies.rows16(t) == nullptr);
    interleaved += cpu_copies.rows16(t) != nullptr;
  }
  CHECK(interleaved > 0);
}
