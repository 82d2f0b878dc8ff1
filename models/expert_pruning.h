// Expert pruning: which experts a workload routes to (a hit map per layer),
// the experts to keep, and a compact GGUF with only those.
//
// An MoE model often routes most tokens of a domain to a few of its experts.
// `kiln moe-stats` counts the (token, slot) pairs each expert of each layer
// receives over a prompt file (Llm::count_expert_hits, a kernel of the
// plan); `kiln prune-experts` keeps the K most used per layer and writes a
// GGUF whose expert tensors (and expert biases) hold only those, in their
// old order, and whose router rows are reduced alike, so the router chooses
// among the kept experts: a smaller model llama.cpp loads as it is. The old
// -> new translation (-1: pruned) is recorded in the file's metadata
// (kExpertMapKey, per layer, flattened) and checked when the file is read.
// With keep_router the router stays whole (a file only Kiln runs): it
// chooses among all the original experts, a pruned choice is dropped with
// weight 0, and with renorm the remaining weights are renormalised.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/gguf.h"

namespace kiln {

inline constexpr const char* kExpertMapKey = "kiln.expert_map";
inline constexpr const char* kExpertCountKey = "kiln.expert_count_original";
inline constexpr const char* kExpertRenormKey = "kiln.expert_renorm";

struct PruneOptions {
  bool keep_router = false;
  bool renorm = false;  // with keep_router
};

struct ExpertHits {
  std::string model;
  int64_t n_layer = 0, n_expert = 0;
  int64_t tokens = 0;           // prompt tokens the counts come from
  std::vector<int64_t> counts;  // [n_layer][n_expert]

  // {"model", "n_layer", "n_expert", "tokens", "hits": [[...] per layer]}
  std::string to_json() const;
  // layer,expert,hits rows under a header.
  std::string to_csv() const;
  // Throws naming `what` (a file name) and the field for anything malformed.
  static ExpertHits from_json(const std::string& text, const std::string& what);
};

// Per layer, the k experts with the most hits (ties: the lower id), in
// ascending id order.
std::vector<std::vector<int32_t>> top_experts(const ExpertHits& hits, int64_t k);

// Writes `in` with only the experts `keep` lists per layer; the rest is
// copied as it is. Returns the bytes of the tensors written.
uint64_t prune_experts(const GgufFile& in, const std::vector<std::vector<int32_t>>& keep,
                       const std::string& out_path, const PruneOptions& o = {});

// The translation table of a pruned file (none: an empty vector), checked
// against the model: its length, and per layer exactly n_expert kept ids,
// unique and in range. Throws naming the file and the layer.
std::vector<int32_t> read_expert_map(const GgufFile& f, int64_t n_layer, int64_t n_expert);

}  // namespace kiln
