/*
 * reduce_examples.cu - src/codegen/kernels/reduce.cuh instantiated with
 * example steps of the shape codegen.c writes (gen_reduce,
 * gen_reduce_thread, gen_finish), for tests/kernel_syntax.sh: a row sum
 * with 256 lanes per output, a column max split in chunks with its
 * second pass, a small contraction with its 16x16 operand staged in
 * shared memory, an integer sum of 4 terms a thread, and a bf16 2x2 mean
 * in the thread kernel's vector form.
 */
#include "kernels/reduce.cuh"

/* 'b d -> b' 64x8192 f16, sum: inner layout, 256 lanes */
struct row_step {
  typedef int idx;
  typedef float acc_t;
  typedef unsigned short dst_t;
  typedef unsigned short out_t;
  typedef unsigned short src0_t;
  typedef void src1_t;
  static constexpr idx nout = 64, nred = 8192;
  static __device__ __forceinline__ acc_t identity() { return 0.0f; }
  static __device__ __forceinline__ acc_t comb(acc_t a, acc_t b) {
    return a + b;
  }
  static constexpr int lanes = 256, per_block = 1;
  static constexpr bool inner = true, split = false;
  static constexpr idx chunk = 8192;
  static constexpr int stage = 0, stage_p = 32, stage_q = 1;
  static constexpr idx stage_n = 0, stage_len = 1;
  static __device__ __forceinline__ void out_offsets(idx o, idx &b0, idx &b1,
                                                     idx &b2) {
    (void)b2;
    b0 += o;
    b1 += o * 8192;
  }
  static __device__ __forceinline__ void term_offsets(idx r, idx &o1,
                                                      idx &o2) {
    (void)o2;
    o1 += r;
  }
  static __device__ __forceinline__ acc_t value(const src0_t *s0,
                                                const src1_t *, idx o1, idx) {
    return ein_h2f(s0[o1]);
  }
  static __device__ __forceinline__ dst_t result(acc_t acc_) {
    return ein_f2h(acc_ * 0.5f);
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_row_main(unsigned short *__restrict__ d,
                 const unsigned short *__restrict__ s0,
                 const void *__restrict__ s1) {
  ein_reduce<row_step>(d, s0, s1);
}

/* 's d -> d' 65536x512 f64, max: outer layout, split in 8 chunks */
struct col_step {
  typedef int idx;
  typedef double acc_t;
  typedef double dst_t;
  typedef double out_t;
  typedef double src0_t;
  typedef void src1_t;
  static constexpr idx nout = 512, nred = 65536;
  static constexpr int splits = 8, block = 256;
  static __device__ __forceinline__ acc_t identity() {
    return -__longlong_as_double(0x7ff0000000000000LL);
  }
  static __device__ __forceinline__ acc_t comb(acc_t a, acc_t b) {
    return (b > a || b != b) ? b : a;
  }
  static constexpr int lanes = 8, per_block = 32;
  static constexpr bool inner = false, split = true;
  static constexpr idx chunk = 8192;
  static constexpr int stage = 0, stage_p = 32, stage_q = 1;
  static constexpr idx stage_n = 0, stage_len = 1;
  static __device__ __forceinline__ void out_offsets(idx o, idx &b0, idx &b1,
                                                     idx &b2) {
    (void)b2;
    b0 += o;
    b1 += o;
  }
  static __device__ __forceinline__ void term_offsets(idx r, idx &o1,
                                                      idx &o2) {
    (void)o2;
    o1 += r * 512;
  }
  static __device__ __forceinline__ acc_t value(const src0_t *s0,
                                                const src1_t *, idx o1, idx) {
    return s0[o1];
  }
  static __device__ __forceinline__ dst_t result(acc_t acc_) { return acc_; }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_col_main(double *__restrict__ d, const double *__restrict__ s0,
                 const void *__restrict__ s1) {
  ein_reduce<col_step>(d, s0, s1);
}
extern "C" __global__ void __launch_bounds__(256)
    ein_col_finish(double *__restrict__ d, const double *__restrict__ s0,
                   const void *__restrict__) {
  ein_reduce_finish<col_step>(d, s0);
}

/* 'c d, h d -> c h' 4096x16 and 16x16 f32: outer layout, 16 outputs a
 * warp row, the 16x16 operand staged in shared memory */
struct staged_step {
  typedef int idx;
  typedef float acc_t;
  typedef float dst_t;
  typedef float out_t;
  typedef float src0_t;
  typedef float src1_t;
  static constexpr idx nout = 65536, nred = 16;
  static __device__ __forceinline__ acc_t identity() { return 0.0f; }
  static __device__ __forceinline__ acc_t comb(acc_t a, acc_t b) {
    return a + b;
  }
  static constexpr int lanes = 8, per_block = 16;
  static constexpr bool inner = false, split = false;
  static constexpr idx chunk = 16;
  static constexpr int stage = 2, stage_p = 32, stage_q = 2;
  static constexpr idx stage_n = 256, stage_len = 274;
  static __device__ __forceinline__ void out_offsets(idx o, idx &b0, idx &b1,
                                                     idx &b2) {
    b0 += o;
    b1 += o / 16 * 16;
    b2 += o % 16 * 16;
  }
  static __device__ __forceinline__ void term_offsets(idx r, idx &o1,
                                                      idx &o2) {
    o1 += r;
    o2 += r;
  }
  static __device__ __forceinline__ acc_t value(const src0_t *s0,
                                                const src1_t *s1, idx o1,
                                                idx o2) {
    return s0[o1] * s1[o2];
  }
  static __device__ __forceinline__ dst_t result(acc_t acc_) { return acc_; }
};
extern "C" __global__ void __launch_bounds__(128)
    ein_staged_main(float *__restrict__ d, const float *__restrict__ s0,
                    const float *__restrict__ s1) {
  ein_reduce<staged_step>(d, s0, s1);
}

/* 'i k, k -> i' 1000x4 i32: 4 terms a thread, wrapping sum of products */
struct few_step {
  typedef int idx;
  typedef long long acc_t;
  typedef int dst_t;
  typedef int out_t;
  typedef int src0_t;
  typedef int src1_t;
  static constexpr idx nout = 1000, nred = 4;
  static constexpr int block = 256;
  static __device__ __forceinline__ acc_t identity() { return 0LL; }
  static __device__ __forceinline__ acc_t comb(acc_t a, acc_t b) {
    return (long long)((ein_u64)a + (ein_u64)b);
  }
  static __device__ __forceinline__ void out_offsets(idx o, idx &b0, idx &b1,
                                                     idx &b2) {
    (void)b2;
    b0 += o;
    b1 += o * 4;
  }
  static __device__ __forceinline__ void terms(acc_t &acc_, const src0_t *s0,
                                               const src1_t *s1, idx o1,
                                               idx o2) {
    for (int k = 0; k < 4; k++)
      acc_ = comb(acc_, (long long)((ein_u64)s0[o1 + k] * (ein_u64)s1[o2 + k]));
  }
  static __device__ __forceinline__ dst_t result(acc_t acc_) {
    return (int)acc_;
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_few_main(int *__restrict__ d, const int *__restrict__ s0,
                 const int *__restrict__ s1) {
  ein_reduce_thread<few_step>(d, s0, s1);
}

/* 'b (h h2) (w w2) -> b h w' 2x8x16 bf16, mean over 2x2 windows: the
 * vector variant, 4 outputs a thread from two 16-byte rows */
struct pool_vec_step {
  typedef int idx;
  typedef float acc_t;
  typedef unsigned short dst_t;
  typedef unsigned short out_t;
  typedef unsigned short src0_t;
  typedef void src1_t;
  static constexpr idx nout = 16, nred = 4;
  static __device__ __forceinline__ acc_t identity() { return 0.0f; }
  static __device__ __forceinline__ acc_t comb(acc_t a, acc_t b) {
    return a + b;
  }
  static constexpr int block = 256, per_thread = 4, width = 8, rows = 2;
  typedef uint4 load_t;
  typedef uint2 store_t;
  static __device__ __forceinline__ void out_offsets(idx o, idx &b0, idx &b1,
                                                     idx &b2) {
    (void)b2;
    b0 += (o % 2) * 4 + (o / 2) * 8;
    b1 += (o % 2) * 8 + (o / 2) * 32;
  }
  static __device__ __forceinline__ void row_offsets(idx r, idx &o1) {
    o1 += r * 16;
  }
  static __device__ __forceinline__ acc_t load(src0_t x) { return ein_b2f(x); }
  static __device__ __forceinline__ dst_t result(acc_t acc_) {
    return ein_f2b(acc_ * 0.25f);
  }
};
extern "C" __global__ void __launch_bounds__(256)
    ein_pool_vec(unsigned short *__restrict__ d,
                 const unsigned short *__restrict__ s0,
                 const void *__restrict__) {
  ein_reduce_thread_vec<pool_vec_step>(d, s0);
}
