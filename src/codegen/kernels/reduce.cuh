/*
 * reduce.cuh - the reduction family of generated kernels: reduce_inner,
 * reduce_outer and reduce_split (lanes of a block cooperate on each
 * output), reduce_finish (a split's second pass) and reduce_thread (a
 * thread per output, its few terms unrolled) with its vector variant.
 *
 * As in map.cuh, what differs between steps is a struct Step written by
 * codegen.c (gen_reduce, gen_reduce_thread, gen_finish); the kernel
 * instantiating a template here is launched with the geometry codegen.c
 * records (ein_kernel_src.grid and .block). What a Step gives:
 *   idx, acc_t, dst_t, src0_t, src1_t, out_t  index, accumulator and
 *                 stored types; out_t is acc_t for a split's pass 1 (its
 *                 partials), dst_t otherwise;
 *   nout, nred    outputs, and terms of each;
 *   identity(), comb(a, b)  the reduction (integer sums wrap; NaN wins
 *                 max and min, as numpy);
 *   out_offsets(o, b0, b1, b2)  adds output o's offset in each operand;
 *   term_offsets(r, o1, o2)     adds term r's offsets in the sources;
 *   value(s0, s1, o1, o2)       the accumulator-typed term there;
 *   result(acc)   the stored output: scaled and converted;
 * and per template the constants named at it.
 */
#ifndef EIN_KERNEL_REDUCE_CUH
#define EIN_KERNEL_REDUCE_CUH

#ifndef EIN_KERNEL_MAP_CUH
#include "map.cuh" /* ein_reduce_thread is a map */
#endif

/* A staged source's place in shared memory: element i, padding after
 * every 128 bytes (Step::stage_p elements, stage_q of padding: a word
 * for each of a warp's rows of terms), so lanes a power of two apart
 * land on different banks. */
template <class Step>
static __device__ __forceinline__ typename Step::idx
ein_staged_at(typename Step::idx i) {
  return i + i / Step::stage_p * Step::stage_q;
}

/* Copies the Step::stage_n elements of a source into sh, consecutive
 * threads taking consecutive elements (coalesced), for the whole block
 * (the outer form's per_block x lanes threads). */
template <class Step, class T>
static __device__ __forceinline__ void ein_stage_in(T *sh, const T *g) {
  typedef typename Step::idx idx;
  constexpr int threads = Step::per_block * Step::lanes;
  const idx t = (idx)threadIdx.y * Step::per_block + threadIdx.x;
  for (idx i = t; i < Step::stage_n; i += threads)
    sh[ein_staged_at<Step>(i)] = g[i];
  __syncthreads();
}

/* Lanes of a block cooperate on each output. inner: lanes run along x (a
 * warp, or 256 threads, per output), per_block outputs along y, and the
 * lanes combine with shuffles (past a warp, through shared memory).
 * Outer: outputs run along x, `lanes` lanes along y combine through
 * shared memory; Step::stage (1 or 2) names a small source each block
 * first copies into shared memory and reads there (outer_layout.h).
 * split: blockIdx.y picks a chunk of `chunk` terms, and the unscaled
 * partial goes to d[blockIdx.y][o]. */
EIN_STEP_FN
ein_reduce(typename Step::out_t *__restrict__ d,
           const typename Step::src0_t *__restrict__ s0,
           const typename Step::src1_t *__restrict__ s1) {
  typedef typename Step::idx idx;
  typedef typename Step::acc_t acc_t;
  constexpr int lanes = Step::lanes;
  const unsigned olane = Step::inner ? threadIdx.y : threadIdx.x;
  const unsigned rlane = Step::inner ? threadIdx.x : threadIdx.y;
  if constexpr (Step::stage == 1) {
    __shared__ typename Step::src0_t staged0[Step::stage_len];
    ein_stage_in<Step>(staged0, s0);
    s0 = staged0;
  } else if constexpr (Step::stage == 2) {
    __shared__ typename Step::src1_t staged1[Step::stage_len];
    ein_stage_in<Step>(staged1, s1);
    s1 = staged1;
  }
  for (idx ob = (idx)blockIdx.x * Step::per_block; ob < Step::nout;
       ob += (idx)gridDim.x * Step::per_block) {
    idx o = ob + olane;
    acc_t acc = Step::identity();
    idx b0 = 0, b1 = 0, b2 = 0;
    if (o < Step::nout) {
      Step::out_offsets(o, b0, b1, b2);
      idx r0 = 0, r1 = Step::nred;
      if constexpr (Step::split) {
        r0 = (idx)blockIdx.y * Step::chunk;
        r1 = r0 + Step::chunk < Step::nred ? r0 + Step::chunk : Step::nred;
      }
      for (idx r = r0 + rlane; r < r1; r += lanes) {
        idx o1 = b1, o2 = b2;
        Step::term_offsets(r, o1, o2);
        if constexpr (Step::stage == 1)
          o1 = ein_staged_at<Step>(o1);
        else if constexpr (Step::stage == 2)
          o2 = ein_staged_at<Step>(o2);
        acc = Step::comb(acc, Step::value(s0, s1, o1, o2));
      }
    }
    bool lead;
    if constexpr (Step::inner) {
      for (int off = 16; off > 0; off >>= 1)
        acc = Step::comb(acc, __shfl_down_sync(0xffffffffu, acc, off));
      if constexpr (lanes > 32) {
        __shared__ acc_t warps[lanes / 32];
        if ((threadIdx.x & 31) == 0)
          warps[threadIdx.x >> 5] = acc;
        __syncthreads();
        if (threadIdx.x == 0)
          for (int w = 1; w < lanes / 32; w++)
            acc = Step::comb(acc, warps[w]);
        __syncthreads();
      }
      lead = threadIdx.x == 0;
    } else {
      /* 16 outputs a warp row: a warp holds rows y and y + 1 of each
       * output, combined by a shuffle first */
      constexpr int rows = 32 / Step::per_block; /* 1 or 2 */
      if constexpr (rows == 2)
        acc = Step::comb(acc, __shfl_down_sync(0xffffffffu, acc, 16));
      __shared__ acc_t part[lanes / rows][Step::per_block + 1];
      if (threadIdx.y % rows == 0)
        part[threadIdx.y / rows][threadIdx.x] = acc;
      __syncthreads();
      if (threadIdx.y == 0)
        for (int y = 1; y < lanes / rows; y++)
          acc = Step::comb(acc, part[y][threadIdx.x]);
      __syncthreads();
      lead = threadIdx.y == 0;
    }
    if (lead && o < Step::nout) {
      if constexpr (Step::split)
        d[(idx)blockIdx.y * Step::nout + o] = acc;
      else
        d[b0] = Step::result(acc);
    }
  }
}

/* A split's pass 2: a thread per output combines the Step::splits
 * partials at [c][o] of s0 in chunk order (so every run gives the same
 * bits), then scales and stores as an unsplit kernel would. Blocks of
 * Step::block threads. */
EIN_STEP_FN
ein_reduce_finish(typename Step::dst_t *__restrict__ d,
                  const typename Step::acc_t *__restrict__ s0) {
  typedef typename Step::idx idx;
  EIN_GRID_LOOP(idx, o, Step::nout, Step::block) {
    typename Step::acc_t acc = s0[o];
    for (int c = 1; c < Step::splits; c++)
      acc = Step::comb(acc, s0[(idx)c * Step::nout + o]);
    idx b0 = 0, b1 = 0, b2 = 0;
    Step::out_offsets(o, b0, b1, b2);
    d[b0] = Step::result(acc);
  }
}

/* A thread per output, blocks of Step::block: a map (map.cuh) whose
 * items are the outputs and whose value folds an output's few terms with
 * the Step's terms(acc, s0, s1, o1, o2), unrolled at offsets fixed at
 * generation time, so neighbouring threads read neighbouring elements. */
template <class Step> struct ein_reduce_thread_map : Step {
  typedef typename Step::idx idx;
  static constexpr idx n = Step::nout;
  static __device__ __forceinline__ void offsets(idx i, idx &o0, idx &o1,
                                                 idx &o2) {
    Step::out_offsets(i, o0, o1, o2);
  }
  static __device__ __forceinline__ typename Step::dst_t
  value(const typename Step::src0_t *s0, const typename Step::src1_t *s1,
        idx o1, idx o2) {
    typename Step::acc_t acc = Step::identity();
    Step::terms(acc, s0, s1, o1, o2);
    return Step::result(acc);
  }
};

EIN_STEP_FN
ein_reduce_thread(typename Step::dst_t *__restrict__ d,
                  const typename Step::src0_t *__restrict__ s0,
                  const typename Step::src1_t *__restrict__ s1) {
  ein_map<ein_reduce_thread_map<Step>>(d, s0, s1);
}

/* reduce_thread's vector variant (codegen.c's thread_vec_choose): a
 * thread computes Step::per_thread adjacent outputs. Their terms along
 * the source's contiguous axis lie in Step::rows runs of Step::width
 * elements (per_thread outputs times the terms each has in a run), each
 * read as one aligned Step::load_t; the results go out as one
 * Step::store_t. Each output still folds its terms in the scalar
 * kernel's order (rows outer, the run's elements inner). The Step gives,
 * besides the head: out_offsets over groups of outputs (o2 unused),
 * row_offsets(r, o1), load(x) (a stored element as acc_t), block. */
EIN_STEP_FN
ein_reduce_thread_vec(typename Step::dst_t *__restrict__ d,
                      const typename Step::src0_t *__restrict__ s0) {
  typedef typename Step::idx idx;
  typedef typename Step::acc_t acc_t;
  constexpr int per = Step::per_thread, width = Step::width;
  constexpr int terms = width / per; /* of one output in one run */
  union run {
    typename Step::load_t v;
    typename Step::src0_t e[width];
  };
  union group {
    typename Step::store_t v;
    typename Step::dst_t e[per];
  };
  EIN_GRID_LOOP(idx, i, Step::nout, Step::block) {
    idx o0 = 0, o1 = 0, o2 = 0;
    Step::out_offsets(i, o0, o1, o2);
    acc_t acc[per];
    for (int v = 0; v < per; v++)
      acc[v] = Step::identity();
    for (idx r = 0; r < Step::rows; r++) {
      idx at = o1;
      Step::row_offsets(r, at);
      run x;
      x.v = *(const typename Step::load_t *)(s0 + at);
      for (int e = 0; e < width; e++)
        acc[e / terms] = Step::comb(acc[e / terms], Step::load(x.e[e]));
    }
    group y;
    for (int v = 0; v < per; v++)
      y.e[v] = Step::result(acc[v]);
    *(typename Step::store_t *)(d + o0) = y.v;
  }
}

#endif
