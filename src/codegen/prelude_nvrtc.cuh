/*
 * prelude_nvrtc.cuh - what every generated kernel (codegen.c) expects
 * before its source when NVRTC compiles it for a GPU: the 64-bit unsigned
 * type and the f16/bf16 conversions. f16 goes through the hardware's cvt
 * instructions as inline PTX, so no CUDA header is needed and -minimal
 * keeps a compile near NVRTC's fixed cost. The emulated device's flavour
 * of the same helpers is prelude_host.h.
 */
typedef unsigned long long ein_u64;
static __device__ __forceinline__ float ein_h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
static __device__ __forceinline__ unsigned short ein_f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
static __device__ __forceinline__ float ein_b2f(unsigned short h) {
  return __uint_as_float((unsigned)h << 16);
}
/* round to nearest even; NaN stays NaN */
static __device__ __forceinline__ unsigned short ein_f2b(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
