#include "tools/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "ir/error.h"
#include "kernels/attention/kv_cache.h"

namespace kiln {

CliArgs::CliArgs(const std::vector<std::string>& argv, const std::vector<std::string>& flags) {
  static const std::map<std::string, std::string> kShort = {
      {"-m", "--model"}, {"-p", "--prompt"}, {"-n", "--n-predict"}, {"-t", "--threads"},
      {"-s", "--seed"},  {"-o", "--out"},    {"-f", "--file"}};
  for (size_t i = 0; i < argv.size(); ++i) {
    auto short_form = kShort.find(argv[i]);
    const std::string& a = short_form == kShort.end() ? argv[i] : short_form->second;
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    size_t eq = name.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
      if (has_value) throw Error("option --" + name + " takes no value");
      flags_[name] = true;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argv.size()) throw Error("option --" + name + " needs a value");
      value = argv[++i];
    }
    values_[name].push_back(value);
  }
}

std::string CliArgs::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second.back();
}

std::vector<std::string> CliArgs::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(parse_int(item, what));
  return out;
}

int64_t parse_int(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    int64_t r = std::stoll(text, &used);
    if (used == text.size()) return r;
  } catch (const std::exception&) {
  }
  throw Error(what + " expects an integer, got '" + text + "'");
}

double parse_double(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    double r = std::stod(text, &used);
    if (used == text.size()) return r;
  } catch (const std::exception&) {
  }
  throw Error(what + " expects a number, got '" + text + "'");
}

KvCacheType parse_kv_type(const std::string& text) {
  try {
    return parse_kv_cache_type(text);
  } catch (const Error& e) {
    throw Error(std::string("--kv: ") + e.what());
  }
}

void check_writable_file(const std::string& path, const std::string& option) {
  const bool existed = std::filesystem::exists(path);
  FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) throw Error(option + " " + path + ": cannot be written (" + std::strerror(errno) + ")");
  std::fclose(f);
  if (!existed) std::filesystem::remove(path);
}

void check_writable_dir(const std::string& dir, const std::string& option) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(option + " " + dir + ": cannot be created (" + ec.message() + ")");
  if (access(dir.c_str(), W_OK) != 0)
    throw Error(option + " " + dir + ": cannot be written (" + std::strerror(errno) + ")");
}

SpecArgs parse_spec_args(const CliArgs& a) {
  if (a.has("draft") && a.has("spec")) throw Error("--draft and --spec: give one of them");
  if (a.has("draft-k") && !a.has("draft") && !a.has("spec"))
    throw Error("--draft-k: give --draft MODEL or --spec ngram to guess with");
  return {a.get("draft"), a.get("spec"), a.get_int("draft-k", 4), a.flag("draft-k-fixed")};
}

int64_t CliArgs::get_int(const std::string& name, int64_t def) const {
  return has(name) ? parse_int(get(name), "option --" + name) : def;
}

void CliArgs::allow_only(const std::vector<std::string>& known) const {
  auto check = [&](const std::string& n) {
    if (std::find(known.begin(), known.end(), n) == known.end())
      throw Error("unknown option --" + n);
  };
  for (const auto& [n, v] : values_) check(n);
  for (const auto& [n, v] : flags_) check(n);
}

}  // namespace kiln

#include "kernels/registry.h"
#include "runtime/plugin.h"
#include "runtime/tuner.h"

namespace kiln {

Spec spec_from_args(const std::string& kernel, const CliArgs& a, const TargetDesc& target) {
  const KernelDef& def = find_kernel(kernel);
  std::map<std::string, DType> dtypes;
  for (const std::string& d : a.all("dtype")) {
    size_t eq = d.find('=');
    if (eq == std::string::npos) {
      if (def.dtype_roles.empty()) throw Error("kernel '" + kernel + "' takes no dtype");
      dtypes[def.dtype_roles.front().first] = parse_dtype(d);
    } else {
      dtypes[d.substr(0, eq)] = parse_dtype(d.substr(eq + 1));
    }
  }
  return def.make_spec(dtypes, const_args(a), target);
}

std::map<std::string, int64_t> const_args(const CliArgs& a) {
  std::map<std::string, int64_t> consts;
  for (const std::string& c : a.all("const")) {
    size_t eq = c.find('=');
    if (eq == std::string::npos) throw Error("--const expects NAME=VALUE, got '" + c + "'");
    consts[c.substr(0, eq)] = parse_int(c.substr(eq + 1), "--const " + c.substr(0, eq));
  }
  return consts;
}

std::map<std::string, std::string> parse_pairs(const std::string& s, const std::string& opt) {
  std::map<std::string, std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw Error(opt + " expects NAME=VALUE[,NAME=VALUE...], got '" + item + "'");
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

TuneOptions tune_options_from_args(const std::string& kernel, const CliArgs& a, bool tuning) {
  TuneOptions o;
  Spec given = spec_from_args(kernel, a);
  o.dtypes = given.dtypes;
  const KernelDef& def = find_kernel(kernel);
  for (const std::string& c : a.all("const")) {
    std::string name = c.substr(0, c.find('='));
    if (def.tunable(name) && tuning)
      throw Error("--const " + name + " is a tunable; tuning searches it");
    o.fixed[name] = given.constexprs.at(name);
  }
  for (const auto& [k, v] : parse_pairs(a.get("shape"), "--shape"))
    o.shape[k] = parse_int(v, "--shape " + k);
  for (const std::string& s : a.all("scalar"))
    for (const auto& [k, v] : parse_pairs(s, "--scalar"))
      o.floats[k] = parse_double(v, "--scalar " + k);
  return o;
}

void load_plugins(const CliArgs& a) {
  for (const std::string& p : a.all("plugin")) load_plugin(p);
}

}  // namespace kiln
