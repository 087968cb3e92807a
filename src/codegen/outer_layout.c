/*
 * outer_layout.c - reduce_outer's lane axis, outputs per warp row and
 * staged source (outer_layout.h).
 *
 * Each candidate layout is judged by the requests of a warp's first step,
 * rebuilt from the strides: its lanes are `per_block` consecutive outputs
 * (the candidate axis innermost) times 32 / per_block consecutive terms;
 * for each operand, the distinct 32-byte sectors the lanes' elements touch
 * (the operand taken as sector-aligned) against the fewest its distinct
 * bytes fit. Per group of outputs the sources are loaded once per term
 * row and dst stored once; the candidate with the lowest sectors over
 * ideal wins, dst's own order on ties.
 */
#include "outer_layout.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct request {
  double sectors, ideal;
} request;

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Distinct values of v[0..n), sorted in place. */
static int distinct(int64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_i64);
  int d = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || v[i] != v[d - 1])
      v[d++] = v[i];
  return d;
}

/* Offset of operand k at flat index i over axes la, last axis fastest. */
static int64_t offset(const ein_loop_axes *la, int64_t i, int k) {
  int64_t off = 0;
  for (int a = la->n - 1; a >= 0; a--) {
    off += i % la->size[a] * la->st[a][k];
    i /= la->size[a];
  }
  return off;
}

/* The request of operand k (0: dst, stored by the outputs only) by a warp
 * of `per` outputs x 32 / per terms. */
static request warp_request(const ein_loop_axes *kept,
                            const ein_loop_axes *red, int k, int per,
                            int esize) {
  int64_t el[32], sec[32];
  int n = 0, terms = k == 0 ? 1 : 32 / per; /* the warp's rows */
  int64_t nout = ein_loop_axes_volume(kept), nred = ein_loop_axes_volume(red);
  for (int t = 0; t < terms && t < nred; t++)
    for (int o = 0; o < per && o < nout; o++)
      el[n++] = offset(kept, o, k) + offset(red, t, k);
  int d = distinct(el, n);
  for (int i = 0; i < d; i++)
    sec[i] = el[i] * esize / 32;
  return (request){distinct(sec, d), (double)((d * esize + 31) / 32)};
}

/* The extent of source k (1 + the largest offset), or -1 when a stride is
 * negative. */
static int64_t extent(const ein_loop_axes *kept, const ein_loop_axes *red,
                      int k) {
  int64_t e = 1;
  const ein_loop_axes *sets[2] = {kept, red};
  for (int s = 0; s < 2; s++)
    for (int a = 0; a < sets[s]->n; a++) {
      if (sets[s]->st[a][k] < 0)
        return -1;
      e += (sets[s]->size[a] - 1) * sets[s]->st[a][k];
    }
  return e;
}

/* kept with axis a moved innermost. */
static ein_loop_axes moved(const ein_loop_axes *kept, int a) {
  ein_loop_axes m = *kept;
  int64_t size, st[3];
  ein_loop_axes_take(&m, a, &size, st);
  m.size[m.n] = size;
  for (int j = 0; j < 3; j++)
    m.st[m.n][j] = st[j];
  m.n++;
  return m;
}

/* Sectors over ideal of a layout per group of `per` outputs; *stage gets
 * the small source it stages (a wasteful one; 0 none). */
static double judge(const ein_loop_axes *kept, const ein_loop_axes *red,
                    int nsrc, const int esize[3], int per, const int64_t *ext,
                    int *stage) {
  request d = warp_request(kept, red, 0, per, esize[0]);
  double sec = d.sectors, ideal = d.ideal;
  /* load requests per group of outputs: a warp row of 32 / per term
   * rows for every 32 / per terms */
  double rows = (double)ein_loop_axes_volume(red) * per / 32;
  *stage = 0;
  for (int k = 1; k <= nsrc; k++) {
    request r = warp_request(kept, red, k, per, esize[k]);
    bool small = nsrc == 2 && ext[k] > 0 &&
                 ext[k] * esize[k] <= EIN_OUTER_STAGE_BYTES;
    if (small && !*stage && r.sectors > r.ideal) {
      *stage = k; /* read in shared memory: no global requests per term */
      continue;
    }
    sec += rows * r.sectors;
    ideal += rows * r.ideal;
  }
  return ideal > 0 ? sec / ideal : 1;
}

ein_outer_layout ein_outer_layout_choose(const ein_loop_axes *kept,
                                         const ein_loop_axes *red, int nsrc,
                                         const int esize[3]) {
  ein_outer_layout o = {.lane_axis = kept->n - 1, .per_block = 32};
  if (kept->n == 0 || red->n == 0)
    return o;
  int64_t ext[3] = {0, extent(kept, red, 1), nsrc == 2 ? extent(kept, red, 2)
                                                       : 0};
  double best = 0;
  for (int a = kept->n - 1; a >= 0; a--)
    for (int per = 32; per >= 16; per /= 2) {
      ein_loop_axes m = moved(kept, a);
      int stage;
      double r = judge(&m, red, nsrc, esize, per, ext, &stage);
      /* another layout only when clearly better */
      if (a == kept->n - 1 && per == 32 ? (best = r, true) : r < best / 1.1) {
        best = r;
        o.lane_axis = a;
        o.per_block = per;
        o.stage = stage;
        o.stage_n = stage ? ext[stage] : 0;
      }
    }
  return o;
}
