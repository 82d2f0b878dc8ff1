// Kernels from a shared library built outside Kiln: `kiln list|inspect|
// bench|tune --plugin libmine.so`, and any program that loads one.
//
// A plugin is compiled against Kiln's installed headers and links the same
// libkiln.so as the program that loads it, so its kernels join the one
// registry every tool reads. It exports exactly two C functions, both
// written by KILN_PLUGIN: its ABI tag (Kiln's version and a hash of the
// headers it was compiled against) and the function that registers its
// kernels. The tag is compared before anything of the plugin runs: a plugin
// built against another Kiln would read KernelDef with another layout, so it
// is refused with both tags named instead.
//
//   KILN_PLUGIN(registrar) {
//     registrar.add(KernelDef{.name = "add_rmsnorm", ...});
//   }
#pragma once

#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kiln_abi.h"

namespace kiln {

// What a plugin's registering function is handed.
class PluginRegistrar {
 public:
  explicit PluginRegistrar(std::string origin) : origin_(std::move(origin)) {}
  // Registers a kernel (its origin set to the plugin's path); throws
  // kiln::Error if the name is taken.
  void add(KernelDef def);
  const std::vector<std::string>& added() const { return added_; }

 private:
  std::string origin_;
  std::vector<std::string> added_;
};

// Loads a plugin and registers its kernels; returns their names. A plugin
// loaded already is not loaded twice. Throws kiln::Error naming the file and
// the reason: it cannot be opened, exports no Kiln entry points, was built
// against another Kiln (both tags), or registers a kernel name that exists.
std::vector<std::string> load_plugin(const std::string& path);

// This Kiln's ABI tag, which a plugin must have been compiled with.
const char* plugin_abi();

}  // namespace kiln

#define KILN_PLUGIN(registrar)                                                      \
  extern "C" __attribute__((visibility("default"))) const char* kiln_plugin_abi() { \
    return KILN_PLUGIN_ABI;                                                         \
  }                                                                                 \
  extern "C" __attribute__((visibility("default"))) void kiln_plugin_register(      \
      ::kiln::PluginRegistrar& registrar)
