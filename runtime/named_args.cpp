#include "runtime/named_args.h"

#include <algorithm>
#include <map>

#include "ir/error.h"

namespace kiln {

namespace {

std::string describe(const Param& p) {
  return std::string(p.kind == ParamKind::Buffer ? "a buffer of " : "a scalar ") +
         std::string(dtype_name(p.dtype));
}

// Whether an array of `given` may be passed for a buffer of `want`.
bool array_fits(DType given, DType want) {
  if (given == want) return true;
  const bool raw = given == DType::u8 || given == DType::u16;
  return raw && dtype_bytes(given) == dtype_bytes(want);
}

}  // namespace

BoundArgs bind_named(const Kernel& k, const LaunchArgs& named) {
  const std::string who = "kernel '" + k.name + "'";
  std::map<std::string, const LaunchArg*> by_name;
  for (const auto& [name, a] : named)
    if (!by_name.emplace(name, &a).second)
      throw Error(who + ": argument '" + name + "' given twice");
  BoundArgs b;
  for (const Param& p : k.params) {
    auto it = by_name.find(p.name);
    if (it == by_name.end()) {
      // A misspelt integer would otherwise pass for a launch size unseen.
      std::string others;
      for (const auto& [name, given] : by_name) {
        bool param = false;
        for (const Param& q : k.params) param |= q.name == name;
        if (!param) others += (others.empty() ? "" : ", ") + name;
      }
      throw Error(who + ": no argument for parameter '" + p.name + "' (" + describe(p) + ")" +
                  (others.empty() ? "" : "; names given that are no parameter: " + others));
    }
    const LaunchArg& a = *it->second;
    by_name.erase(it);
    const std::string bad = who + ": parameter '" + p.name + "' is " + describe(p) + ", ";
    if (p.kind == ParamKind::Buffer) {
      if (a.kind() != LaunchArg::Kind::array) throw Error(bad + "not a number");
      if (!array_fits(a.dtype(), p.dtype))
        throw Error(bad + "given an array of " + std::string(dtype_name(a.dtype())));
      if (!a.on_device()) b.host_arrays_.push_back(b.args_.size());
      b.args_.push_back(Arg::buffer(a.data(), a.count()));
    } else if (a.kind() == LaunchArg::Kind::array) {
      throw Error(bad + "given an array");
    } else if (is_float(p.dtype)) {
      b.args_.push_back(Arg::scalar_float(
          a.kind() == LaunchArg::Kind::real ? a.real() : static_cast<double>(a.integer())));
    } else {
      if (a.kind() != LaunchArg::Kind::integer) throw Error(bad + "given a float");
      b.args_.push_back(Arg::scalar_int(a.integer()));
    }
  }
  for (const auto& [name, a] : by_name) {
    if (a->kind() != LaunchArg::Kind::integer) {
      std::string params;
      for (const Param& p : k.params) params += (params.empty() ? "" : ", ") + p.name;
      throw Error(who + " has no parameter '" + name + "' (parameters: " + params +
                  "; other names are integer launch sizes)");
    }
    b.sizes_[name] = a->integer();
  }
  return b;
}

BoundArgs BoundArgs::with_buffer(size_t i, void* data, bool on_device) const {
  BoundArgs b = *this;
  b.args_.at(i).data = data;
  auto host = std::find(b.host_arrays_.begin(), b.host_arrays_.end(), i);
  if (on_device && host != b.host_arrays_.end()) b.host_arrays_.erase(host);
  if (!on_device && host == b.host_arrays_.end()) b.host_arrays_.push_back(i);
  return b;
}

}  // namespace kiln
