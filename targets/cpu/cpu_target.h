// Which CPU a kernel is compiled for: the host (features detected at run
// time) or a named cross target used for inspection and object emission.
//
// The description (triple, CPU name, feature string) is what distinguishes
// generated code, so it is also what the compile cache keys on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu/llvm_lowering.h"
#include "ir/spec.h"

namespace llvm {
class TargetMachine;
}

namespace kiln {

struct CpuTarget {
  std::string name;  // "host", "x86-64-v3", "x86-64-v4", "aarch64"
  std::string triple;
  std::string cpu;
  std::string features;  // "+avx2,+fma,..." as LLVM spells them

  std::string describe() const { return triple + " " + cpu + " " + features; }
  bool has_feature(const std::string& f) const;  // e.g. "avx512vnni"
};

CpuTarget host_cpu_target();
// What the IR lowering needs to know about t.
CpuProfile cpu_profile(const CpuTarget& t);
// What kernels may assume of t: its vector width and register count.
TargetDesc target_desc(const CpuTarget& t);
// Throws kiln::Error listing the known names.
CpuTarget named_cpu_target(const std::string& name);
std::vector<std::string> cpu_target_names();

// Aggressive (O3) codegen, PIC-free small code model suitable for ORC.
std::unique_ptr<llvm::TargetMachine> create_target_machine(const CpuTarget& t);

}  // namespace kiln
