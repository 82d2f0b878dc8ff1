// Kiln's CUDA prelude: the helpers every emitted kernel calls.
//
// The code generator spells the IR's exact semantics (wrapping integers,
// saturating casts, narrow floats rounded after every op, division by zero
// giving 0) through these helpers, so the generated source stays readable
// and each rule is written once. Compiled by NVRTC it uses the CUDA headers'
// types and intrinsics; compiled by the host compiler with -DKILN_SIM it
// maps every builtin onto the simulator's hooks (codegen/cuda/sim_abi.h),
// which schedule the threads and check every memory access.
#pragma once

#ifdef KILN_SIM
#include <math.h>
#include <string.h>

#include "kiln_sim_abi.h"

static const struct KilnSimHooks* kiln_hooks;
extern "C" void kiln_sim_bind(const struct KilnSimHooks* h) { kiln_hooks = h; }

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define threadIdx (*kiln_hooks->thread_idx())
#define blockIdx (*kiln_hooks->block_idx())
#define blockDim (*kiln_hooks->block_dim())
#define gridDim (*kiln_hooks->grid_dim())
#define __syncthreads() kiln_hooks->sync_block()
#define KILN_DECLARE_SHARED unsigned char* kiln_smem = kiln_hooks->shared()
#define KILN_AT(p, i) (*kiln_checked(p, i, 0))
#define KILN_AT_W(p, i) (*kiln_checked(p, i, 1))

template <class T>
static inline T* kiln_checked(T* p, long long i, int is_write) {
  return static_cast<T*>(kiln_hooks->check(p + i, sizeof(T), is_write));
}

struct __half {
  unsigned short x;
};
struct __nv_bfloat16 {
  unsigned short x;
};
struct __nv_fp8_e4m3 {
  unsigned char __x;
};
struct __nv_fp8_e5m2 {
  unsigned char __x;
};
static inline float __half2float(__half h) { return kiln_hooks->f16_to_f32(h.x); }
static inline __half __float2half_rn(float f) { return __half{kiln_hooks->f32_to_f16(f)}; }
static inline float __bfloat162float(__nv_bfloat16 h) { return kiln_hooks->bf16_to_f32(h.x); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{kiln_hooks->f32_to_bf16(f)};
}
static inline float kiln_from_f8e4m3(__nv_fp8_e4m3 v) { return kiln_hooks->f8e4m3_to_f32(v.__x); }
static inline __nv_fp8_e4m3 kiln_to_f8e4m3(float f) {
  return __nv_fp8_e4m3{kiln_hooks->f32_to_f8e4m3(f)};
}
static inline float kiln_from_f8e5m2(__nv_fp8_e5m2 v) { return kiln_hooks->f8e5m2_to_f32(v.__x); }
static inline __nv_fp8_e5m2 kiln_to_f8e5m2(float f) {
  return __nv_fp8_e5m2{kiln_hooks->f32_to_f8e5m2(f)};
}
static inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

static inline unsigned kiln_lane() {
  const KilnSimDim3& t = threadIdx;
  const KilnSimDim3& d = blockDim;
  return (t.x + d.x * (t.y + d.y * t.z)) % 32u;
}

// A warp-wide exchange: every lane deposits `words` 64-bit words, the warp
// meets, each lane reads what it needs, the warp meets again so the slots
// can be reused.
template <class T>
static inline T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32) {
  uint64_t* s = kiln_hooks->warp_slots();
  unsigned lane = kiln_lane();
  memcpy(&s[lane * KILN_SIM_SLOT_WORDS], &v, sizeof(T));
  kiln_hooks->sync_warp();
  unsigned src = lane ^ static_cast<unsigned>(lane_mask);
  if ((src & ~static_cast<unsigned>(width - 1)) != (lane & ~static_cast<unsigned>(width - 1)))
    src = lane;
  T r;
  memcpy(&r, &s[src * KILN_SIM_SLOT_WORDS], sizeof(T));
  kiln_hooks->sync_warp();
  return r;
}

// Threads of a block never run at once in the simulator (and blocks run
// one after another), so an atomic is a plain read-modify-write.
template <class T, class F>
static inline T kiln_rmw(T* p, F next) {
  T old = *p;
  *p = next(old);
  return old;
}
template <class T>
static inline T atomicAdd(T* p, T v) {
  return kiln_rmw(p, [&](T o) { return o + v; });
}
template <class T>
static inline T atomicMax(T* p, T v) {
  return kiln_rmw(p, [&](T o) { return v > o ? v : o; });
}
template <class T>
static inline T atomicMin(T* p, T v) {
  return kiln_rmw(p, [&](T o) { return v < o ? v : o; });
}
template <class T>
static inline T atomicExch(T* p, T v) {
  return kiln_rmw(p, [&](T) { return v; });
}
template <class T>
static inline T atomicCAS(T* p, T cmp, T v) {
  return kiln_rmw(p, [&](T o) { return o == cmp ? v : o; });
}

// Every lane of the warp deposits its A (4 words) and B (2 words) fragment
// registers and the warp meets; returns the warp's slots to read from.
static inline uint64_t* kiln_mma_deposit(const unsigned a[4], const unsigned b[2]) {
  uint64_t* s = kiln_hooks->warp_slots();
  uint64_t* mine = &s[kiln_lane() * KILN_SIM_SLOT_WORDS];
  for (int i = 0; i < 4; ++i) mine[i] = a[i];
  for (int i = 0; i < 2; ++i) mine[4 + i] = b[i];
  kiln_hooks->sync_warp();
  return s;
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, with the
// PTX fragment layout: lane = 4*group + tig; a[0..3] hold A rows
// {group, group+8} x cols {2tig, 2tig+1} (+8 for a[2], a[3]); b[0..1] hold B
// rows {2tig, 2tig+1} (+8 for b[1]) of column group; c/d rows {group,
// group+8} x cols {2tig, 2tig+1}. Each lane deposits its fragments, then
// computes its own four results from the whole warp's.
template <bool Bf16>
static inline void kiln_mma_16816(float d[4], const unsigned a[4], const unsigned b[2],
                                  const float c[4]) {
  uint64_t* s = kiln_mma_deposit(a, b);
  unsigned lane = kiln_lane();
  auto half_at = [&](unsigned from_lane, int word, int hi) {
    unsigned w = static_cast<unsigned>(s[from_lane * KILN_SIM_SLOT_WORDS + word]);
    unsigned short h = static_cast<unsigned short>(hi ? w >> 16 : w & 0xffffu);
    return Bf16 ? kiln_hooks->bf16_to_f32(h) : kiln_hooks->f16_to_f32(h);
  };
  // A[r][k]: lane 4*(r%8) + (k%8)/2, word (r>=8) + 2*(k>=8), half k%2.
  auto A = [&](int r, int k) {
    return half_at(4u * (r % 8) + (k % 8) / 2, (r >= 8) + 2 * (k >= 8), k % 2);
  };
  // B[k][n]: lane 4*n + (k%8)/2, word 4 + (k>=8), half k%2.
  auto B = [&](int k, int n) { return half_at(4u * n + (k % 8) / 2, 4 + (k >= 8), k % 2); };
  unsigned group = lane / 4, tig = lane % 4;
  for (int i = 0; i < 4; ++i) {
    int r = static_cast<int>(group) + 8 * (i / 2), n = static_cast<int>(2 * tig) + i % 2;
    float acc = c[i];
    for (int k = 0; k < 16; ++k) acc = fmaf(A(r, k), B(k, n), acc);
    d[i] = acc;
  }
  kiln_hooks->sync_warp();
}
#define KILN_MMA_F16(d, a, b, c) kiln_mma_16816<false>(d, a, b, c)
#define KILN_MMA_BF16(d, a, b, c) kiln_mma_16816<true>(d, a, b, c)

// mma.sync.aligned.m16n8k32.row.col.s32.{s8,u8}.s8.s32: the same layout
// with four bytes per register: a[0..3] hold A rows {group, group+8} x cols
// 4tig..4tig+3 (+16 for a[2], a[3]); b[0..1] hold B rows 4tig..4tig+3 (+16
// for b[1]) of column group. Integer sums wrap.
template <bool AUnsigned>
static inline void kiln_mma_16832(int d[4], const unsigned a[4], const unsigned b[2],
                                  const int c[4]) {
  uint64_t* s = kiln_mma_deposit(a, b);
  unsigned lane = kiln_lane();
  auto byte_at = [&](unsigned from_lane, int word, int k, bool is_unsigned) {
    unsigned w = static_cast<unsigned>(s[from_lane * KILN_SIM_SLOT_WORDS + word]);
    unsigned char u = static_cast<unsigned char>(w >> (8 * (k % 4)));
    return is_unsigned ? static_cast<int>(u) : static_cast<int>(static_cast<signed char>(u));
  };
  auto A = [&](int r, int k) {
    return byte_at(4u * (r % 8) + (k % 16) / 4, (r >= 8) + 2 * (k >= 16), k, AUnsigned);
  };
  auto B = [&](int k, int n) { return byte_at(4u * n + (k % 16) / 4, 4 + (k >= 16), k, false); };
  unsigned group = lane / 4, tig = lane % 4;
  for (int i = 0; i < 4; ++i) {
    int r = static_cast<int>(group) + 8 * (i / 2), n = static_cast<int>(2 * tig) + i % 2;
    unsigned acc = static_cast<unsigned>(c[i]);
    for (int k = 0; k < 32; ++k) acc += static_cast<unsigned>(A(r, k) * B(k, n));
    d[i] = static_cast<int>(acc);
  }
  kiln_hooks->sync_warp();
}
#define KILN_MMA_S8(d, a, b, c) kiln_mma_16832<false>(d, a, b, c)
#define KILN_MMA_U8(d, a, b, c) kiln_mma_16832<true>(d, a, b, c)

// dp4a: the sum of the 4 byte products of a (unsigned or signed) and b (signed).
template <bool A_UNSIGNED>
static inline int kiln_dp4a(unsigned a, unsigned b) {
  int s = 0;
  for (int i = 0; i < 4; ++i) {
    int x = A_UNSIGNED ? static_cast<int>((a >> (8 * i)) & 255u)
                       : static_cast<int>(static_cast<signed char>(a >> (8 * i)));
    s += x * static_cast<int>(static_cast<signed char>(b >> (8 * i)));
  }
  return s;
}
#define KILN_DP4A_U8(a, b) kiln_dp4a<true>(a, b)
#define KILN_DP4A_S8(a, b) kiln_dp4a<false>(a, b)
// 32-bit word j of byte storage p.
static inline unsigned kiln_word(const void* p, int j) {
  unsigned w;
  memcpy(&w, static_cast<const unsigned char*>(p) + 4 * j, 4);
  return w;
}

#else  // NVRTC

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#define KILN_DECLARE_SHARED extern __shared__ __align__(16) unsigned char kiln_smem[]
#define KILN_AT(p, i) ((p)[i])
#define KILN_AT_W(p, i) ((p)[i])

static __device__ __forceinline__ float kiln_from_f8e4m3(__nv_fp8_e4m3 v) { return float(v); }
static __device__ __forceinline__ __nv_fp8_e4m3 kiln_to_f8e4m3(float f) {
  __nv_fp8_e4m3 r;
  r.__x = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
  return r;
}
static __device__ __forceinline__ float kiln_from_f8e5m2(__nv_fp8_e5m2 v) { return float(v); }
static __device__ __forceinline__ __nv_fp8_e5m2 kiln_to_f8e5m2(float f) {
  __nv_fp8_e5m2 r;
  r.__x = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2);
  return r;
}

#define KILN_MMA_HALF(NAME, TYPE)                                                               \
  static __device__ __forceinline__ void NAME(float d[4], const unsigned a[4],                  \
                                              const unsigned b[2], const float c[4]) {          \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE                         \
                 ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"             \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                               \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), \
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));                                            \
  }
KILN_MMA_HALF(kiln_mma_f16, "f16")
KILN_MMA_HALF(kiln_mma_bf16, "bf16")
#define KILN_MMA_F16(d, a, b, c) kiln_mma_f16(d, a, b, c)
#define KILN_MMA_BF16(d, a, b, c) kiln_mma_bf16(d, a, b, c)

#define KILN_MMA_INT8(NAME, ATYPE)                                                                \
  static __device__ __forceinline__ void NAME(int d[4], const unsigned a[4], const unsigned b[2], \
                                              const int c[4]) {                                   \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32." ATYPE                                   \
                 ".s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"            \
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                 \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]),   \
                   "r"(c[1]), "r"(c[2]), "r"(c[3]));                                              \
  }
KILN_MMA_INT8(kiln_mma_s8, "s8")
KILN_MMA_INT8(kiln_mma_u8, "u8")
#define KILN_MMA_S8(d, a, b, c) kiln_mma_s8(d, a, b, c)
#define KILN_MMA_U8(d, a, b, c) kiln_mma_u8(d, a, b, c)

#define KILN_DP4A(NAME, ATYPE)                                                    \
  static __device__ __forceinline__ int NAME(unsigned a, unsigned b) {            \
    int r;                                                                        \
    asm("dp4a." ATYPE ".s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0)); \
    return r;                                                                     \
  }
KILN_DP4A(kiln_dp4a_u8, "u32")
KILN_DP4A(kiln_dp4a_s8, "s32")
#define KILN_DP4A_U8(a, b) kiln_dp4a_u8(a, b)
#define KILN_DP4A_S8(a, b) kiln_dp4a_s8(a, b)
static __device__ __forceinline__ unsigned kiln_word(const void* p, int j) {
  return static_cast<const unsigned*>(p)[j];
}

#endif

// ---- shared by both compilers ------------------------------------------------

// Narrow floats live in f32 registers and are rounded after every op.
static __device__ __forceinline__ float kiln_rn_f16(float x) {
  return __half2float(__float2half_rn(x));
}
static __device__ __forceinline__ float kiln_rn_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}
static __device__ __forceinline__ float kiln_rn_f8e4m3(float x) {
  return kiln_from_f8e4m3(kiln_to_f8e4m3(x));
}
static __device__ __forceinline__ float kiln_rn_f8e5m2(float x) {
  return kiln_from_f8e5m2(kiln_to_f8e5m2(x));
}

// Bits of a narrow float held in f32 (for Bitcast and mma fragments).
template <class H>
static __device__ __forceinline__ unsigned short kiln_bits16(H h) {
  unsigned short u;
  memcpy(&u, &h, 2);
  return u;
}
template <class H>
static __device__ __forceinline__ H kiln_from_bits16(unsigned short u) {
  H h;
  memcpy(&h, &u, 2);
  return h;
}
static __device__ __forceinline__ unsigned short kiln_f16_bits(float x) {
  return kiln_bits16(__float2half_rn(x));
}
static __device__ __forceinline__ float kiln_f16_from_bits(unsigned short u) {
  return __half2float(kiln_from_bits16<__half>(u));
}
static __device__ __forceinline__ unsigned short kiln_bf16_bits(float x) {
  return kiln_bits16(__float2bfloat16_rn(x));
}
static __device__ __forceinline__ float kiln_bf16_from_bits(unsigned short u) {
  return __bfloat162float(kiln_from_bits16<__nv_bfloat16>(u));
}
static __device__ __forceinline__ unsigned char kiln_f8e4m3_bits(float x) {
  return kiln_to_f8e4m3(x).__x;
}
static __device__ __forceinline__ float kiln_f8e4m3_from_bits(unsigned char u) {
  __nv_fp8_e4m3 v;
  v.__x = u;
  return kiln_from_f8e4m3(v);
}
static __device__ __forceinline__ unsigned char kiln_f8e5m2_bits(float x) {
  return kiln_to_f8e5m2(x).__x;
}
static __device__ __forceinline__ float kiln_f8e5m2_from_bits(unsigned char u) {
  __nv_fp8_e5m2 v;
  v.__x = u;
  return kiln_from_f8e5m2(v);
}

// Float -> int: truncate toward zero, saturate, NaN -> 0 (ir/op.h).
static __device__ __forceinline__ long long kiln_f2i(float x, long long lo, long long hi,
                                                     double hi_excl) {
  if (x != x) return 0;
  double t = trunc(static_cast<double>(x));
  if (t <= static_cast<double>(lo)) return lo;
  if (t >= hi_excl) return hi;
  return static_cast<long long>(t);
}

// Signed division and remainder: x/0 = 0, x%0 = 0, MIN/-1 wraps.
static __device__ __forceinline__ long long kiln_sdiv(long long a, long long b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<long long>(0ull - static_cast<unsigned long long>(a));
  return a / b;
}
static __device__ __forceinline__ long long kiln_srem(long long a, long long b) {
  return b == 0 || b == -1 ? 0 : a % b;
}

// Lookup: entry i of an n-entry table, 0 outside [0, n) (a negative index
// converts to a huge unsigned one).
template <class T, class I>
static __device__ __forceinline__ T kiln_lookup(const T* table, unsigned long long n, I i) {
  return static_cast<unsigned long long>(i) < n ? table[i] : static_cast<T>(0);
}

// Float atomics the hardware lacks, by compare-and-swap on the bits.
template <bool Max>
static __device__ __forceinline__ float kiln_atomic_minmax_f32(float* p, float v) {
  unsigned* u = reinterpret_cast<unsigned*>(p);
  unsigned old = *u, assumed;
  do {
    assumed = old;
    float cur = __uint_as_float(assumed);
    float next = Max ? fmaxf(cur, v) : fminf(cur, v);
    old = atomicCAS(u, assumed, __float_as_uint(next));
  } while (old != assumed);
  return __uint_as_float(old);
}
static __device__ __forceinline__ float kiln_atomic_max_f32(float* p, float v) {
  return kiln_atomic_minmax_f32<true>(p, v);
}
static __device__ __forceinline__ float kiln_atomic_min_f32(float* p, float v) {
  return kiln_atomic_minmax_f32<false>(p, v);
}
