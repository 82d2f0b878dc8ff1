#include "targets/cpu/cpu_jit.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <chrono>

#include "codegen/cpu/fp8_helpers.h"
#include "codegen/cpu/llvm_lowering.h"
#include "ir/error.h"

namespace kiln {

namespace {

std::string take_error(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return s;
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm) {
  m.setDataLayout(tm.createDataLayout());
  m.setTargetTriple(tm.getTargetTriple().str());
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

// Target features also belong on each function so inlining and the
// vectoriser's cost model see them (ORC does not add them).
void tag_functions(llvm::Module& m, const CpuTarget& t) {
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", t.cpu);
    if (!t.features.empty()) f.addFnAttr("target-features", t.features);
  }
}

// Lowers k for target t (with the lowering profile p) and runs O3.
std::unique_ptr<llvm::Module> optimized_module(const Kernel& k, llvm::LLVMContext& ctx,
                                               const std::string& symbol, const CpuTarget& t,
                                               const CpuProfile& p, llvm::TargetMachine& tm) {
  std::unique_ptr<llvm::Module> m = lower_to_llvm(k, ctx, symbol, p);
  tag_functions(*m, t);
  optimize(*m, tm);
  return m;
}

std::string emit_machine_code(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type,
                              const CpuTarget& t) {
  llvm::SmallString<0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    throw Error("CPU target '" + t.name + "' cannot emit this kind of file");
  pm.run(m);
  return std::string(buf.str());
}

}  // namespace

CpuJit::CpuJit(std::optional<CpuProfile> profile)
    : target_(host_cpu_target()), profile_(profile ? *profile : cpu_profile(target_)) {
  create_target_machine(target_);  // initialises LLVM's targets
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) throw Error("CPU JIT: cannot detect the host: " + take_error(jtmb.takeError()));
  jtmb->setCPU(target_.cpu);
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!jit) throw Error("CPU JIT: cannot create LLJIT: " + take_error(jit.takeError()));
  jit_ = std::move(*jit);
  llvm::orc::SymbolMap syms;
  int n = 0;
  const HostSymbol* hs = fp8_host_symbols(&n);
  for (int i = 0; i < n; ++i)
    syms[jit_->mangleAndIntern(hs[i].name)] = {llvm::orc::ExecutorAddr::fromPtr(hs[i].address),
                                               llvm::JITSymbolFlags::Exported};
  if (auto e = jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(syms))))
    throw Error("CPU JIT: " + take_error(std::move(e)));
  // Lowered code may call libm (fmodf for float Rem).
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      jit_->getDataLayout().getGlobalPrefix());
  if (!gen) throw Error("CPU JIT: " + take_error(gen.takeError()));
  jit_->getMainJITDylib().addGenerator(std::move(*gen));
}

CpuJit::~CpuJit() = default;

std::string CpuJit::compile_to_object(const Kernel& k, const std::string& symbol) {
  llvm::LLVMContext ctx;
  auto tm = create_target_machine(target_);
  auto m = optimized_module(k, ctx, symbol, target_, profile_, *tm);
  return emit_machine_code(*m, *tm, llvm::CodeGenFileType::ObjectFile, target_);
}

CompiledCpuKernel CpuJit::load_object(const std::string& object, const std::string& symbol) {
  std::lock_guard<std::mutex> lock(mu_);
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(object, symbol);
  if (auto e = jit_->addObjectFile(std::move(buf)))
    throw Error("JIT rejected the object for '" + symbol + "': " + take_error(std::move(e)));
  auto addr = jit_->lookup(symbol);
  if (!addr) throw Error("JIT lookup of '" + symbol + "' failed: " + take_error(addr.takeError()));
  CompiledCpuKernel out;
  out.fn = addr->toPtr<KernelRangeFn>();
  out.symbol = symbol;
  return out;
}

CompiledCpuKernel CpuJit::compile(const Kernel& k, const std::string& symbol) {
  auto t0 = std::chrono::steady_clock::now();
  CompiledCpuKernel out = load_object(compile_to_object(k, symbol), symbol);
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string cpu_llvm_ir(const Kernel& k, const CpuTarget& t, bool optimized) {
  llvm::LLVMContext ctx;
  auto m = lower_to_llvm(k, ctx, k.name, cpu_profile(t));
  tag_functions(*m, t);
  auto tm = create_target_machine(t);
  if (optimized) optimize(*m, *tm);
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os, nullptr);
  return s;
}

std::string cpu_assembly(const Kernel& k, const CpuTarget& t) {
  llvm::LLVMContext ctx;
  auto tm = create_target_machine(t);
  auto m = optimized_module(k, ctx, k.name, t, cpu_profile(t), *tm);
  return emit_machine_code(*m, *tm, llvm::CodeGenFileType::AssemblyFile, t);
}

}  // namespace kiln
