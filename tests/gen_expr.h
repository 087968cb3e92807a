/*
 * gen_expr.h - the random expression generator of the evaluation tests
 * (test_eval_random) and the CUDA plan checks (test_cuda_plan): 1 to 5
 * operands, named axes in random orders, splits on inputs and merges on
 * the output, diagonals, an ellipsis with broadcasting, repeats, every
 * reduction, every dtype, odd and size-0 axes, the numpy dialect.
 *
 * gen_seed(seed) then generate(&c) gives the same case for the same seed;
 * the caller may draw more numbers (rnd_int) for its tensors afterwards.
 * Everything is static: one copy per test program.
 */
#ifndef EIN_TEST_GEN_EXPR_H
#define EIN_TEST_GEN_EXPR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ein.h"
#include "test_limits.h"
#include "dtype.h"

static uint64_t rng_state;

static inline uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static inline int rnd_int(int n) { return (int)(rnd() % (uint64_t)n); }
static inline double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

static inline void gen_seed(uint64_t seed) {
  rng_state = seed * 2654435761u + 88172645463325252ull;
}

typedef struct gen_case {
  char expr[512];
  char desc[1024];
  int n;
  int ndims[TEST_MAX_OPERANDS];
  int64_t shapes[TEST_MAX_OPERANDS][EIN_MAX_DIMS];
  ein_options opt;
  ein_length len[4];
  ein_dtype dt;
} gen_case;

static const char *names[] = {"a", "b", "c", "d", "e", "f"};

/* Appends "name" or "(x y)" items for a list of axes, grouping adjacent
 * axes at random; dims[] receives each item's size. */
static inline int emit_axes(char *buf, size_t cap, const int *ax, int n,
                     const int64_t *size, int64_t *dims, bool group,
                     bool numpy) {
  int nd = 0;
  size_t w = strlen(buf);
  for (int i = 0; i < n;) {
    int take = group && !numpy && i + 1 < n && rnd_int(4) == 0 ? 2 : 1;
    if (take == 2) {
      w += (size_t)snprintf(buf + w, cap - w, "(%s %s) ", names[ax[i]],
                            names[ax[i + 1]]);
      dims[nd++] = size[ax[i]] * size[ax[i + 1]];
    } else {
      w += (size_t)snprintf(buf + w, cap - w, numpy ? "%s" : "%s ",
                            names[ax[i]]);
      dims[nd++] = size[ax[i]];
    }
    i += take;
  }
  return nd;
}

static inline void shuffle(int *v, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = rnd_int(i + 1), t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

/* Large cases: axes up to 700 long with at most 2^21 index combinations,
 * so the threaded paths of the backends (split reductions, tiled copies,
 * rows longer than one chunk) run too; the small ones never reach them. */
static bool large_cases;

static inline void generate(gen_case *c) {
  memset(c, 0, sizeof *c);
  bool numpy = rnd_int(5) == 0;
  int naxes = 1 + rnd_int(5);
  int64_t size[6];
  static const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 2, 3, 6, 8};
  static const int64_t large_sizes[] = {2, 3, 17, 64, 100, 257, 513, 700};
  for (int a = 0; a < naxes; a++)
    size[a] = large_cases ? large_sizes[rnd_int(8)] : sizes[rnd_int(10)];
  if (large_cases) { /* keep the reference's sum affordable */
    int64_t volume = 1;
    for (int a = 0; a < naxes; a++) volume *= size[a];
    while (volume > (1 << 21)) {
      int big = 0;
      for (int a = 1; a < naxes; a++)
        if (size[a] > size[big]) big = a;
      volume = volume / size[big] * (size[big] / 2);
      size[big] /= 2;
    }
  }
  if (rnd_int(40) == 0) size[rnd_int(naxes)] = 0;
  static const ein_dtype dts[] = {EIN_DT_F32, EIN_DT_F64, EIN_DT_F32,
                                  EIN_DT_F64, EIN_DT_F16, EIN_DT_BF16,
                                  EIN_DT_I32, EIN_DT_I64, EIN_DT_I8,
                                  EIN_DT_U8, EIN_DT_BOOL};
  c->dt = dts[rnd_int(11)];
  if (c->dt == EIN_DT_BOOL) numpy = false; /* numpy sums; bool cannot */
  ein_reduction r = EIN_REDUCE_SUM;
  c->n = 1 + rnd_int(4);
  if (rnd_int(3) == 0) c->n = 1;
  if (c->dt == EIN_DT_BOOL) c->n = 1;
  if (c->n == 1) {
    static const ein_reduction rs[] = {EIN_REDUCE_SUM, EIN_REDUCE_MEAN,
                                       EIN_REDUCE_MAX, EIN_REDUCE_MIN,
                                       EIN_REDUCE_PROD, EIN_REDUCE_ANY,
                                       EIN_REDUCE_ALL};
    r = rs[rnd_int(7)];
    if (c->dt == EIN_DT_BOOL && (r == EIN_REDUCE_SUM || r == EIN_REDUCE_MEAN ||
                                 r == EIN_REDUCE_PROD))
      r = EIN_REDUCE_ANY;
    if (!ein_dtype_is_float(c->dt) && r == EIN_REDUCE_MEAN) r = EIN_REDUCE_SUM;
  }
  if (numpy) r = EIN_REDUCE_SUM;
  c->opt.reduction = r;
  c->opt.dialect = numpy ? EIN_DIALECT_NUMPY : EIN_DIALECT_EINOPS;

  /* The ellipsis: 0-2 dims; each operand may broadcast some of them. */
  bool ell = rnd_int(4) == 0;
  int nell = ell ? rnd_int(3) : 0;
  int64_t ellsz[2] = {2 + rnd_int(3), 1 + rnd_int(3)};

  bool used[6] = {false};
  for (int i = 0; i < c->n; i++) {
    int ax[8], n = 0;
    for (int a = 0; a < naxes; a++)
      if (rnd_int(3) != 0) ax[n++] = a;
    if (n == 0 && naxes) ax[n++] = rnd_int(naxes);
    shuffle(ax, n);
    if (rnd_int(8) == 0 && n > 0 && n < 7) ax[n++] = ax[0]; /* diagonal */
    for (int k = 0; k < n; k++) used[ax[k]] = true;
    char op[128] = "";
    int nd = 0;
    if (ell) {
      strcat(op, numpy ? "..." : "... ");
      for (int e = 0; e < nell; e++)
        c->shapes[i][nd++] = rnd_int(4) == 0 ? 1 : ellsz[e];
    }
    int64_t dims[16];
    int k = emit_axes(op, sizeof op, ax, n, size, dims, true, numpy);
    if (ell && rnd_int(2) == 0) { /* fewer ellipsis dims: broadcast */
      int drop = rnd_int(nell + 1);
      memmove(c->shapes[i], c->shapes[i] + drop,
              sizeof(int64_t) * (size_t)(nd - drop));
      nd -= drop;
    }
    for (int j = 0; j < k; j++) c->shapes[i][nd++] = dims[j];
    c->ndims[i] = nd;
    if (numpy)
      for (int j = 0; j < nd; j++)
        if (rnd_int(12) == 0 && j >= nd - k) c->shapes[i][j] = 1;
    size_t w = strlen(c->expr);
    snprintf(c->expr + w, sizeof c->expr - w, "%s%s", i ? ", " : "", op);
  }
  /* Output: a random subset of the used axes, maybe a repeat. */
  int out[8], no = 0;
  for (int a = 0; a < naxes; a++)
    if (used[a] && rnd_int(5) < 3) out[no++] = a;
  shuffle(out, no);
  strcat(c->expr, " -> ");
  if (ell && (numpy || rnd_int(4) != 0)) strcat(c->expr, numpy ? "..." : "... ");
  int64_t dummy[16];
  char outs[128] = "";
  emit_axes(outs, sizeof outs, out, no, size, dummy, true, numpy);
  strcat(c->expr, outs);
  if (!numpy && rnd_int(6) == 0 && naxes < 6) {
    int64_t rs = 1 + rnd_int(3);
    strcat(c->expr, "f"); /* axis 5 is unused: a repeat */
    c->len[0].name = "f";
    c->len[0].size = rs;
    c->opt.lengths = c->len;
    c->opt.nlengths = 1;
  }
  /* Splits in inputs need lengths when both factors are unknown: bind
   * every axis length explicitly half the time so both paths run. */
  if (!numpy && rnd_int(2) == 0) {
    static const char *nm[6] = {"a", "b", "c", "d", "e", "f"};
    for (int a = 0; a < naxes && c->opt.nlengths < 4; a++)
      if (used[a]) {
        c->len[c->opt.nlengths].name = nm[a];
        c->len[c->opt.nlengths++].size = size[a];
      }
    c->opt.lengths = c->len;
  }
  size_t w = (size_t)snprintf(c->desc, sizeof c->desc, "'%s' %s %s [",
                              c->expr, ein_dtype_name(c->dt),
                              ein_reduction_name(r));
  for (int i = 0; i < c->n; i++) {
    for (int d = 0; d < c->ndims[i]; d++)
      w += (size_t)snprintf(c->desc + w, sizeof c->desc - w, "%s%lld",
                            d ? "x" : "", (long long)c->shapes[i][d]);
    w += (size_t)snprintf(c->desc + w, sizeof c->desc - w, "%s",
                          i + 1 < c->n ? " " : "]");
  }
  for (int l = 0; l < c->opt.nlengths; l++)
    w += (size_t)snprintf(c->desc + w, sizeof c->desc - w, " %s=%lld",
                          c->len[l].name, (long long)c->len[l].size);
}

#endif
