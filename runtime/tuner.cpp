#include "runtime/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <set>

#include "ir/error.h"
#include "ir/scalar_eval.h"
#include "runtime/cold_copies.h"
#include "runtime/host_memory.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;
using Config = std::map<std::string, int64_t>;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The buffers of one launch, their pristine contents and the reference result.
struct Workload {
  BoundArgs args;
  std::vector<HostMemory> buffers;
  std::vector<std::string> pristine;  // bytes, per buffer param
  std::vector<std::vector<double>> reference;
  std::vector<DType> dtypes;
  std::vector<std::string> names;

  void restore() {
    for (size_t i = 0; i < buffers.size(); ++i)
      std::memcpy(buffers[i].data(), pristine[i].data(), pristine[i].size());
  }
  std::vector<double> values(size_t i) const {
    std::vector<double> v(static_cast<size_t>(buffers[i].size() / dtype_bytes(dtypes[i])));
    for (size_t j = 0; j < v.size(); ++j) {
      ScalarValue s = load_element(buffers[i].data(), static_cast<int64_t>(j), dtypes[i]);
      v[j] = is_float(dtypes[i]) ? s.f : static_cast<double>(s.i);
    }
    return v;
  }
};

// One ulp of dtype t relative to the value: outputs rounded to t may differ
// from the interpreter's by that much when the kernel reassociates sums.
double storage_ulp(DType t) {
  switch (t) {
    case DType::f16: return 0x1p-10;
    case DType::bf16: return 0x1p-7;
    case DType::f8e4m3: return 0x1p-3;
    case DType::f8e5m2: return 0x1p-2;
    default: return 0;
  }
}

std::string config_str(const Config& c) {
  std::string s;
  for (const auto& [k, v] : c) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

// One kernel's inputs at one shape, the interpreter's result on them and
// the timed launches' copies: what every candidate is measured on.
class Bench {
 public:
  Bench(Runtime& rt, const std::string& kernel, const TuneOptions& o);

  // Checks one configuration of the tunables against the reference and, if
  // it agrees, times it.
  TuneTrial evaluate(const Config& c);
  // The constexprs dispatch picks without a tuning entry: the kernel's
  // shape heuristic for these sizes, over the spec's defaults.
  Config heuristic() const;
  // What select() picks: the tuning database's entry, else heuristic().
  Spec selected();

  const KernelDef& def;
  Spec base;
  TuneResult result;  // key, bytes, copies

 private:
  Runtime& rt_;
  const TuneOptions& o_;
  Kernel k0_;
  Workload w_;
  std::optional<ColdCopies> timed_;
};

Bench::Bench(Runtime& rt, const std::string& kernel, const TuneOptions& o)
    : def(find_kernel(kernel)), rt_(rt), o_(o) {
  // Every candidate is built for the runtime's backend, as select() builds them.
  base = rt.make_spec(kernel, o.dtypes, o.fixed);
  k0_ = build_kernel(base);

  // Arguments: integer scalars from the shape, float scalars defaulted;
  // buffers as large as the launch shape of those needs them.
  Workload& w = w_;
  LaunchArgs named;
  ScalarArgs scalars;
  for (const auto& [name, v] : o.shape) {
    named.emplace_back(name, v);
    scalars.set_int(name, v);
  }
  for (const Param& p : k0_.params) {
    if (p.kind != ParamKind::Scalar) continue;
    if (is_float(p.dtype)) {
      auto it = o.floats.find(p.name);
      const double v = it != o.floats.end() ? it->second : p.name == "eps" ? 1e-5 : 0.5;
      named.emplace_back(p.name, v);
      scalars.set_float(p.name, v);
    } else if (!o.shape.count(p.name)) {
      throw Error("kernel '" + kernel + "' needs the size '" + p.name + "' (--shape " + p.name +
                  "=N)");
    }
  }
  LaunchShape shape = def.launch_shape(base, scalars);
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (const Param& p : k0_.params) {
    if (p.kind != ParamKind::Buffer) continue;
    auto need = shape.buffer_elems.find(p.name);
    int64_t n = need == shape.buffer_elems.end() ? 1 : std::max<int64_t>(need->second, 1);
    HostMemory m(static_cast<size_t>(n * dtype_bytes(p.dtype)));
    for (int64_t j = 0; j < n; ++j) {
      ScalarValue v;
      if (is_float(p.dtype))
        v.f = round_to_float_dtype(static_cast<float>(unit(rng)), p.dtype);
      else
        v.i = normalize_int(static_cast<int64_t>((unit(rng) + 1) * 2), p.dtype);
      store_element(m.data(), j, p.dtype, v);
    }
    named.emplace_back(p.name, LaunchArg(m.data(), n, p.dtype));
    w.pristine.emplace_back(reinterpret_cast<const char*>(m.data()), m.size());
    w.dtypes.push_back(p.dtype);
    w.names.push_back(p.name);
    w.buffers.push_back(std::move(m));
    result.bytes += static_cast<int64_t>(w.pristine.back().size());
  }
  w.args = rt.bind(base, named);

  // The timed launches' arguments, made from the pristine inputs.
  timed_.emplace(o.warm ? ColdCopies(w.args) : ColdCopies(k0_, w.args));
  result.copies = timed_->count();

  // The reference: the interpreter on the pristine inputs.
  rt.interpret(base, w.args);
  for (size_t i = 0; i < w.buffers.size(); ++i) w.reference.push_back(w.values(i));

  // Measured on this CPU model, so recorded for it (tuning_db.h's cpus).
  result.key = TuningKey{kernel, base.dtypes, shape_bucket(def, scalar_args(k0_, w.args)),
                         spec_variant(def, base)};
  if (std::string cpu = rt.backend().tuning_cpu(); !cpu.empty()) result.key.cpus = {cpu};
}

TuneTrial Bench::evaluate(const Config& c) {
  TuneTrial t;
  t.constexprs = c;
  try {
    Config all = o_.fixed;
    all.insert(c.begin(), c.end());
    Spec spec = rt_.make_spec(base.kernel, base.dtypes, all);
    w_.restore();
    rt_.launch(spec, w_.args);
    for (size_t i = 0; i < w_.buffers.size() && t.status.empty(); ++i) {
      std::vector<double> got = w_.values(i);
      double rtol = def.rtol + storage_ulp(w_.dtypes[i]);
      for (size_t j = 0; j < got.size(); ++j) {
        double ref = w_.reference[i][j];
        bool both_nan = std::isnan(ref) && std::isnan(got[j]);
        if (!both_nan && !(std::fabs(got[j] - ref) <= def.atol + rtol * std::fabs(ref))) {
          t.status = "wrong result: " + w_.names[i] + "[" + std::to_string(j) +
                     "] = " + std::to_string(got[j]) + ", reference " + std::to_string(ref);
          break;
        }
      }
    }
    if (t.status.empty()) {
      for (int i = 0; i < 2; ++i) rt_.launch(spec, timed_->next());  // warm-up
      std::vector<double> ms;
      auto start = Clock::now();
      while (static_cast<int>(ms.size()) < o_.reps &&
             (ms.size() < 3 || seconds_since(start) < o_.budget_s / 20)) {
        const BoundArgs& args = timed_->next();
        auto s = Clock::now();
        rt_.launch(spec, args);
        ms.push_back(seconds_since(s) * 1e3);
      }
      std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
      t.median_ms = ms[ms.size() / 2];
      t.status = "ok";
    }
  } catch (const Error& e) {
    t.status = std::string("rejected: ") + e.what();
  }
  return t;
}

Config Bench::heuristic() const {
  Spec chosen = base;
  if (def.shape_heuristic) {
    Config c = def.shape_heuristic(base, scalar_args(k0_, w_.args));
    for (const auto& [name, v] : o_.fixed) c[name] = v;
    chosen = rt_.make_spec(base.kernel, base.dtypes, c);
  }
  Config h;
  for (const Tunable& tn : def.tunables) h[tn.name] = chosen.constexpr_(tn.name);
  return h;
}

Spec Bench::selected() { return rt_.select(base.kernel, base.dtypes, w_.args, o_.fixed); }

}  // namespace

TuneResult tune(Runtime& rt, const std::string& kernel, const TuneOptions& o) {
  if (find_kernel(kernel).tunables.empty())
    throw Error("kernel '" + kernel + "' declares no tunables");
  Bench bench(rt, kernel, o);
  const KernelDef& def = bench.def;
  TuneResult result = bench.result;
  auto t0 = Clock::now();
  std::set<Config> tried;
  auto evaluate = [&](const Config& c) {
    tried.insert(c);
    TuneTrial t = bench.evaluate(c);
    result.trials.push_back(t);
    if (t.median_ms < result.best.median_ms || result.best.constexprs.empty()) {
      if (t.status == "ok" || result.best.constexprs.empty()) result.best = t;
    }
    return t;
  };

  result.heuristic = evaluate(bench.heuristic());
  // Coarse: every other value of every tunable.
  std::vector<Config> coarse{{}};
  for (const Tunable& tn : def.tunables) {
    std::vector<Config> next;
    for (const Config& c : coarse)
      for (size_t i = 0; i < tn.values.size(); i += 2) {
        Config d = c;
        d[tn.name] = tn.values[i];
        next.push_back(d);
      }
    coarse = next;
  }
  auto run_all = [&](const std::vector<Config>& cs) {
    for (const Config& c : cs) {
      if (tried.count(c)) continue;
      if (seconds_since(t0) > o.budget_s) {
        result.budget_exhausted = true;
        return;
      }
      evaluate(c);
    }
  };
  run_all(coarse);

  // Fine: the neighbours of the coarse winner.
  std::vector<Config> fine{{}};
  for (const Tunable& tn : def.tunables) {
    auto at = std::find(tn.values.begin(), tn.values.end(), result.best.constexprs[tn.name]);
    size_t idx = static_cast<size_t>(at - tn.values.begin());
    std::vector<Config> next;
    for (const Config& c : fine)
      for (size_t i = idx == 0 ? 0 : idx - 1; i <= std::min(idx + 1, tn.values.size() - 1); ++i) {
        Config d = c;
        d[tn.name] = tn.values[i];
        next.push_back(d);
      }
    fine = next;
  }
  run_all(fine);
  if (result.best.status != "ok")
    throw Error("tuning '" + kernel + "': no configuration produced a correct result (" +
                config_str(result.best.constexprs) + ": " + result.best.status + ")");
  return result;
}

Measurement measure(Runtime& rt, const std::string& kernel, const TuneOptions& o) {
  Bench bench(rt, kernel, o);
  Measurement m;
  m.spec = bench.selected();
  m.trial = bench.evaluate(m.spec.constexprs);
  m.bytes = bench.result.bytes;
  m.copies = bench.result.copies;
  return m;
}

}  // namespace kiln
