#include "targets/cpu/cpu_target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <mutex>

#include "ir/error.h"

namespace kiln {

namespace {

// LLVM runs its post-RA list scheduler for some cores (AMD Zen among them;
// LLVM 19 has no per-function switch, only this option). It hoists loads to
// hide their latency, which scatters a streaming loop's loads out of address
// order, and a core then keeps fewer DRAM reads in flight: `kiln bench`
// of the Q4_K GEMV (qgemv_rows16, one token, one Zen 4 thread) read at
// 0.67-0.73 of the bandwidth probe with it and 0.82-0.85 without. An
// out-of-order core does not need the hoisting. Set as if given on LLVM's
// command line (only a given value overrides the CPU's scheduling model).
void keep_load_order() {
  auto& options = llvm::cl::getRegisteredOptions();
  auto it = options.find("post-RA-scheduler");
  if (it != options.end()) it->second->addOccurrence(1, "post-RA-scheduler", "false");
}

void init_llvm_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeX86AsmParser();
    LLVMInitializeAArch64TargetInfo();
    LLVMInitializeAArch64Target();
    LLVMInitializeAArch64TargetMC();
    LLVMInitializeAArch64AsmPrinter();
    LLVMInitializeAArch64AsmParser();
    keep_load_order();
  });
}

}  // namespace

bool CpuTarget::has_feature(const std::string& f) const {
  return ("," + features + ",").find(",+" + f + ",") != std::string::npos;
}

CpuTarget host_cpu_target() {
  CpuTarget t;
  t.name = "host";
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  std::vector<std::string> on;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (f.getValue()) on.push_back("+" + f.getKey().str());
  // Kernels chain vpdpwssd on purpose (i16 dot_groups into a running sum:
  // qgemv_rows16's Q2_K scales). Without this tuning flag LLVM's machine
  // combiner splits each into vpmaddwd + vpaddd to shorten the chain: a
  // second uop per group, in loops bound by uops rather than latency.
  auto vnni = [&](const char* f) { return std::find(on.begin(), on.end(), f) != on.end(); };
  if (vnni("+avx512vnni") || vnni("+avxvnni")) on.push_back("+fast-dpwssd");
  std::sort(on.begin(), on.end());
  for (const auto& f : on) t.features += (t.features.empty() ? "" : ",") + f;
  return t;
}

CpuProfile cpu_profile(const CpuTarget& t) {
  CpuProfile p;
  p.native_masked_memory = t.has_feature("avx512bw") || t.cpu == "x86-64-v4";
  p.x86_vnni =
      t.has_feature("avx512vnni") && t.has_feature("avx512bw") && t.has_feature("avx512vl");
  bool x86 = t.triple.rfind("x86_64", 0) == 0;
  p.byte_shifts_as_words = x86;
  if (x86 && (t.has_feature("avx512bw") || t.cpu == "x86-64-v4")) {
    p.x86_pshufb_bits = 512;
    p.x86_permw = true;
    p.x86_vbmi = t.has_feature("avx512vbmi");
  } else if (x86 && (t.has_feature("avx2") || t.cpu == "x86-64-v3"))
    p.x86_pshufb_bits = 256;
  else if (x86 && (t.has_feature("ssse3") || t.cpu == "x86-64-v2"))
    p.x86_pshufb_bits = 128;
  p.aarch64_tbl = t.triple.rfind("aarch64", 0) == 0;
  if (x86 && (t.has_feature("avx512f") || t.cpu == "x86-64-v4")) {
    p.x86_permd_entries = 16;
    p.x86_scalef = true;
  } else if (x86 && (t.has_feature("avx2") || t.cpu == "x86-64-v3"))
    p.x86_permd_entries = 8;
  return p;
}

TargetDesc target_desc(const CpuTarget& t) {
  if (t.triple.rfind("aarch64", 0) == 0) return {128, 32, 1};  // NEON: 32 q registers
  if (t.cpu == "x86-64-v4" || t.has_feature("avx512f")) return {512, 32, 1};
  if (t.cpu == "x86-64-v3" || t.has_feature("avx2")) return {256, 16, 1};
  return {128, 16, 1};
}

std::vector<std::string> cpu_target_names() {
  return {"host", "x86-64-v3", "x86-64-v4", "aarch64"};
}

CpuTarget named_cpu_target(const std::string& name) {
  if (name == "host") return host_cpu_target();
  if (name == "x86-64-v3" || name == "x86-64-v4")
    return CpuTarget{name, "x86_64-unknown-linux-gnu", name, ""};
  if (name == "aarch64")
    return CpuTarget{name, "aarch64-unknown-linux-gnu", "generic", "+neon,+dotprod,+fullfp16"};
  std::string all;
  for (const auto& n : cpu_target_names()) all += (all.empty() ? "" : ", ") + n;
  throw Error("unknown CPU target '" + name + "' (known: " + all + ")");
}

std::unique_ptr<llvm::TargetMachine> create_target_machine(const CpuTarget& t) {
  init_llvm_targets();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(t.triple, err);
  if (!target) throw Error("CPU target '" + t.name + "': " + err);
  llvm::TargetOptions opts;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(t.triple, t.cpu, t.features, opts, llvm::Reloc::PIC_,
                                  std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) throw Error("CPU target '" + t.name + "': LLVM could not create a target machine");
  return tm;
}

}  // namespace kiln
