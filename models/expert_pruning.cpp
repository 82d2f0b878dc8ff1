#include "models/expert_pruning.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "ir/error.h"
#include "models/gguf_writer.h"

namespace kiln {

namespace {

// Expert e of a tensor that holds one slice per expert along its last axis
// (ggml order): the experts' matrices and biases, the router's rows (unless
// the router is kept whole).
bool per_expert(const GgufTensor& t, int64_t n_expert, bool keep_router) {
  if (t.name.rfind("blk.", 0) != 0 || t.shape.empty() || t.shape.back() != n_expert) return false;
  const std::string rest = t.name.substr(t.name.find('.', 4) + 1);
  if (rest.find("_exps.") != std::string::npos) return true;
  return !keep_router && (rest.rfind("ffn_gate_inp.", 0) == 0 || rest.rfind("exp_probs_b", 0) == 0);
}

int64_t layer_of(const GgufTensor& t) { return std::stoll(t.name.substr(4, t.name.find('.', 4))); }

}  // namespace

std::string ExpertHits::to_json() const {
  nlohmann::json hits = nlohmann::json::array();
  for (int64_t l = 0; l < n_layer; ++l)
    hits.push_back(
        std::vector<int64_t>(counts.begin() + l * n_expert, counts.begin() + (l + 1) * n_expert));
  nlohmann::json j = {{"model", model},
                      {"n_layer", n_layer},
                      {"n_expert", n_expert},
                      {"tokens", tokens},
                      {"hits", hits}};
  return j.dump() + "\n";
}

std::string ExpertHits::to_csv() const {
  std::string out = "layer,expert,hits\n";
  for (int64_t l = 0; l < n_layer; ++l)
    for (int64_t e = 0; e < n_expert; ++e)
      out += std::to_string(l) + "," + std::to_string(e) + "," +
             std::to_string(counts[l * n_expert + e]) + "\n";
  return out;
}

ExpertHits ExpertHits::from_json(const std::string& text, const std::string& what) {
  auto fail = [&](const std::string& why) -> ExpertHits {
    throw Error("expert hits '" + what + "': " + why);
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
  ExpertHits h;
  for (const char* key : {"n_layer", "n_expert", "tokens"})
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0)
      return fail("'" + std::string(key) + "' must be a non-negative integer");
  h.n_layer = j["n_layer"].get<int64_t>();
  h.n_expert = j["n_expert"].get<int64_t>();
  h.tokens = j["tokens"].get<int64_t>();
  if (j.contains("model") && j["model"].is_string()) h.model = j["model"].get<std::string>();
  const nlohmann::json& hits = j.contains("hits") ? j["hits"] : nlohmann::json();
  if (!hits.is_array() || static_cast<int64_t>(hits.size()) != h.n_layer)
    return fail("'hits' must be an array of n_layer = " + std::to_string(h.n_layer) + " rows");
  for (int64_t l = 0; l < h.n_layer; ++l) {
    const nlohmann::json& row = hits[static_cast<size_t>(l)];
    if (!row.is_array() || static_cast<int64_t>(row.size()) != h.n_expert)
      return fail("hits row " + std::to_string(l) +
                  " must hold n_expert = " + std::to_string(h.n_expert) + " counts");
    for (const nlohmann::json& v : row) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        return fail("hits row " + std::to_string(l) +
                    " has a count that is not a non-negative "
                    "integer");
      h.counts.push_back(v.get<int64_t>());
    }
  }
  return h;
}

std::vector<std::vector<int32_t>> top_experts(const ExpertHits& hits, int64_t k) {
  if (k < 1 || k > hits.n_expert)
    throw Error("keep " + std::to_string(k) + " experts of " + std::to_string(hits.n_expert) +
                " (need 1.." + std::to_string(hits.n_expert) + ")");
  std::vector<std::vector<int32_t>> keep;
  for (int64_t l = 0; l < hits.n_layer; ++l) {
    std::vector<int32_t> order(static_cast<size_t>(hits.n_expert));
    std::iota(order.begin(), order.end(), 0);
    const int64_t* c = &hits.counts[l * hits.n_expert];
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return c[a] > c[b]; });
    order.resize(static_cast<size_t>(k));
    std::sort(order.begin(), order.end());
    keep.push_back(order);
  }
  return keep;
}

std::vector<int32_t> read_expert_map(const GgufFile& f, int64_t n_layer, int64_t n_expert) {
  if (!f.has(kExpertMapKey)) return {};
  const int64_t original = static_cast<int64_t>(f.get_u64(kExpertCountKey));
  std::vector<int32_t> map = f.get_i32_array(kExpertMapKey);
  if (original < n_expert || static_cast<int64_t>(map.size()) != n_layer * original)
    f.fail(std::string(kExpertMapKey) + " has " + std::to_string(map.size()) +
           " entries; it needs n_layer x " + kExpertCountKey + " = " + std::to_string(n_layer) +
           " x " + std::to_string(original) + ", for " + std::to_string(n_expert) +
           " experts kept");
  for (int64_t l = 0; l < n_layer; ++l) {
    std::vector<bool> seen(static_cast<size_t>(n_expert), false);
    int64_t kept = 0;
    for (int64_t e = 0; e < original; ++e) {
      const int32_t to = map[l * original + e];
      if (to == -1) continue;
      if (to < 0 || to >= n_expert || seen[to])
        f.fail(std::string(kExpertMapKey) + ", layer " + std::to_string(l) + ": expert " +
               std::to_string(e) + " maps to " + std::to_string(to) +
               (to >= 0 && to < n_expert ? ", which another expert holds" : ", out of range"));
      seen[to] = true;
      ++kept;
    }
    if (kept != n_expert)
      f.fail(std::string(kExpertMapKey) + ", layer " + std::to_string(l) + " keeps " +
             std::to_string(kept) + " experts, the model has " + std::to_string(n_expert));
  }
  return map;
}

uint64_t prune_experts(const GgufFile& in, const std::vector<std::vector<int32_t>>& keep,
                       const std::string& out_path, const PruneOptions& o) {
  const std::string arch(in.get_string("general.architecture"));
  const std::string count_key = arch + ".expert_count";
  const int64_t n_expert = static_cast<int64_t>(in.get_u64(count_key));
  const int64_t n_layer = static_cast<int64_t>(in.get_u64(arch + ".block_count"));
  const int64_t used = static_cast<int64_t>(in.get_u64(arch + ".expert_used_count"));
  if (static_cast<int64_t>(keep.size()) != n_layer)
    in.fail("a keep list for " + std::to_string(keep.size()) + " layers, the model has " +
            std::to_string(n_layer));
  const int64_t k = static_cast<int64_t>(keep.front().size());
  if (k < used)
    in.fail("keeping " + std::to_string(k) + " experts, fewer than the " + std::to_string(used) +
            " each token uses");
  for (const auto& layer : keep) {
    std::set<int32_t> ids(layer.begin(), layer.end());
    if (static_cast<int64_t>(layer.size()) != k || static_cast<int64_t>(ids.size()) != k ||
        *ids.begin() < 0 || *ids.rbegin() >= n_expert)
      in.fail("every layer must keep " + std::to_string(k) + " distinct experts in 0.." +
              std::to_string(n_expert - 1));
  }
  // The translation from the original experts, through an earlier pruning's.
  std::vector<int32_t> before = read_expert_map(in, n_layer, n_expert);
  const int64_t original =
      before.empty() ? n_expert : static_cast<int64_t>(before.size()) / n_layer;
  std::vector<int32_t> map(static_cast<size_t>(n_layer * original), -1);
  for (int64_t l = 0; l < n_layer; ++l) {
    std::vector<int32_t> to_new(static_cast<size_t>(n_expert), -1);
    for (int64_t j = 0; j < k; ++j) to_new[keep[l][j]] = static_cast<int32_t>(j);
    for (int64_t e = 0; e < original; ++e) {
      const int32_t mid = before.empty() ? static_cast<int32_t>(e) : before[l * original + e];
      map[l * original + e] = mid < 0 ? -1 : to_new[mid];
    }
  }

  GgufWriter w(in.alignment());
  for (const auto& [key, value] : in.metadata()) {
    if (key == kExpertMapKey || key == kExpertCountKey || key == kExpertRenormKey ||
        key == "general.alignment")
      continue;
    w.add(key, key == count_key ? GgufWriter::u32(static_cast<uint32_t>(k))
                                : GgufWriter::copy_of(value));
  }
  w.add(kExpertCountKey, GgufWriter::u32(static_cast<uint32_t>(original)));
  w.add(kExpertMapKey, GgufWriter::array(map));
  if (o.renorm) w.add(kExpertRenormKey, GgufWriter::boolean(true));
  uint64_t bytes = 0;
  for (const GgufTensor& t : in.tensors()) {
    if (!per_expert(t, n_expert, o.keep_router)) {
      w.add_tensor(t.name, t.type, t.shape,
                   std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes));
      bytes += t.nbytes;
      continue;
    }
    const uint64_t slice = t.nbytes / static_cast<uint64_t>(n_expert);
    const std::vector<int32_t>& ids = keep.at(static_cast<size_t>(layer_of(t)));
    std::vector<int64_t> shape = t.shape;
    shape.back() = k;
    w.add_tensor(t.name, t.type, shape, [&t, &ids, slice](const GgufWriter::ByteSink& sink) {
      for (int32_t e : ids) sink(t.data + static_cast<uint64_t>(e) * slice, slice);
    });
    bytes += slice * static_cast<uint64_t>(k);
  }
  const std::string partial = out_path + ".partial";
  try {
    w.write(partial);
    std::filesystem::rename(partial, out_path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw;
  }
  return bytes;
}

}  // namespace kiln
