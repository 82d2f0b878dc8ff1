/* The C interface between Kiln's CUDA simulator and a kernel compiled for it.
 *
 * The simulator compiles emitted CUDA C with the host C++ compiler and
 * -DKILN_SIM; the prelude (codegen/cuda/kiln_cuda.cuh) then maps every CUDA
 * builtin the code generator uses (threadIdx, __syncthreads, shuffles,
 * mma.sync, narrow-float conversions) onto these hooks. The simulator owns
 * the scheduling of threads and the memory checks; the compiled kernel owns
 * nothing but its arithmetic. Plain C so both sides agree on the layout.
 * This file is also embedded into Kiln and written next to every simulated
 * source, so it must stay self-contained.
 */
#ifndef KILN_SIM_ABI_H
#define KILN_SIM_ABI_H

#include <stddef.h>
#include <stdint.h>

#define KILN_SIM_ABI_VERSION 1
/* 64-bit words each lane may deposit for one warp-wide exchange (mma.sync
 * deposits its A, B and C fragments at once). */
#define KILN_SIM_SLOT_WORDS 16

struct KilnSimDim3 {
  unsigned x, y, z;
};

struct KilnSimHooks {
  int version;
  /* The calling thread's coordinates. */
  const struct KilnSimDim3* (*thread_idx)(void);
  const struct KilnSimDim3* (*block_idx)(void);
  const struct KilnSimDim3* (*block_dim)(void);
  const struct KilnSimDim3* (*grid_dim)(void);
  /* The block's dynamic shared memory. */
  unsigned char* (*shared)(void);
  /* Barriers: every live thread of the block, or of the caller's warp. */
  void (*sync_block)(void);
  void (*sync_warp)(void);
  /* The caller's warp's exchange area: 32 lanes x KILN_SIM_SLOT_WORDS. */
  uint64_t* (*warp_slots)(void);
  /* Returns p when [p, p+bytes) lies inside a launched buffer; otherwise
   * records the violation (reported when the launch ends) and returns a
   * scratch location so the thread can finish. */
  void* (*check)(const void* p, size_t bytes, int is_write);
  /* Kiln's reference conversions (round to nearest even, fp8 saturating). */
  uint16_t (*f32_to_f16)(float);
  float (*f16_to_f32)(uint16_t);
  uint16_t (*f32_to_bf16)(float);
  float (*bf16_to_f32)(uint16_t);
  uint8_t (*f32_to_f8e4m3)(float);
  float (*f8e4m3_to_f32)(uint8_t);
  uint8_t (*f32_to_f8e5m2)(float);
  float (*f8e5m2_to_f32)(uint8_t);
};

/* Exported by every simulated kernel: */
/*   void kiln_sim_bind(const struct KilnSimHooks*);   once after loading */
/*   void kiln_sim_thread(void* const* args);          one thread's body  */

#endif
