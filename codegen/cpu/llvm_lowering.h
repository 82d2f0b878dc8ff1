// IR -> LLVM IR for CPUs: one verified Kernel becomes one LLVM module.
//
// A tile becomes a flat LLVM vector in row-major order, so elementwise ops
// are single vector instructions and LLVM's backend picks the register
// width. Offsets that are affine in `arange` (base + stride * index with a
// unit innermost stride) become plain or masked vector loads/stores; other
// accesses become gathers/scatters. Narrow floats (f16, bf16, fp8) live in
// f32 registers and are rounded after every op, exactly as ir/op.h defines.
// The module exports `symbol` with the KernelRangeFn signature of
// codegen/cpu/launch_abi.h. It knows nothing of the JIT or the runtime.
#pragma once

#include <memory>
#include <string>

#include "ir/kernel.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace kiln {

// What the lowering needs to know about the target; nothing else of it.
struct CpuProfile {
  // Masked vector loads/stores of every element width are single
  // instructions (AVX-512BW). Without them LLVM expands each masked lane
  // into its own branch, which for 1024-wide tiles costs minutes of compile
  // time; the lowering then emits "all lanes on: plain vector access,
  // otherwise a lane loop" instead.
  bool native_masked_memory = true;
  // AVX-512 VNNI: a sum over groups of 4 of u8 x i8 products is vpdpbusd.
  bool x86_vnni = false;
  // x86 has no byte shifts: LLVM emits vgf2p8affineqb (GFNI) for a byte
  // shift by a constant, which shares its ports with vpdpbusd and vfmadd,
  // the ports a quantized dot loop saturates (4-bit codes' high nibbles).
  // A 16-bit shift plus a mask runs on other ports.
  bool byte_shifts_as_words = false;
  // The widest x86 pshufb in bits: 128 (SSSE3), 256 (AVX2), 512
  // (AVX-512BW); 0 for none. It looks up 16-entry byte tables (Lookup),
  // one byte per lane, the table repeated in every 128-bit lane. pmaddubsw
  // comes with the same extensions (byte dots without VNNI).
  int x86_pshufb_bits = 0;
  // AArch64 tbl: the same 16-byte lookup, 0 for an index past the table.
  bool aarch64_tbl = false;
  // x86 vpermd: a 32-bit table of up to this many entries (16 with
  // AVX-512F, 8 with AVX2; 0 for none) looked up by 32-bit indices, one
  // register of indices per instruction (a codebook of float bit patterns).
  int x86_permd_entries = 0;
  // x86 vpermi2w (AVX-512BW): a 16-bit table of up to 256 entries looked
  // up 32 indices at a time, 64 entries per instruction.
  bool x86_permw = false;
  // x86 vpermb (AVX-512 VBMI): a 64-byte table looked up by an index
  // byte's low 6 bits, so a byte table indexed by a masked field needs no
  // mask (Lowering::vbmi_byte_lookup).
  bool x86_vbmi = false;
  // AVX-512F vscalefps: y * 2^n in one instruction, the last step of exp
  // and exp2 (softmax's cost per score in attention).
  bool x86_scalef = false;
};

// The module may call the fp8 helpers of fp8_helpers.h; whoever links it
// (the JIT) must define them.
std::unique_ptr<llvm::Module> lower_to_llvm(const Kernel& k, llvm::LLVMContext& ctx,
                                            const std::string& symbol, const CpuProfile& profile);

}  // namespace kiln
