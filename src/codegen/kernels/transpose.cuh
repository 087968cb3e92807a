/*
 * transpose.cuh - the transpose family of generated kernels: a permuting
 * copy (or conversion) of one source through a shared-memory tile, so
 * that both the reads and the writes are coalesced, its 2-byte variant
 * that moves pairs, and the staged copy of whole dst runs in vectors.
 *
 * Axis a is dst's contiguous axis, axis b the source's; the other kept
 * axes ("rest") are walked along blockIdx.y, the tiles of the a-b plane
 * along blockIdx.x (ta tiles along a, then rows of them along b). Blocks
 * are Step::tile x Step::tile_rows threads (Step::tile / 2 x tile_rows
 * for the pair variant). As in map.cuh, what differs
 * between steps is a struct Step written by codegen.c (gen_transpose):
 *   idx, dst_t, src0_t   index and stored types;
 *   na, nb, nrest        the sizes of a, b and of the rest;
 *   tile, tile_rows      the tile edge and the threads per tile column;
 *   ta                   tiles along a (of this kernel's tile edge);
 *   sa0, sb0, sa1, sb1   strides of a and b in dst (0) and the source (1);
 *   rest_offsets(r, o0, o1, o2)  adds rest index r's offsets;
 *   value(s0, at)        the stored result from source element at
 *                        (ein_transpose only: scaled and converted; for
 *                        a short reduction, its terms at fixed offsets
 *                        from at folded first).
 */
#ifndef EIN_KERNEL_TRANSPOSE_CUH
#define EIN_KERNEL_TRANSPOSE_CUH

#ifndef EIN_KERNEL_COMMON_CUH
#include "common.cuh"
#endif

/* Reads the tile in rows along a with threads along b (the source's
 * contiguous axis), then writes it in rows along b with threads along a
 * (dst's). The pitch Step::tile + 1 keeps both phases free of bank
 * conflicts. */
EIN_STEP_FN
ein_transpose(typename Step::dst_t *__restrict__ d,
              const typename Step::src0_t *__restrict__ s0) {
  typedef typename Step::idx idx;
  __shared__ typename Step::dst_t tile[Step::tile][Step::tile + 1];
  const idx a0 = (idx)(blockIdx.x % Step::ta) * Step::tile;
  const idx b0 = (idx)(blockIdx.x / Step::ta) * Step::tile;
  for (idx r = blockIdx.y; r < Step::nrest; r += gridDim.y) {
    idx o0 = 0, o1 = 0, o2 = 0;
    Step::rest_offsets(r, o0, o1, o2);
    for (int j = threadIdx.y; j < Step::tile; j += Step::tile_rows) {
      idx a = a0 + j, b = b0 + threadIdx.x;
      if (a < Step::na && b < Step::nb)
        tile[j][threadIdx.x] =
            Step::value(s0, o1 + a * Step::sa1 + b * Step::sb1);
    }
    __syncthreads();
    for (int j = threadIdx.y; j < Step::tile; j += Step::tile_rows) {
      idx b = b0 + j, a = a0 + threadIdx.x;
      if (a < Step::na && b < Step::nb)
        d[o0 + a * Step::sa0 + b * Step::sb0] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

/* The 2-byte plain copy: a tile of edge Step::tile (odd pitch) read in
 * pairs along b and written in pairs along a, each pair one aligned
 * 4-byte word on both sides (codegen.c's half_transpose_ok: sizes and
 * strides even, so sa0 and sb1 are 1). */
EIN_STEP_FN
ein_transpose_half(unsigned short *__restrict__ d,
                   const unsigned short *__restrict__ s0) {
  typedef typename Step::idx idx;
  __shared__ unsigned short tile[Step::tile][Step::tile + 1];
  const idx a0 = (idx)(blockIdx.x % Step::ta) * Step::tile;
  const idx b0 = (idx)(blockIdx.x / Step::ta) * Step::tile;
  const int x2 = 2 * threadIdx.x;
  for (idx r = blockIdx.y; r < Step::nrest; r += gridDim.y) {
    idx o0 = 0, o1 = 0, o2 = 0;
    Step::rest_offsets(r, o0, o1, o2);
    for (int j = threadIdx.y; j < Step::tile; j += Step::tile_rows) {
      idx a = a0 + j, b = b0 + x2;
      if (a < Step::na && b < Step::nb) {
        unsigned int p = *(const unsigned int *)(s0 + o1 + a * Step::sa1 + b);
        tile[j][x2] = (unsigned short)(p & 0xffffu);
        tile[j][x2 + 1] = (unsigned short)(p >> 16);
      }
    }
    __syncthreads();
    for (int j = threadIdx.y; j < Step::tile; j += Step::tile_rows) {
      idx b = b0 + j, a = a0 + x2;
      if (a < Step::na && b < Step::nb)
        *(unsigned int *)(d + o0 + a + b * Step::sb0) =
            (unsigned int)tile[x2][j] | ((unsigned int)tile[x2 + 1][j] << 16);
    }
    __syncthreads();
  }
}

/* Where a run starting at p sits in its window of 32 elements aligned to
 * 32 elements' bytes (64 for 2-byte types): the window's lane of p. */
template <class T>
static __device__ __forceinline__ int ein_window_skew(const T *p) {
  return (int)(((ein_u64)(const void *)p / sizeof(T)) & 31u);
}

/* Element e = 32 w + lane - m of a run of `len` elements whose first
 * one is lane m (0..31) of its window w (0, 1 or 2), clamped to the run:
 * lanes before or past it take its first or last element (an address
 * another lane of the window takes too: no sector more, the same value
 * stored) rather than sit out, since a lane masked off inside the row
 * loop would be paired by the emulated device's counting with the next
 * row's request (a lane's k-th execution of an instruction is the warp's
 * k-th request), where on the GPU it is one request either way. */
static __device__ __forceinline__ int ein_run_lane(int w, int m, int len) {
  const int last = len - 1; /* two selects (a min and a max), no branch */
  int e = 32 * w + (int)threadIdx.x - m;
  e = e < 0 ? 0 : e;
  return e > last ? last : e;
}

/* Source element at as dst stores it: its bits for a plain copy
 * (Step::raw), else Step::value's. */
template <class Step>
static __device__ __forceinline__ typename Step::dst_t
ein_run_get(const typename Step::src0_t *s0, typename Step::idx at) {
  if constexpr (Step::raw)
    return (typename Step::dst_t)s0[at];
  else
    return Step::value(s0, at);
}

/* The 2-byte transpose of odd pitch (codegen.c's runs_transpose): a tile
 * of edge Step::tile (64) whose rows (along b, the source's contiguous
 * axis) are read and whose columns (along a, dst's) are written as runs
 * of up to 64 elements, each in the windows of 32 lanes aligned to 64
 * bytes that cover it (window 0 always, 1 and 2 where the run reaches
 * them: whole-warp branches): a run's sectors are touched once each (5
 * for 4 of bytes) where the 32x32 tile's runs of 32 start anywhere in a
 * sector on both sides (3 for 2). Each window is written out, not
 * looped, so that it is one instruction of the warp. Needs sb1 == 1 and
 * sa0 == 1; Step::raw (a plain copy) moves the bits without value(). The
 * pitch Step::tile + 2 (an odd number of 4-byte words) keeps the column
 * reads free of bank conflicts. */
EIN_STEP_FN
ein_transpose_runs(typename Step::dst_t *__restrict__ d,
                   const typename Step::src0_t *__restrict__ s0) {
  typedef typename Step::idx idx;
  typedef typename Step::dst_t dst_t;
  constexpr int T = Step::tile;
  __shared__ dst_t tile[T][T + 2];
  const idx a0 = (idx)(blockIdx.x % Step::ta) * T;
  const idx b0 = (idx)(blockIdx.x / Step::ta) * T;
  const int blen = Step::nb - b0 < T ? (int)(Step::nb - b0) : T;
  const int alen = Step::na - a0 < T ? (int)(Step::na - a0) : T;
  for (idx r = blockIdx.y; r < Step::nrest; r += gridDim.y) {
    idx o0 = 0, o1 = 0, o2 = 0;
    Step::rest_offsets(r, o0, o1, o2);
    EIN_NO_UNROLL
    for (int j = threadIdx.y; j < alen; j += Step::tile_rows) {
      const typename Step::src0_t *run = s0 + o1 + (a0 + j) * Step::sa1 + b0;
      const int m = ein_window_skew(run);
      const idx at = run - s0;
      int e = ein_run_lane(0, m, blen);
      tile[j][e] = ein_run_get<Step>(s0, at + e);
      if (32 - m < blen) {
        e = ein_run_lane(1, m, blen);
        tile[j][e] = ein_run_get<Step>(s0, at + e);
      }
      if (64 - m < blen) {
        e = ein_run_lane(2, m, blen);
        tile[j][e] = ein_run_get<Step>(s0, at + e);
      }
    }
    __syncthreads();
    EIN_NO_UNROLL
    for (int j = threadIdx.y; j < blen; j += Step::tile_rows) {
      dst_t *run = d + o0 + a0 + (b0 + j) * Step::sb0;
      const int m = ein_window_skew(run);
      int e = ein_run_lane(0, m, alen);
      run[e] = tile[e][j];
      if (32 - m < alen) {
        e = ein_run_lane(1, m, alen);
        run[e] = tile[e][j];
      }
      if (64 - m < alen) {
        e = ein_run_lane(2, m, alen);
        run[e] = tile[e][j];
      }
    }
    __syncthreads();
  }
}

/* A staged copy (codegen.c's staged_axes): each of a block's Step::tiles
 * tiles is one contiguous run of Step::elems elements in dst. Phase 1
 * reads the tile in Step::width-element vectors along the source's
 * contiguous axis and scatters them into shared memory at their dst
 * places (the vector's elements Step::cstride apart); phase 2 writes the
 * runs out as vectors. The Step gives: idx, dst_t, vec_t (width
 * elements), block, width, tiles, elems, cstride, nrest,
 * rest_offsets(r, o0, o1, o2) (a tile's first element), and
 * tile_offsets(u, o0, o1, o2) (vector u's place in the tile, o0, and
 * in the source, o1). */
EIN_STEP_FN
ein_transpose_staged(typename Step::dst_t *__restrict__ d,
                     const typename Step::dst_t *__restrict__ s0) {
  typedef typename Step::idx idx;
  typedef typename Step::dst_t dst_t;
  constexpr int width = Step::width;
  constexpr idx vecs = Step::elems / width; /* of one tile */
  union vec {
    typename Step::vec_t v;
    dst_t e[width];
  };
  __shared__ dst_t tile[Step::tiles * Step::elems];
  for (idx t0 = (idx)blockIdx.x * Step::tiles; t0 < Step::nrest;
       t0 += (idx)gridDim.x * Step::tiles) {
    for (idx j = threadIdx.x; j < Step::tiles * vecs; j += Step::block) {
      idx q = j / vecs, u = j % vecs;
      if (t0 + q >= Step::nrest)
        break;
      idx o0 = 0, o1 = 0, o2 = 0, at = 0, from = 0;
      Step::rest_offsets(t0 + q, o0, o1, o2);
      Step::tile_offsets(u, at, from, o2);
      vec x;
      x.v = *(const typename Step::vec_t *)(s0 + o1 + from);
      for (int e = 0; e < width; e++)
        tile[q * Step::elems + at + e * Step::cstride] = x.e[e];
    }
    __syncthreads();
    for (idx j = threadIdx.x; j < Step::tiles * vecs; j += Step::block) {
      idx q = j / vecs, u = j % vecs;
      if (t0 + q >= Step::nrest)
        break;
      idx o0 = 0, o1 = 0, o2 = 0;
      Step::rest_offsets(t0 + q, o0, o1, o2);
      vec y;
      for (int e = 0; e < width; e++)
        y.e[e] = tile[q * Step::elems + u * width + e];
      *(typename Step::vec_t *)(d + o0 + u * width) = y.v;
    }
    __syncthreads();
  }
}

#endif
