#include "models/arch/arch.h"

#include <map>

#include "ir/error.h"

namespace kiln {

ArchBuilder arch_builder(const std::string& arch) {
  // qwen2's biases, qwen3's q/k norms and the experts of qwen3moe (and of
  // Mixtral-style llama files) are options of the shared blocks.
  static const std::map<std::string, ArchBuilder> kBuilders = {
      {"llama", build_llama},    {"qwen2", build_llama},   {"qwen3", build_llama},
      {"qwen3moe", build_llama}, {"gemma3", build_gemma3}, {"gpt-oss", build_gpt_oss}};
  auto it = kBuilders.find(arch);
  if (it != kBuilders.end()) return it->second;
  std::string names;
  for (const auto& [name, b] : kBuilders) names += (names.empty() ? "" : ", ") + name;
  throw Error("no forward for architecture '" + arch + "' (Kiln runs " + names + ")");
}

}  // namespace kiln
