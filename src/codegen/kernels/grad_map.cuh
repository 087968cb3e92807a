/*
 * grad_map.cuh - the elementwise operations of LOOP steps whose map is
 * not the plain product (plan.h, ein_map_op: a gradient program's
 * compare, divide and select steps, and conjugating copies).
 *
 * codegen.c's value of such a step is ein_map_NAME(a, b) of the sources
 * loaded into the accumulator type (float, double, ein_c64, ein_c128; a
 * one-source step passes its source twice), instantiated in a map
 * kernel (map.cuh). Embedded after the prelude and common.cuh, for NVRTC
 * and the emulated device alike.
 */
#ifndef EIN_KERNEL_GRAD_MAP_CUH
#define EIN_KERNEL_GRAD_MAP_CUH

#ifndef EIN_KERNEL_COMMON_CUH
#include "common.cuh"
#endif

/* What the operations ask of a value: zero, equal, the quotient, the real
 * part and the conjugate, for real accumulators and then both complex
 * ones (complex values compare and test zero in both parts). */
template <class T> static __device__ __forceinline__ bool ein_zero(T a) {
  return a == T(0);
}
template <class T>
static __device__ __forceinline__ bool ein_same(T a, T b) {
  return a == b;
}
template <class T> static __device__ __forceinline__ T ein_quot(T a, T b) {
  return a / b;
}
template <class T> static __device__ __forceinline__ double ein_re(T a) {
  return (double)a;
}
template <class T> static __device__ __forceinline__ T ein_conj(T a) {
  return a;
}

#define EIN_COMPLEX_OPS(C, R)                                                 \
  template <> __device__ __forceinline__ bool ein_zero<C>(C a) {              \
    return a.x == 0 && a.y == 0;                                              \
  }                                                                           \
  template <> __device__ __forceinline__ bool ein_same<C>(C a, C b) {         \
    return a.x == b.x && a.y == b.y;                                          \
  }                                                                           \
  template <> __device__ __forceinline__ C ein_quot<C>(C a, C b) {            \
    if (b.y == 0) return C(a.x / b.x, a.y / b.x);                             \
    R den = b.x * b.x + b.y * b.y;                                            \
    return C((a.x * b.x + a.y * b.y) / den, (a.y * b.x - a.x * b.y) / den);   \
  }                                                                           \
  template <> __device__ __forceinline__ double ein_re<C>(C a) {              \
    return (double)a.x;                                                       \
  }                                                                           \
  template <> __device__ __forceinline__ C ein_conj<C>(C a) {                 \
    return C(a.x, -a.y);                                                      \
  }
EIN_COMPLEX_OPS(ein_c64, float)
EIN_COMPLEX_OPS(ein_c128, double)
#undef EIN_COMPLEX_OPS

template <class T>
static __device__ __forceinline__ T ein_map_equal(T a, T b) {
  return ein_same(a, b) ? T(1) : T(0);
}
template <class T> static __device__ __forceinline__ T ein_map_div(T a, T b) {
  return ein_quot(a, b);
}
template <class T>
static __device__ __forceinline__ T ein_map_is_zero(T a, T) {
  return ein_zero(a) ? T(1) : T(0);
}
template <class T>
static __device__ __forceinline__ T ein_map_zero_to_one(T a, T) {
  return ein_zero(a) ? T(1) : a;
}
template <class T>
static __device__ __forceinline__ T ein_map_div_nonzero(T a, T b) {
  return ein_zero(b) ? a : ein_quot(a, b);
}
/* (z, x): z counts the zeros of x's group */
template <class T>
static __device__ __forceinline__ T ein_map_prod_mask(T z, T x) {
  return ein_re(z) == 0 || (ein_re(z) == 1 && ein_zero(x)) ? T(1) : T(0);
}
template <class T>
static __device__ __forceinline__ T ein_map_conj(T a, T) {
  return ein_conj(a);
}

#endif
