/*
 * common.cuh - what the kernel template families (map.cuh, transpose.cuh,
 * reduce.cuh) share. Embedded right after the prelude, before them, for
 * NVRTC and the emulated device alike; each family also includes it, so
 * that a family compiles on its own (tests/kernel_syntax.sh). In the
 * embedded text the include sits in a group the guard has already
 * skipped, so no file is looked for at run time.
 */
#ifndef EIN_KERNEL_COMMON_CUH
#define EIN_KERNEL_COMMON_CUH

/* How each kernel template opens: a device function of one Step (the
 * struct codegen.c writes), inlined into the kernel instantiating it. */
#define EIN_STEP_FN template <class Step> static __device__ __forceinline__ void

/* The grid-stride loop of a 1-D launch of `block`-thread blocks: item i
 * of [0, n) for each thread, the whole grid moving on together, so a
 * kernel is correct for any grid size (codegen.c caps the grid). */
#define EIN_GRID_LOOP(idx, i, n, block)                                       \
  for (idx i = (idx)blockIdx.x * (block) + threadIdx.x; i < (n);             \
       i += (idx)gridDim.x * (block))

/* A loop the GPU compiler must not unroll (where unrolling costs
 * registers, hence occupancy); the host compiler has no such pragma. */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define EIN_NO_UNROLL _Pragma("unroll 1")
#else
#define EIN_NO_UNROLL
#endif

#endif
