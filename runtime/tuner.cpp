#include "runtime/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
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
  std::vector<Arg> args;
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

}  // namespace

TuneResult tune(Runtime& rt, const std::string& kernel, const TuneOptions& o) {
  const KernelDef& def = find_kernel(kernel);
  if (def.tunables.empty()) throw Error("kernel '" + kernel + "' declares no tunables");
  // Every candidate is built for the runtime's backend, as select() builds them.
  auto make = [&](const std::map<std::string, DType>& dtypes, const Config& c) {
    return rt.make_spec(kernel, dtypes, c);
  };
  Spec base = make(o.dtypes, o.fixed);
  Kernel k0 = build_kernel(base);

  // Arguments: integer scalars from the shape, float scalars defaulted.
  Workload w;
  Sizes sizes = o.shape;
  std::vector<int> buffer_arg;
  for (const Param& p : k0.params) {
    if (p.kind == ParamKind::Scalar) {
      if (is_float(p.dtype)) {
        auto it = o.floats.find(p.name);
        w.args.push_back(Arg::scalar_float(it != o.floats.end() ? it->second
                                           : p.name == "eps"    ? 1e-5
                                                                : 0.5));
      } else {
        auto it = o.shape.find(p.name);
        if (it == o.shape.end())
          throw Error("tuning '" + kernel + "' needs the size '" + p.name + "' (--shape " + p.name +
                      "=N)");
        w.args.push_back(Arg::scalar_int(it->second));
        sizes.erase(p.name);
      }
    } else {
      w.args.push_back(Arg{});
    }
  }
  LaunchShape shape = def.launch_shape(base, scalar_args(k0, w.args, sizes));
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(-1, 1);
  TuneResult result;
  for (size_t i = 0; i < k0.params.size(); ++i) {
    const Param& p = k0.params[i];
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
    w.args[i] = Arg::buffer(m.data(), n);
    w.pristine.emplace_back(reinterpret_cast<const char*>(m.data()), m.size());
    w.dtypes.push_back(p.dtype);
    w.names.push_back(p.name);
    w.buffers.push_back(std::move(m));
    result.bytes += static_cast<int64_t>(w.pristine.back().size());
  }

  // The timed launches' arguments, made from the pristine inputs.
  ColdCopies timed = o.warm ? ColdCopies(w.args) : ColdCopies(k0, w.args);
  result.copies = timed.count();

  // The reference: the interpreter on the pristine inputs.
  rt.interpret(base, w.args, sizes);
  for (size_t i = 0; i < w.buffers.size(); ++i) w.reference.push_back(w.values(i));

  // Measured on this CPU model, so recorded for it (tuning_db.h's cpus).
  result.key = TuningKey{kernel, base.dtypes, shape_bucket(def, scalar_args(k0, w.args, sizes)),
                         spec_variant(def, base)};
  if (std::string cpu = rt.backend().tuning_cpu(); !cpu.empty()) result.key.cpus = {cpu};
  auto t0 = Clock::now();
  std::set<Config> tried;

  auto evaluate = [&](const Config& c) {
    TuneTrial t;
    t.constexprs = c;
    tried.insert(c);
    try {
      Config all = o.fixed;
      all.insert(c.begin(), c.end());
      Spec spec = make(base.dtypes, all);
      w.restore();
      rt.launch(spec, w.args, sizes);
      for (size_t i = 0; i < w.buffers.size() && t.status.empty(); ++i) {
        std::vector<double> got = w.values(i);
        double rtol = def.rtol + storage_ulp(w.dtypes[i]);
        for (size_t j = 0; j < got.size(); ++j) {
          double ref = w.reference[i][j];
          bool both_nan = std::isnan(ref) && std::isnan(got[j]);
          if (!both_nan && !(std::fabs(got[j] - ref) <= def.atol + rtol * std::fabs(ref))) {
            t.status = "wrong result: " + w.names[i] + "[" + std::to_string(j) +
                       "] = " + std::to_string(got[j]) + ", reference " + std::to_string(ref);
            break;
          }
        }
      }
      if (t.status.empty()) {
        for (int i = 0; i < 2; ++i) rt.launch(spec, timed.next(), sizes);  // warm-up
        std::vector<double> ms;
        auto start = Clock::now();
        while (static_cast<int>(ms.size()) < o.reps &&
               (ms.size() < 3 || seconds_since(start) < o.budget_s / 20)) {
          const std::vector<Arg>& args = timed.next();
          auto s = Clock::now();
          rt.launch(spec, args, sizes);
          ms.push_back(seconds_since(s) * 1e3);
        }
        std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
        t.median_ms = ms[ms.size() / 2];
        t.status = "ok";
      }
    } catch (const Error& e) {
      t.status = std::string("rejected: ") + e.what();
    }
    result.trials.push_back(t);
    if (t.median_ms < result.best.median_ms || result.best.constexprs.empty()) {
      if (t.status == "ok" || result.best.constexprs.empty()) result.best = t;
    }
    return t;
  };

  // The heuristic's choice is what dispatch picks without a tuning entry:
  // the kernel's shape heuristic for these sizes, over the spec's defaults.
  Spec chosen = base;
  if (def.shape_heuristic) {
    Config c = def.shape_heuristic(base, scalar_args(k0, w.args, sizes));
    for (const auto& [name, v] : o.fixed) c[name] = v;
    chosen = make(base.dtypes, c);
  }
  Config heuristic;
  for (const Tunable& tn : def.tunables) heuristic[tn.name] = chosen.constexpr_(tn.name);
  result.heuristic = evaluate(heuristic);

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

}  // namespace kiln
