#include "runtime/tuning_db.h"

#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/error.h"

namespace kiln {

namespace {

// A variant lists only the constexprs that differ from the kernel's
// defaults, so a constexpr added with a default (qgemv's GROUPED) keeps
// the entries tuned before it.
bool is_default(const KernelDef& def, const std::string& name, int64_t value) {
  for (const auto& [c, v] : def.constexpr_defaults)
    if (c == name) return v == value;
  return false;
}

std::string join_map(const std::map<std::string, int64_t>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v && p < (int64_t{1} << 62)) p <<= 1;
  return p;
}

}  // namespace

bool TuningKey::operator<(const TuningKey& o) const {
  return std::tie(kernel, dtypes, bucket, variant, cpus) <
         std::tie(o.kernel, o.dtypes, o.bucket, o.variant, o.cpus);
}

std::string TuningKey::str() const {
  std::string d;
  for (const auto& [k, v] : dtypes)
    d += (d.empty() ? "" : ",") + k + "=" + std::string(dtype_name(v));
  std::string c;
  for (const std::string& cpu : cpus) c += (c.empty() ? " cpus=" : ",") + cpu;
  return kernel + " " + d + " " + join_map(bucket) +
         (variant.empty() ? "" : " " + join_map(variant)) + c;
}

void TuningDb::warn(const std::string& w) {
  std::fprintf(stderr, "kiln: warning: %s\n", w.c_str());
  warnings_.push_back(w);
}

void TuningDb::load_text(const std::string& text, const std::string& source_name) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    warn(source_name + ":" + std::to_string(e.source().begin.line) + ": malformed tuning file (" +
         std::string(e.description()) + "); ignoring it");
    return;
  }
  // toml++ iterates keys in sorted order; warnings are reported in file order.
  std::vector<std::pair<int, std::string>> found;
  auto report = [&](int l, const std::string& w) {
    found.emplace_back(l, source_name + ":" + std::to_string(l) + ": " + w);
  };
  for (const auto& [kname, node] : root) {
    std::string kernel(kname.str());
    int line = static_cast<int>(node.source().begin.line);
    const KernelDef* def = nullptr;
    for (const KernelDef& d : all_kernels())
      if (d.name == kernel) def = &d;
    if (!def) {
      report(line, "unknown kernel '" + kernel + "'; entry ignored");
      continue;
    }
    const toml::array* arr = node.as_array();
    if (!arr) {
      report(line, "'" + kernel + "' must be an array of tables ([[" + kernel + "]])");
      continue;
    }
    for (const toml::node& el : *arr) {
      int eline = static_cast<int>(el.source().begin.line);
      const toml::table* t = el.as_table();
      if (!t) {
        report(eline, kernel + " entry is not a table; ignored");
        continue;
      }
      TuningKey key{kernel, {}, {}};
      std::map<std::string, int64_t> consts;
      std::string problem;
      for (const auto& [k, v] : *t) {
        std::string name(k.str());
        if (name == "dtypes" && v.is_table()) {
          for (const auto& [role, dt] : *v.as_table()) {
            DType parsed;
            auto s = dt.value<std::string>();
            if (!s || !try_parse_dtype(*s, &parsed)) {
              problem = "dtype of role '" + std::string(role.str()) + "' is not a dtype name";
              break;
            }
            key.dtypes[std::string(role.str())] = parsed;
          }
        } else if (name == "variant" && v.is_table()) {
          for (const auto& [c, n] : *v.as_table()) {
            auto iv = n.value<int64_t>();
            if (!iv || def->tunable(std::string(c.str()))) {
              problem = "variant entry '" + std::string(c.str()) +
                        "' must be an integer constexpr that is not a tunable";
              break;
            }
            if (!is_default(*def, std::string(c.str()), *iv))
              key.variant[std::string(c.str())] = *iv;
          }
        } else if (name == "bucket" && v.is_table()) {
          for (const auto& [dim, n] : *v.as_table()) {
            auto iv = n.value<int64_t>();
            if (!iv || *iv <= 0) {
              problem = "bucket size '" + std::string(dim.str()) + "' is not a positive integer";
              break;
            }
            if (std::find(def->shape_keys.begin(), def->shape_keys.end(), dim.str()) ==
                def->shape_keys.end()) {
              problem =
                  "bucket size '" + std::string(dim.str()) + "' is not a shape key of " + kernel;
              break;
            }
            key.bucket[std::string(dim.str())] = *iv;
          }
        } else if (name == "cpus" && v.is_array()) {
          for (const toml::node& c : *v.as_array()) {
            auto cpu = c.value<std::string>();
            if (!cpu || cpu->empty()) {
              problem = "cpus must list CPU model names (strings)";
              break;
            }
            key.cpus.push_back(*cpu);
          }
          if (problem.empty() && key.cpus.empty()) problem = "cpus lists no CPU model";
          std::sort(key.cpus.begin(), key.cpus.end());
        } else if (auto iv = v.value<int64_t>(); iv && v.is_integer()) {
          const Tunable* tn = def->tunable(name);
          if (!tn) {
            problem = "'" + name + "' is not a tunable of " + kernel;
          } else if (std::find(tn->values.begin(), tn->values.end(), *iv) == tn->values.end()) {
            std::string ok;
            for (int64_t x : tn->values) ok += (ok.empty() ? "" : ", ") + std::to_string(x);
            problem =
                name + " = " + std::to_string(*iv) + " is outside its valid values (" + ok + ")";
          } else {
            consts[name] = *iv;
          }
        } else {
          problem = "unexpected key '" + name + "'";
        }
        if (!problem.empty()) break;
      }
      if (problem.empty()) {
        try {
          Spec s = def->make_spec(key.dtypes);
          key.dtypes = s.dtypes;  // complete the roles the entry left to defaults
        } catch (const Error& e) {
          problem = e.what();
        }
      }
      if (problem.empty() && consts.empty()) problem = "sets no constexpr";
      if (!problem.empty()) {
        report(eline, kernel + " entry: " + problem + "; entry ignored, the heuristic applies");
        continue;
      }
      entries_[key] = consts;
      sources_[key] = source_name + ":" + std::to_string(eline);
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& f : found) warn(f.second);
}

void TuningDb::load_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  std::ifstream in(path);
  if (!in) {
    warn(path + ": cannot be read; ignored");
    return;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  load_text(ss.str(), path);
}

std::optional<std::map<std::string, int64_t>> TuningDb::find(const TuningKey& key) const {
  if (auto m = match(key)) return m->constexprs;
  return std::nullopt;
}

std::optional<TuningDb::Match> TuningDb::match(const TuningKey& key) const {
  // The entry whose bucket names the most of key's sizes, all equal:
  // the whole bucket, then a partial one, then none.
  const std::pair<const TuningKey, std::map<std::string, int64_t>>* best = nullptr;
  std::pair<size_t, bool> best_rank;  // (sizes named, restricted to this CPU)
  for (auto it = entries_.lower_bound(TuningKey{key.kernel, {}, {}});
       it != entries_.end() && it->first.kernel == key.kernel; ++it) {
    const TuningKey& k = it->first;
    if (k.dtypes != key.dtypes || k.variant != key.variant) continue;
    if (!k.cpus.empty() && std::find(k.cpus.begin(), k.cpus.end(), cpu_) == k.cpus.end()) continue;
    bool matches = std::all_of(k.bucket.begin(), k.bucket.end(), [&](const auto& dim) {
      auto size = key.bucket.find(dim.first);
      return size != key.bucket.end() && size->second == dim.second;
    });
    std::pair<size_t, bool> rank{k.bucket.size(), !k.cpus.empty()};
    if (matches && (!best || rank > best_rank)) {
      best = &*it;
      best_rank = rank;
    }
  }
  if (!best) return std::nullopt;
  return Match{best->second, best->first, sources_.at(best->first)};
}

void TuningDb::set(const TuningKey& key, const std::map<std::string, int64_t>& constexprs) {
  entries_[key] = constexprs;
  sources_[key] = "set by this process";
}

std::string TuningDb::to_toml() const {
  std::string out = "# Kiln tuning database; written by `kiln tune`, read at startup.\n";
  for (const auto& [key, consts] : entries_) {
    out += "\n[[" + key.kernel + "]]\ndtypes = { ";
    bool first = true;
    for (const auto& [r, t] : key.dtypes) {
      out += std::string(first ? "" : ", ") + r + " = \"" + std::string(dtype_name(t)) + "\"";
      first = false;
    }
    out += " }\nbucket = { ";
    first = true;
    for (const auto& [d, v] : key.bucket) {
      out += std::string(first ? "" : ", ") + d + " = " + std::to_string(v);
      first = false;
    }
    out += " }\n";
    if (!key.variant.empty()) {
      out += "variant = { ";
      first = true;
      for (const auto& [c, v] : key.variant) {
        out += std::string(first ? "" : ", ") + c + " = " + std::to_string(v);
        first = false;
      }
      out += " }\n";
    }
    if (!key.cpus.empty()) {
      out += "cpus = [";
      for (size_t i = 0; i < key.cpus.size(); ++i)
        out += std::string(i ? ", " : "") + "\"" + key.cpus[i] + "\"";
      out += "]\n";
    }
    for (const auto& [c, v] : consts) out += c + " = " + std::to_string(v) + "\n";
  }
  return out;
}

void TuningDb::save_to(const std::string& path) const {
  TuningDb merged(cpu_);
  merged.load_file(path);
  for (const auto& [k, v] : entries_) merged.set(k, v);
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << merged.to_toml();
    if (!out) throw Error("cannot write the tuning database '" + path + "'");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("cannot write the tuning database '" + path + "': " + ec.message());
}

std::map<std::string, int64_t> spec_variant(const KernelDef& def, const Spec& spec) {
  std::map<std::string, int64_t> v;
  for (const auto& [c, x] : spec.constexprs)
    if (!def.tunable(c) && !is_default(def, c, x)) v[c] = x;
  return v;
}

std::map<std::string, int64_t> shape_bucket(const KernelDef& def, const ScalarArgs& sizes) {
  std::map<std::string, int64_t> b;
  for (const std::string& k : def.shape_keys) b[k] = next_pow2(sizes.i(k));
  return b;
}

std::string tuning_class(const CpuTarget& t) {
  if (t.triple.rfind("aarch64", 0) == 0) return "aarch64";
  if (t.cpu == "x86-64-v4" || (t.has_feature("avx512f") && t.has_feature("avx512bw")))
    return "x86-64-v4";
  if (t.cpu == "x86-64-v3" || (t.has_feature("avx2") && t.has_feature("fma"))) return "x86-64-v3";
  return "generic";
}

}  // namespace kiln
