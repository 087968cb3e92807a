/*
 * prelude_nvrtc.cuh - what every generated kernel (codegen.c) expects
 * before its source when NVRTC compiles it for a GPU: the 64-bit unsigned
 * type and the f16/bf16 conversions. f16 goes through the hardware's cvt
 * instructions as inline PTX, so no CUDA header is needed and -minimal
 * keeps a compile near NVRTC's fixed cost; the complex types c64 and c128
 * are small structs here for the same reason (no <cuComplex.h>, no
 * std::complex). The emulated device's flavour of the same helpers is
 * prelude_host.h.
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

/* fp8 to f32, exact (docs/design.md, "fp8 dtypes"): e5m2 is the top byte
 * of an f16; e4m3fn (bias 7, no inf, NaN only at S.1111.111) by its bits. */
static __device__ __forceinline__ float ein_e5m2f(unsigned char b) {
  return ein_h2f((unsigned short)((unsigned)b << 8));
}
static __device__ __forceinline__ float ein_e4m3f(unsigned char b) {
  unsigned s = (unsigned)(b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return __uint_as_float(s | 0x7fc00000u);
  if (e == 0u) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
  return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}

/* c64 and c128: real then imaginary part, numpy's and cuBLAS's layout
 * (float2- and double2-shaped), with the sum and product the kernels use.
 * The product is (ac - bd) + (ad + bc)i, as numpy and cuBLAS compute it.
 * A trivial default constructor keeps them fit for __shared__ arrays. */
struct alignas(8) ein_c64 {
  float x, y;
  ein_c64() = default;
  __device__ __forceinline__ constexpr ein_c64(float r, float i = 0.0f)
      : x(r), y(i) {}
};
struct alignas(16) ein_c128 {
  double x, y;
  ein_c128() = default;
  __device__ __forceinline__ constexpr ein_c128(double r, double i = 0.0)
      : x(r), y(i) {}
  __device__ __forceinline__ constexpr ein_c128(ein_c64 v) : x(v.x), y(v.y) {}
  __device__ __forceinline__ explicit operator ein_c64() const {
    return ein_c64((float)x, (float)y);
  }
};
static __device__ __forceinline__ ein_c64 operator+(ein_c64 a, ein_c64 b) {
  return ein_c64(a.x + b.x, a.y + b.y);
}
static __device__ __forceinline__ ein_c64 operator*(ein_c64 a, ein_c64 b) {
  return ein_c64(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
static __device__ __forceinline__ ein_c128 operator+(ein_c128 a, ein_c128 b) {
  return ein_c128(a.x + b.x, a.y + b.y);
}
static __device__ __forceinline__ ein_c128 operator*(ein_c128 a, ein_c128 b) {
  return ein_c128(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
/* The warp reductions shuffle a complex value part by part. */
static __device__ __forceinline__ ein_c64
__shfl_down_sync(unsigned mask, ein_c64 v, unsigned delta, int width = 32) {
  return ein_c64(__shfl_down_sync(mask, v.x, delta, width),
                 __shfl_down_sync(mask, v.y, delta, width));
}
static __device__ __forceinline__ ein_c128
__shfl_down_sync(unsigned mask, ein_c128 v, unsigned delta, int width = 32) {
  return ein_c128(__shfl_down_sync(mask, v.x, delta, width),
                  __shfl_down_sync(mask, v.y, delta, width));
}
