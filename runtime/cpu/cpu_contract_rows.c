/*
 * cpu_contract_rows.c - two LOOP contractions over long rows that the
 * general loops of cpu_loops.c run at a fraction of the memory's speed:
 *
 *   - outer products (`b i, b j -> b i j`, the first step of bilinear's
 *     plan): nothing summed, dst's fastest axis contiguous in one source
 *     (the row source) and absent from the other, which has a kept axis of
 *     its own. Each dst row is a scalar of one source times a row of the
 *     other, one vectorised pass; the general loops stage every row through
 *     two buffers and a multiply, and for rows of 64 that bookkeeping costs
 *     more than the 8 MB the step writes.
 *   - the sum of a[p, q] b[q, p] over a whole matrix (`i j, j i ->`): one
 *     result, so the general loops have no outer rows to share out and run
 *     it on one thread. Here the p range is split into strips shared out
 *     across the threads, each strip folded in TP x TQ blocks (TP = 64 values of b's rows, four
 *     cache lines, so b's strided rows are read in runs the prefetcher
 *     follows), and the strips' sums are added in a fixed order. On AVX2
 *     CPUs each 8x8 tile of b is transposed in registers and met with a's
 *     rows directly; elsewhere a block of b is copied transposed into a
 *     buffer and dotted with a's rows.
 *
 * Only native f32 and f64 steps whose accumulator is their own dtype come
 * here (the planner's choice, ein_acc); anything else returns false.
 */
#include "cpu_contract.h"

#include <stdlib.h>

#include "cpu_simd.h"
#include "loop_axes.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EIN_HAVE_AVX2_KERNELS 1
#include <immintrin.h>
#endif

/* TP x TQ: the block of the transposed dot (values of b's rows x a's). */
enum { TP = 64, TQ = 64 };

/* Bytes written below which an outer product stays on one thread, and
 * the work of a transposed dot below which it does (a parallel region
 * costs more than it gains there; as cpu_loops.c's copies). */
#define OUTER_SPLIT_BYTES (1 << 18)
#define DOT_SPLIT_WORK (1 << 16)

/* True for a LOOP step of two native f32 or f64 sources summed in their
 * own dtype. */
static bool native_product(const ein_step *s) {
  ein_dtype dt = s->dst_dtype;
  return s->kind == EIN_STEP_LOOP && s->nsrc == 2 &&
         s->op == EIN_REDUCE_SUM && (dt == EIN_DT_F32 || dt == EIN_DT_F64) &&
         s->src_dtype[0] == dt && s->src_dtype[1] == dt && s->acc_dtype == dt;
}

/* The kept and reduced axes of a native product with at least one
 * element; false for any other step. */
static bool product_axes(const ein_step *s, ein_loop_axes *kept,
                         ein_loop_axes *red) {
  bool empty;
  return native_product(s) && ein_loop_axes_split(s, kept, red, &empty) &&
         !empty;
}

/* ------------------------------------------------------ outer products */

typedef struct outer {
  ein_loop_axes rows; /* kept axes but the row axis; strides: dst, row
                         source, scalar source */
  int64_t n;          /* row length */
  int row_src;        /* 0 or 1: the source contiguous along the row */
  double alpha;
  ein_dtype dt; /* the step's data, set before the run */
  char *dst;
  const char *row, *sc;
} outer;

/* Reads step s as an outer product; false when it is not one. */
static bool outer_classify(const ein_step *s, outer *o) {
  ein_loop_axes kept, red;
  if (!product_axes(s, &kept, &red) || red.n != 0 || kept.n < 2) return false;
  int last = kept.n - 1;
  const int64_t *rs = kept.st[last];
  if (rs[0] != 1 || !((rs[1] == 1 && rs[2] == 0) || (rs[1] == 0 && rs[2] == 1)))
    return false;
  int r = rs[1] == 1 ? 1 : 2, sc = 3 - r;
  bool scalar_own = false; /* the scalar source has an axis of its own */
  for (int i = 0; i < last; i++)
    scalar_own |= kept.st[i][sc] != 0 && kept.st[i][r] == 0;
  if (!scalar_own) return false;
  *o = (outer){.n = kept.size[last], .row_src = r - 1, .alpha = s->alpha};
  o->rows.n = last;
  for (int i = 0; i < last; i++) {
    o->rows.size[i] = kept.size[i];
    o->rows.st[i][0] = kept.st[i][0];
    o->rows.st[i][1] = kept.st[i][r];
    o->rows.st[i][2] = kept.st[i][sc];
  }
  return true;
}

/* Rows lo..hi-1: dst row = scalar * row (times alpha where it is not 1). */
#define OUTER_RANGE(NAME, T)                                                 \
  static void NAME(const outer *o, T *dst, const T *row, const T *sc,        \
                   int64_t lo, int64_t hi) {                                 \
    ein_loop_cursor cur;                                                     \
    ein_loop_cursor_start(&o->rows, lo, &cur);                               \
    const T alpha = (T)o->alpha;                                             \
    for (int64_t e = lo; e < hi; e++) {                                      \
      T *restrict d = dst + cur.off[0];                                      \
      const T *restrict r = row + cur.off[1];                                \
      const T v = sc[cur.off[2]];                                            \
      if (o->alpha == 1)                                                     \
        for (int64_t j = 0; j < o->n; j++) d[j] = v * r[j];                  \
      else                                                                   \
        for (int64_t j = 0; j < o->n; j++) d[j] = v * r[j] * alpha;          \
      ein_loop_cursor_next(&o->rows, &cur);                                  \
    }                                                                        \
  }
OUTER_RANGE(outer_f32, float)
OUTER_RANGE(outer_f64, double)

static void outer_part(const void *job, int64_t lo, int64_t hi) {
  const outer *o = job;
  if (o->dt == EIN_DT_F64)
    outer_f64(o, (double *)o->dst, (const double *)o->row,
              (const double *)o->sc, lo, hi);
  else
    outer_f32(o, (float *)o->dst, (const float *)o->row, (const float *)o->sc,
              lo, hi);
}

bool ein_cpu_outer(const ein_step *s, char *dst, const char *src0,
                   const char *src1, int threads) {
  outer o;
  if (!outer_classify(s, &o)) return false;
  o.dt = s->dst_dtype;
  o.dst = dst;
  o.row = o.row_src ? src1 : src0;
  o.sc = o.row_src ? src0 : src1;
  int64_t nrows = ein_loop_axes_volume(&o.rows);
  double bytes = (double)nrows * (double)o.n *
                 (double)ein_dtype_size(s->dst_dtype);
  ein_cpu_split(threads, nrows, bytes > OUTER_SPLIT_BYTES, outer_part, &o);
  return true;
}

/* ----------------------------------------------------- transposed dots */

/* The matrix pair of a transposed dot: a[p sap + q], b[p + q sbq]. */
typedef struct tdot {
  int64_t np, nq, sap, sbq;
  double alpha;
} tdot;

/* Reads step s as a transposed dot; false when it is not one. */
static bool tdot_classify(const ein_step *s, tdot *t) {
  ein_loop_axes kept, red;
  if (!product_axes(s, &kept, &red) || kept.n != 0 || red.n != 2) return false;
  int q = red.st[1][1] == 1 ? 1 : 0, p = 1 - q;
  if (red.st[q][1] != 1 || red.st[p][2] != 1 || red.st[p][1] == 0 ||
      red.st[q][2] == 0 || red.size[p] < 8 || red.size[q] < 8)
    return false;
  *t = (tdot){red.size[p], red.size[q], red.st[p][1], red.st[q][2],
              s->alpha};
  return true;
}

/* The sum of one block, b copied transposed into a buffer (portable). */
#define TDOT_BLOCK(NAME, T)                                                  \
  static T NAME(const tdot *t, const T *a, const T *b, int64_t pn,           \
                int64_t qn) {                                                \
    T bt[TP * TQ], part[8] = {0};                                            \
    for (int64_t q = 0; q < qn; q++)                                         \
      for (int64_t k = 0; k < pn; k++) bt[k * TQ + q] = b[k + q * t->sbq];   \
    for (int64_t k = 0; k < pn; k++) {                                       \
      const T *restrict ak = a + k * t->sap, *restrict bk = bt + k * TQ;     \
      int64_t q = 0;                                                         \
      for (; q + 8 <= qn; q += 8)                                            \
        for (int l = 0; l < 8; l++) part[l] += ak[q + l] * bk[q + l];        \
      for (; q < qn; q++) part[0] += ak[q] * bk[q];                          \
    }                                                                        \
    T total = 0;                                                             \
    for (int l = 0; l < 8; l++) total += part[l];                            \
    return total;                                                            \
  }
TDOT_BLOCK(tdot_block_f32, float)
TDOT_BLOCK(tdot_block_f64, double)

#ifdef EIN_HAVE_AVX2_KERNELS
#define AVX2 __attribute__((target("avx2")))

/* Transposes the 8x8 tile r[0..7] in registers. */
static inline AVX2 void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

/* The sum of one f32 block: full 8x8 tiles in registers (b's 8 rows
 * along p transposed to 8 vectors along q, each met with a's row), the
 * edges of a block that is not a multiple of 8 through the portable sum. */
static AVX2 float tdot_block_avx2(const tdot *t, const float *a,
                                  const float *b, int64_t pn, int64_t qn) {
  int64_t p8 = pn & ~(int64_t)7, q8 = qn & ~(int64_t)7;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t p = 0; p < p8; p += 8)
    for (int64_t q = 0; q < q8; q += 8) {
      __m256 r[8];
      for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps(b + p + (q + k) * t->sbq);
      transpose8(r);
      for (int k = 0; k < 8; k += 2) {
        const float *ak = a + (p + k) * t->sap + q;
        acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(_mm256_loadu_ps(ak), r[k]));
        acc1 = _mm256_add_ps(
            acc1, _mm256_mul_ps(_mm256_loadu_ps(ak + t->sap), r[k + 1]));
      }
    }
  float lanes[8], total = 0;
  _mm256_storeu_ps(lanes, _mm256_add_ps(acc0, acc1));
  for (int l = 0; l < 8; l++) total += lanes[l];
  if (q8 < qn) /* the last columns of a, all rows */
    total += tdot_block_f32(t, a + q8, b + q8 * t->sbq, pn, qn - q8);
  if (p8 < pn) /* the last rows of a, the columns done above */
    total += tdot_block_f32(t, a + p8 * t->sap, b + p8, pn - p8, q8);
  return total;
}
#endif

/* The strip of rows plo..phi-1 of a, in TP x TQ blocks. */
#define TDOT_STRIP(NAME, T, BLOCK)                                           \
  static T NAME(const tdot *t, const T *a, const T *b, int64_t plo,          \
                int64_t phi) {                                               \
    T total = 0;                                                             \
    for (int64_t p0 = plo; p0 < phi; p0 += TP)                               \
      for (int64_t q0 = 0; q0 < t->nq; q0 += TQ) {                           \
        int64_t pn = phi - p0 < TP ? phi - p0 : TP;                          \
        int64_t qn = t->nq - q0 < TQ ? t->nq - q0 : TQ;                      \
        total += BLOCK(t, a + p0 * t->sap + q0, b + p0 + q0 * t->sbq, pn,    \
                       qn);                                                  \
      }                                                                      \
    return total;                                                            \
  }
TDOT_STRIP(tdot_strip_f32, float, tdot_block_f32)
TDOT_STRIP(tdot_strip_f64, double, tdot_block_f64)
#ifdef EIN_HAVE_AVX2_KERNELS
TDOT_STRIP(tdot_strip_avx2, float, tdot_block_avx2)
#endif

/* Strip `part` of `parts` (p ranges split at multiples of 8). */
static double tdot_part(const tdot *t, ein_dtype dt, const char *a,
                        const char *b, int part, int parts) {
  int64_t n8 = (t->np + 7) / 8;
  int64_t lo = n8 * part / parts * 8, hi = n8 * (part + 1) / parts * 8;
  if (hi > t->np) hi = t->np;
  if (dt == EIN_DT_F64)
    return tdot_strip_f64(t, (const double *)a, (const double *)b, lo, hi);
#ifdef EIN_HAVE_AVX2_KERNELS
  if (ein_cpu_avx2())
    return tdot_strip_avx2(t, (const float *)a, (const float *)b, lo, hi);
#endif
  return tdot_strip_f32(t, (const float *)a, (const float *)b, lo, hi);
}

bool ein_cpu_trace_dot(const ein_step *s, char *dst, const char *src0,
                       const char *src1, int threads) {
  tdot t;
  if (!tdot_classify(s, &t)) return false;
  /* Strips handed out a few per thread to whichever thread asks next (as
   * cpu_loops.c's chunks: on a loaded machine a descheduled thread then
   * holds up one strip, not half the matrix); each strip's sum has its
   * own slot, added in order, so the result does not depend on which
   * thread took which strip. */
  enum { MAX_PARTS = 64 };
  double sums[MAX_PARTS];
  int parts = 1;
#ifdef _OPENMP
  if (threads > 1 && (double)t.np * (double)t.nq >= DOT_SPLIT_WORK) {
    parts = 4 * threads < MAX_PARTS ? 4 * threads : MAX_PARTS;
    /* (no if(parts > 1) clause: libgomp sets up a team of one for it) */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int p = 0; p < parts; p++)
      sums[p] = tdot_part(&t, s->dst_dtype, src0, src1, p, parts);
  }
#else
  (void)threads;
#endif
  if (parts == 1) sums[0] = tdot_part(&t, s->dst_dtype, src0, src1, 0, 1);
  if (s->dst_dtype == EIN_DT_F64) {
    double total = 0;
    for (int p = 0; p < parts; p++) total += sums[p];
    *(double *)dst = total * s->alpha;
  } else {
    float total = 0;
    for (int p = 0; p < parts; p++) total += (float)sums[p];
    *(float *)dst = total * (float)s->alpha;
  }
  return true;
}
