/*
 * transpose_examples.cu - src/codegen/kernels/transpose.cuh instantiated
 * with example steps of the shape codegen.c writes (gen_transpose), for
 * tests/kernel_syntax.sh: an f32 -> f16 transposing conversion with a
 * batch axis, the 2-byte pair-moving copy of 'i j -> j i', the runs
 * kernel of an odd-pitch 2-byte transpose, and a staged copy (patchify).
 */
#include "kernels/transpose.cuh"

/* 'b i j -> b j i' 4x100x300, f32 -> f16, scaled by 2 */
struct conv_step {
  typedef int idx;
  typedef unsigned short dst_t;
  typedef float src0_t;
  static constexpr int tile = 32, tile_rows = 8;
  static constexpr idx na = 100, nb = 300, nrest = 4, ta = 4, sa0 = 1,
                       sb0 = 100, sa1 = 300, sb1 = 1;
  static __device__ __forceinline__ void rest_offsets(idx r, idx &o0, idx &o1,
                                                      idx &o2) {
    (void)o2;
    o0 += r * 30000;
    o1 += r * 30000;
  }
  static __device__ __forceinline__ dst_t value(const src0_t *s0, idx at) {
    float v_ = s0[at];
    v_ = (float)(v_ * 2.0f);
    return ein_f2h(v_);
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_conv_main(unsigned short *__restrict__ d,
                  const float *__restrict__ s0, const void *__restrict__) {
  ein_transpose<conv_step>(d, s0);
}

/* 'i j -> j i' 1024x2048 bf16, pairs */
struct pair_step {
  typedef long long idx;
  typedef unsigned short dst_t;
  typedef unsigned short src0_t;
  static constexpr int tile = 64, tile_rows = 8;
  static constexpr idx na = 1024LL, nb = 2048LL, nrest = 1LL, ta = 16LL,
                       sa0 = 1LL, sb0 = 1024LL, sa1 = 2048LL, sb1 = 1LL;
  static __device__ __forceinline__ void rest_offsets(idx, idx &, idx &,
                                                      idx &) {}
};
extern "C" __global__ void __launch_bounds__(256)
    ein_pair_vec(unsigned short *__restrict__ d,
                 const unsigned short *__restrict__ s0,
                 const void *__restrict__) {
  ein_transpose_half<pair_step>(d, s0);
}

/* 'a b c -> c b a' 33x65x97 f16: odd pitches, runs of 64 in aligned
 * windows */
struct runs_step {
  typedef int idx;
  typedef unsigned short dst_t;
  typedef unsigned short src0_t;
  static constexpr int tile = 64, tile_rows = 8;
  static constexpr bool raw = false;
  static constexpr idx na = 33, nb = 97, nrest = 65, ta = 1, sa0 = 1,
                       sb0 = 2145, sa1 = 6305, sb1 = 1;
  static __device__ __forceinline__ void rest_offsets(idx r, idx &o0, idx &o1,
                                                      idx &o2) {
    (void)o2;
    o0 += r * 33;
    o1 += r * 97;
  }
  static __device__ __forceinline__ dst_t value(const src0_t *s0, idx at) {
    return s0[at];
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_runs_main(unsigned short *__restrict__ d,
                  const unsigned short *__restrict__ s0,
                  const void *__restrict__) {
  ein_transpose_runs<runs_step>(d, s0);
}

/* 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)' 2x3x16x32 bf16, p1=4 p2=8: the
 * staged copy, runs of 96 (p1 p2 c) gathered from rows of p2 */
struct staged_step {
  typedef int idx;
  typedef unsigned short dst_t;
  typedef uint4 vec_t;
  static constexpr int block = 256, width = 8, tiles = 21;
  static constexpr idx elems = 96, cstride = 3, nrest = 32;
  static __device__ __forceinline__ void rest_offsets(idx r, idx &o0, idx &o1,
                                                      idx &o2) {
    (void)o2;
    o0 += r * 96;
    o1 += (r % 4) * 8 + (r / 4 % 4) * 128 + (r / 16) * 1536;
  }
  static __device__ __forceinline__ void tile_offsets(idx u, idx &o0, idx &o1,
                                                      idx &o2) {
    (void)o2;
    o0 += (u % 4) * 24 + u / 4;
    o1 += (u % 4) * 32 + (u / 4) * 512;
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_staged_vec(unsigned short *__restrict__ d,
                   const unsigned short *__restrict__ s0,
                   const void *__restrict__) {
  ein_transpose_staged<staged_step>(d, s0);
}
