// A `tiny` preset model of an architecture (kiln gen-model's), written once
// per test process into its own folder, removed at exit: a folder shared
// across runs would keep models of an older preset, and one shared by the
// processes ctest runs in parallel would let one read a file another is
// still writing. Tests asking for the same family, format and seed share it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "models/model_generator.h"
#include "support/temp_dir.h"

namespace kiln::test {

inline std::string tiny_model(const std::string& family, WeightFormat format = WeightFormat::f16,
                              uint64_t seed = 3) {
  static const TempDir models("kiln-test-models");
  const std::string path = models.path(family + "-" + std::string(weight_format_name(format)) +
                                       "-" + std::to_string(seed) + ".gguf");
  if (!std::filesystem::exists(path)) {
    GenModelOptions o;
    o.format = format;
    o.seed = seed;
    generate_model(find_model_preset(family, "tiny"), o, path);
  }
  return path;
}

}  // namespace kiln::test
