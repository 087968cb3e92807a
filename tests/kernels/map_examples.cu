/*
 * map_examples.cu - src/codegen/kernels/map.cuh instantiated with example
 * steps of the shape codegen.c writes (gen_map), for a compile of the
 * template on its own: tests/kernel_syntax.sh runs `nvcc -fsyntax-only`
 * (and the host C++ compiler with the emulated device's prelude) on it.
 * Each step is one kernel of `einc cuda-src`: an f32 map with a product,
 * a fill, a 16-byte copy and a 2-byte vector map with a broadcast source.
 */
#include "kernels/map.cuh"

/* 'i j, j -> i j' 64x128 128, f32 */
struct mul_step {
  typedef int idx;
  typedef float dst_t;
  typedef float src0_t;
  typedef float src1_t;
  static constexpr int nsrc = 2, block = 256;
  static constexpr idx n = 8192;
  static __device__ __forceinline__ void offsets(idx i, idx &o0, idx &o1,
                                                 idx &o2) {
    int t_ = i, c_ = t_ % 128;
    t_ /= 128;
    o0 += c_ + t_ * 128;
    o1 += c_ + t_ * 128;
    o2 += c_;
  }
  static __device__ __forceinline__ dst_t value(const src0_t *s0,
                                                const src1_t *s1, idx o1,
                                                idx o2) {
    float v_ = s0[o1] * s1[o2];
    return (float)(v_ * 0.5f);
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_mul_main(float *__restrict__ d, const float *__restrict__ s0,
                 const float *__restrict__ s1) {
  ein_map<mul_step>(d, s0, s1);
}

/* a fill of 1e9 f64 elements: 64-bit indices */
struct fill_step {
  typedef long long idx;
  typedef double dst_t;
  typedef void src0_t;
  typedef void src1_t;
  static constexpr int nsrc = 0, block = 256;
  static constexpr idx n = 1000000000LL;
  static __device__ __forceinline__ void offsets(idx i, idx &o0, idx &o1,
                                                 idx &o2) {
    (void)o1; (void)o2;
    o0 += i;
  }
  static __device__ __forceinline__ dst_t value(const src0_t *, const src1_t *,
                                                idx, idx) {
    return -1.5;
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_fill_main(double *__restrict__ d, const void *__restrict__ s0,
                  const void *__restrict__ s1) {
  ein_map<fill_step>(d, s0, s1);
}

/* a strided copy in 16-byte words */
struct copy_step {
  typedef int idx;
  typedef uint4 dst_t;
  typedef uint4 src0_t;
  typedef void src1_t;
  static constexpr int nsrc = 1, block = 256;
  static constexpr idx n = 4096;
  static __device__ __forceinline__ void offsets(idx i, idx &o0, idx &o1,
                                                 idx &o2) {
    (void)o2;
    o0 += i;
    o1 += (i % 64) + (i / 64) * 128;
  }
  static __device__ __forceinline__ dst_t value(const src0_t *s0,
                                                const src1_t *, idx o1, idx) {
    return s0[o1];
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_copy_vec(uint4 *__restrict__ d, const uint4 *__restrict__ s0,
                 const void *__restrict__ s1) {
  ein_map<copy_step>(d, s0, s1);
}

/* 'i, j -> i j' 64 128, f16: source 1 broadcast along the vector */
struct outer_step {
  typedef int idx;
  typedef unsigned short dst_t;
  typedef unsigned short src0_t;
  typedef unsigned short src1_t;
  static constexpr int nsrc = 2, block = 256, vec = 8;
  static constexpr idx n = 1024;
  static constexpr bool contig1 = false, contig2 = true;
  static __device__ __forceinline__ void offsets(idx i, idx &o0, idx &o1,
                                                 idx &o2) {
    int c_ = i % 16, t_ = i / 16;
    o0 += c_ * 8 + t_ * 128;
    o1 += t_;
    o2 += c_ * 8;
  }
  static __device__ __forceinline__ dst_t value_of(src0_t x0, src1_t x1) {
    float v_ = ein_h2f(x0) * ein_h2f(x1);
    return ein_f2h(v_);
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_outer_vec(unsigned short *__restrict__ d,
                  const unsigned short *__restrict__ s0,
                  const unsigned short *__restrict__ s1) {
  ein_map_half_vec<outer_step>(d, s0, s1);
}
