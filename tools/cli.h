// The `kiln` command's subcommands and the small argument reader they share.
//
// Each subcommand lives in its own cmd_*.cpp and receives the arguments
// after its name. Options are `--name value` or `--name=value`; flags are
// bare `--name`; llama.cpp's short forms -m, -p, -n, -t, -s, -o and -f
// stand for --model, --prompt, --n-predict, --threads, --seed, --out and
// --file in every command. Unknown options are errors that name the option.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "kernels/attention/kv_cache.h"

namespace kiln {

class CliArgs {
 public:
  // `flags` are the options that take no value.
  CliArgs(const std::vector<std::string>& argv, const std::vector<std::string>& flags);

  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
  std::vector<std::string> all(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t def) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws naming the first option not in `known` (flags included).
  void allow_only(const std::vector<std::string>& known) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::map<std::string, bool> flags_;
  std::vector<std::string> positional_;
};

// The whole text as a number, else kiln::Error "<what> expects an integer
// (a number), got '<text>'".
int64_t parse_int(const std::string& text, const std::string& what);
double parse_double(const std::string& text, const std::string& what);
// Comma-separated integers ("1,2,3"), each read as parse_int reads one.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);
// A KV cache type (kv_cache.h's parse_kv_cache_type: f16, bf16, f32, q8_0,
// aura4v4, ...) named by `--kv`.
KvCacheType parse_kv_type(const std::string& text);

// The speculative-decoding options `kiln run` and `kiln serve` share:
// --draft MODEL or --spec ngram[:N] (not both), --draft-k (only with one of
// them) and --draft-k-fixed.
struct SpecArgs {
  std::string draft, spec;  // "" when not given
  int64_t k = 4;
  bool fixed = false;
};
SpecArgs parse_spec_args(const CliArgs& a);

// Checks that the file `path` (for `option`) can be created, or the
// directory `dir` (created with its parents as needed) written, before a
// run starts rather than when it ends: else kiln::Error naming the option,
// the path and the system's reason. The file check leaves no file behind.
void check_writable_file(const std::string& path, const std::string& option);
void check_writable_dir(const std::string& dir, const std::string& option);

int cmd_run(const std::vector<std::string>& args);
int cmd_inspect(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_list(const std::vector<std::string>& args);
int cmd_cache(const std::vector<std::string>& args);
int cmd_tune(const std::vector<std::string>& args);
int cmd_gen_model(const std::vector<std::string>& args);
int cmd_moe_stats(const std::vector<std::string>& args);
int cmd_prune_experts(const std::vector<std::string>& args);
int cmd_convert(const std::vector<std::string>& args);
int cmd_tokenize(const std::vector<std::string>& args);
int cmd_kld(const std::vector<std::string>& args);
int cmd_serve(const std::vector<std::string>& args);
int cmd_grammar(const std::vector<std::string>& args);

}  // namespace kiln

namespace kiln {
struct Spec;
struct TuneOptions;
// The --const NAME=VALUE pairs.
std::map<std::string, int64_t> const_args(const CliArgs& a);
// Spec for a library kernel from `--dtype [ROLE=]DT` (bare DT sets the first
// role) and `--const NAME=V` options, defaults for the rest.
Spec spec_from_args(const std::string& kernel, const CliArgs& a, const TargetDesc& target = {});
// "NAME=VALUE[,NAME=VALUE...]" (--shape, --scalar) by name; errors name `option`.
std::map<std::string, std::string> parse_pairs(const std::string& text, const std::string& option);
// A kernel's dtypes, constexprs (--const; a tunable is refused when
// `tuning`: the search sets it), sizes (--shape) and float scalars
// (--scalar) for kiln tune and kiln bench KERNEL.
TuneOptions tune_options_from_args(const std::string& kernel, const CliArgs& a, bool tuning);
// Loads every --plugin FILE (runtime/plugin.h): their kernels join the registry.
void load_plugins(const CliArgs& a);
// `kiln bench KERNEL --shape ...`: one kernel at one shape against the
// bandwidth probe (tools/bench_kernel.cpp).
int bench_kernel(const CliArgs& a);
}  // namespace kiln
