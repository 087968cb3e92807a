/*
 * map.cuh - the map family of generated kernels: fill, map (elementwise
 * convert, scale, multiply of two operands, permute without a tile) and
 * their vector variants.
 *
 * A kernel of this family is a grid-stride loop over the flat index of
 * the step's kept axes. What differs between steps (sizes, strides,
 * dtypes, the value computed) is not here: codegen.c writes it as a
 * struct Step of constants and small inline functions, then instantiates
 * one of the templates below in an `extern "C"` kernel. The prelude
 * (prelude_nvrtc.cuh or prelude_host.h) comes first; this file is
 * embedded after it by scripts/embed.py, for NVRTC and for the emulated
 * device alike.
 *
 * What a Step gives (codegen.c, gen_map):
 *   idx                 int, or long long when an offset may pass 2^30;
 *   dst_t, src0_t, src1_t  the stored types (src1_t is void for < 2 srcs);
 *   n                   the number of items (threads' work units);
 *   block               threads per block (1-D; the launch's and the
 *                       kernel's __launch_bounds__);
 *   offsets(i, o0, o1, o2)  adds item i's element offsets per operand;
 *   value(s0, s1, o1, o2)   the stored result at those offsets (map),
 *                           or the constant (fill);
 * and for ein_map_half_vec in addition:
 *   vec                 elements per thread (one 16-byte vector);
 *   contig1, contig2    whether source 1/2 is contiguous along the vector
 *                       (else broadcast: one element for all lanes);
 *   value_of(x0, x1)    the stored result from stored source values.
 */
#ifndef EIN_KERNEL_MAP_CUH
#define EIN_KERNEL_MAP_CUH

#ifndef EIN_KERNEL_COMMON_CUH
#include "common.cuh"
#endif

/* One item per thread and grid stride: fill, map, or a plain copy in
 * 16-byte words (a Step whose types are uint4). */
EIN_STEP_FN
ein_map(typename Step::dst_t *__restrict__ d,
        const typename Step::src0_t *__restrict__ s0,
        const typename Step::src1_t *__restrict__ s1) {
  typedef typename Step::idx idx;
  EIN_GRID_LOOP(idx, i, Step::n, Step::block) {
    idx o0 = 0, o1 = 0, o2 = 0;
    Step::offsets(i, o0, o1, o2);
    d[o0] = Step::value(s0, s1, o1, o2);
  }
}

/* The 2-byte map variant (outer products, scaled or converted repeats):
 * each thread loads Step::vec elements of every contiguous source as
 * one 16-byte vector (a broadcast source as one element), computes as
 * many results and stores them as one vector. */
EIN_STEP_FN
ein_map_half_vec(unsigned short *__restrict__ d,
                 const typename Step::src0_t *__restrict__ s0,
                 const typename Step::src1_t *__restrict__ s1) {
  typedef typename Step::idx idx;
  union half_vec {
    uint4 v;
    unsigned short h[Step::vec];
  };
  EIN_GRID_LOOP(idx, i, Step::n, Step::block) {
    idx o0 = 0, o1 = 0, o2 = 0;
    Step::offsets(i, o0, o1, o2);
    half_vec w0, w1 = {}, w2 = {};
    if (Step::contig1)
      w1.v = *(const uint4 *)(s0 + o1);
    if constexpr (Step::nsrc == 2) {
      if (Step::contig2)
        w2.v = *(const uint4 *)(s1 + o2);
    }
    for (int e = 0; e < Step::vec; e++) {
      typename Step::src0_t x0 =
          Step::contig1 ? (typename Step::src0_t)w1.h[e] : s0[o1];
      if constexpr (Step::nsrc == 2)
        w0.h[e] = Step::value_of(
            x0, Step::contig2 ? (typename Step::src1_t)w2.h[e] : s1[o2]);
      else
        w0.h[e] = Step::value_of(x0, 0);
    }
    *(uint4 *)(d + o0) = w0.v;
  }
}

#endif
