#include "runtime/plugin.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "ir/error.h"

namespace kiln {

void PluginRegistrar::add(KernelDef def) {
  def.origin = origin_;
  std::string name = def.name;
  register_kernel(std::move(def));
  added_.push_back(name);
}

const char* plugin_abi() { return KILN_PLUGIN_ABI; }

std::vector<std::string> load_plugin(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::vector<std::string>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  std::error_code ec;
  std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
  if (ec || !std::filesystem::is_regular_file(canonical))
    throw Error("plugin '" + path + "': no such file");
  if (auto it = loaded.find(canonical); it != loaded.end()) return it->second;
  // Never closed: the kernels' builders and launch shapes live in it.
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error("plugin '" + path + "' cannot be loaded: " + dlerror());
  using AbiFn = const char* (*)();
  using RegisterFn = void (*)(PluginRegistrar&);
  auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "kiln_plugin_abi"));
  auto reg = reinterpret_cast<RegisterFn>(dlsym(handle, "kiln_plugin_register"));
  if (!abi || !reg)
    throw Error("plugin '" + path +
                "' is not a Kiln plugin: it exports no kiln_plugin_abi/kiln_plugin_register "
                "(define them with KILN_PLUGIN from runtime/plugin.h)");
  if (std::string theirs = abi(); theirs != KILN_PLUGIN_ABI)
    throw Error("plugin '" + path + "' was built against Kiln " + theirs + ", this is Kiln " +
                KILN_PLUGIN_ABI + ": rebuild it against this Kiln's headers");
  PluginRegistrar r(canonical);
  reg(r);
  if (r.added().empty()) throw Error("plugin '" + path + "' registers no kernels");
  return loaded[canonical] = r.added();
}

}  // namespace kiln
