/*
 * cpu_contract.c - LOOP contractions of many tiny matrices (batched 3x3
 * compositions, small per-batch dot products): one pass over memory with
 * the matrix sizes known to the compiler; and ein_cpu_contract, which
 * offers a LOOP step to each of the contraction kernels in turn.
 *
 * The planner turns a contraction whose matrices are below
 * caps.gemm_min_call_flops into a LOOP step (one BLAS call per batch
 * element costs more than the work). The general loops of cpu_loops.c run
 * such a step as rows along the output's fastest axis, which for rows of
 * three elements is mostly bookkeeping. This kernel takes the step's axes
 * as a batched GEMM instead: batch axes (in both sources and dst), one M
 * axis (src0 and dst), one N axis (src1 and dst) and one reduced K axis,
 * each at most EIN_CPU_TINY long, and computes every batch element's
 * m x n results as k-term sums with k a compile-time constant for the
 * common sizes, so each sum is a straight run of multiply-adds. Where the
 * rows of B and C are contiguous and at most 4 long (3x3 compositions),
 * a whole row of C is one short vector, sum over p of a[i, p] B[p, :]: a
 * few vector multiply-adds per row instead of n k scalar ones (GCC's
 * vector extension, so the baseline SSE2 build uses it on every x86 CPU).
 * A batch of contiguous dot products of any length (`b i, b i -> b`,
 * m = n = 1) comes here too and is summed in vector lanes. Only
 * native f32 and f64 steps come here; anything else returns false and
 * takes the general loops.
 */
#include "cpu_contract.h"

#include <stdlib.h>

#include "loop_axes.h"

/* A step as a batch of tiny GEMMs: C[m, n] = alpha * A[m, k] B[k, n]. */
typedef struct tiny {
  ein_loop_axes batch; /* strides: dst, src0, src1 */
  int64_t m, n, k;
  int64_t cm, cn, am, ak, bk, bn;
  double alpha;
  ein_dtype dt; /* the step's data, set before the run */
  char *c;
  const char *a, *b;
} tiny;

/* Work (multiply-adds) below which one thread does the whole step;
 * the most elements one tiny matrix may span in its source (a batch of
 * matrices scattered wider, as the 8 values 4 MiB apart of each of
 * `b j i, b j i -> i j`'s 1x1x8 "GEMMs", reads a line per value: 103 ms
 * where the general loops' tiles take 5). */
enum { TINY_SPLIT_WORK = 1 << 15, TINY_SPAN = 4096 };

/* Places kept axis i of `kept` as a batch, M or N axis of t; false when
 * it is a second M or N axis or in neither source (a repeat). */
static bool place_kept(const ein_loop_axes *kept, int i, tiny *t,
                       bool *has_m, bool *has_n) {
  const int64_t *st = kept->st[i];
  int64_t size = kept->size[i];
  if (st[1] && st[2]) {
    ein_loop_axes *b = &t->batch;
    b->size[b->n] = size;
    for (int k = 0; k < 3; k++) b->st[b->n][k] = st[k];
    b->n++;
    return true;
  }
  if (st[1] && !*has_m) {
    *has_m = true;
    t->m = size, t->cm = st[0], t->am = st[1];
    return true;
  }
  if (st[2] && !*has_n) {
    *has_n = true;
    t->n = size, t->cn = st[0], t->bn = st[2];
    return true;
  }
  return false;
}

/* Reads step s as a batch of tiny GEMMs; false when it is not one. */
static bool classify(const ein_step *s, tiny *t) {
  ein_dtype dt = s->dst_dtype;
  if (s->kind != EIN_STEP_LOOP || s->nsrc != 2 || s->op != EIN_REDUCE_SUM ||
      (dt != EIN_DT_F32 && dt != EIN_DT_F64) || s->src_dtype[0] != dt ||
      s->src_dtype[1] != dt || s->acc_dtype != dt)
    return false;
  ein_loop_axes kept, red;
  bool empty;
  if (!ein_loop_axes_split(s, &kept, &red, &empty) || empty || red.n != 1)
    return false;
  *t = (tiny){.m = 1, .n = 1, .alpha = s->alpha};
  t->k = red.size[0], t->ak = red.st[0][1], t->bk = red.st[0][2];
  if (!t->ak || !t->bk) return false;
  bool has_m = false, has_n = false;
  for (int i = 0; i < kept.n; i++)
    if (!place_kept(&kept, i, t, &has_m, &has_n)) return false;
  bool dots = t->m == 1 && t->n == 1 && t->ak == 1 && t->bk == 1;
  int64_t span_a = llabs(t->ak) * (t->k - 1) + llabs(t->am) * (t->m - 1);
  int64_t span_b = llabs(t->bk) * (t->k - 1) + llabs(t->bn) * (t->n - 1);
  return t->m <= EIN_CPU_TINY && t->n <= EIN_CPU_TINY &&
         (dots || (t->k <= EIN_CPU_TINY && span_a <= TINY_SPAN &&
                   span_b <= TINY_SPAN));
}

#ifdef _OPENMP
#define SIMD_SUM(acc) _Pragma("omp simd reduction(+ : acc)")
#else
#define SIMD_SUM(acc)
#endif

/* Batch elements lo..hi-1 of a batch of contiguous dot products (`b i,
 * b i -> b`): one vectorised sum per element, partial sums in lanes. */
#define DOT_RANGE(NAME, T)                                                   \
  static void NAME(const tiny *t, T *c, const T *a, const T *b, int64_t lo,  \
                   int64_t hi) {                                             \
    ein_loop_cursor cur;                                                     \
    ein_loop_cursor_start(&t->batch, lo, &cur);                              \
    for (int64_t e = lo; e < hi; e++) {                                      \
      const T *ae = a + cur.off[1], *be = b + cur.off[2];                    \
      T acc = 0;                                                             \
      SIMD_SUM(acc)                                                          \
      for (int64_t p = 0; p < t->k; p++) acc += ae[p] * be[p];               \
      c[cur.off[0]] = (T)t->alpha * acc;                                     \
      ein_loop_cursor_next(&t->batch, &cur);                                 \
    }                                                                        \
  }
DOT_RANGE(dots_f32, float)
DOT_RANGE(dots_f64, double)

/* Fewer contiguous dot products than threads, each long (`i j, i j ->`,
 * one dot of 4M values, ran on one core): each is cut into DOT_PARTS
 * pieces summed in parallel, then the pieces' sums added in order (the
 * same order on every run, whatever the threads). */
enum { DOT_PARTS = 16, DOT_SPLIT_MIN = 1 << 16 };

#ifdef _OPENMP
#define PARALLEL_PARTS(threads)                                              \
  _Pragma("omp parallel for num_threads(threads) schedule(static)")
#else
#define PARALLEL_PARTS(threads)
#endif

#define DOT_SPLIT(NAME, T)                                                   \
  static void NAME(const tiny *t, T *c, const T *a, const T *b,              \
                   int threads) {                                            \
    int64_t nb = ein_loop_axes_volume(&t->batch);                            \
    ein_loop_cursor cur;                                                     \
    ein_loop_cursor_start(&t->batch, 0, &cur);                               \
    (void)threads; /* no OpenMP: the pieces run in turn */                   \
    for (int64_t e = 0; e < nb; e++) {                                       \
      const T *ae = a + cur.off[1], *be = b + cur.off[2];                    \
      T part[DOT_PARTS];                                                     \
      PARALLEL_PARTS(threads)                                                \
      for (int p = 0; p < DOT_PARTS; p++) {                                  \
        int64_t lo = t->k * p / DOT_PARTS, hi = t->k * (p + 1) / DOT_PARTS;  \
        T acc = 0;                                                           \
        SIMD_SUM(acc)                                                        \
        for (int64_t q = lo; q < hi; q++) acc += ae[q] * be[q];              \
        part[p] = acc;                                                       \
      }                                                                      \
      T total = 0;                                                           \
      for (int p = 0; p < DOT_PARTS; p++) total += part[p];                  \
      c[cur.off[0]] = (T)t->alpha * total;                                   \
      ein_loop_cursor_next(&t->batch, &cur);                                 \
    }                                                                        \
  }
DOT_SPLIT(split_dots_f32, float)
DOT_SPLIT(split_dots_f64, double)

/* The batch elements lo..hi-1 of t; K is a constant where the caller's
 * switch made it one, so the sums unroll. */
#define TINY_RANGE(NAME, T)                                                  \
  static inline __attribute__((always_inline)) void NAME(                    \
      const tiny *t, T *c, const T *a, const T *b, int64_t lo, int64_t hi,   \
      const int64_t K) {                                                     \
    ein_loop_cursor cur;                                                     \
    ein_loop_cursor_start(&t->batch, lo, &cur);                              \
    const T alpha = (T)t->alpha;                                             \
    for (int64_t e = lo; e < hi; e++) {                                      \
      T *ce = c + cur.off[0];                                                \
      const T *ae = a + cur.off[1], *be = b + cur.off[2];                    \
      for (int64_t i = 0; i < t->m; i++)                                     \
        for (int64_t j = 0; j < t->n; j++) {                                 \
          const T *ai = ae + i * t->am, *bj = be + j * t->bn;                \
          T acc = 0;                                                         \
          for (int64_t p = 0; p < K; p++) acc += ai[p * t->ak] * bj[p * t->bk]; \
          ce[i * t->cm + j * t->cn] = alpha * acc;                           \
        }                                                                    \
      ein_loop_cursor_next(&t->batch, &cur);                                 \
    }                                                                        \
  }

/* One function per element type: k = 1..4, 8 and 16 become constants. */
#define TINY_RUN(NAME, RANGE, T)                                             \
  static void NAME(const tiny *t, T *c, const T *a, const T *b, int64_t lo,  \
                   int64_t hi) {                                             \
    switch (t->k) {                                                          \
    case 1: RANGE(t, c, a, b, lo, hi, 1); return;                            \
    case 2: RANGE(t, c, a, b, lo, hi, 2); return;                            \
    case 3: RANGE(t, c, a, b, lo, hi, 3); return;                            \
    case 4: RANGE(t, c, a, b, lo, hi, 4); return;                            \
    case 8: RANGE(t, c, a, b, lo, hi, 8); return;                            \
    case 16: RANGE(t, c, a, b, lo, hi, 16); return;                          \
    default: RANGE(t, c, a, b, lo, hi, t->k); return;                        \
    }                                                                        \
  }

#if defined(__GNUC__) || defined(__clang__)
#define EIN_VECTOR_ROWS 1
typedef float v4f __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));

/* The batch elements lo..hi-1 of t when B's and C's rows are contiguous
 * (bn = cn = 1) and N <= 4 long: each row of C is one vector, sum over p
 * of a[i, p] B[p, :], with B's K rows loaded once per element. Loads and
 * stores move exactly N elements, lane by lane with N a constant (no
 * memcpy through the stack, whose 12-byte stores a 16-byte load cannot
 * forward from), so nothing past an operand is read and nothing beside a
 * row is written. The sizes
 * and strides are copied to locals (stores through c could otherwise
 * alias t), and a single batch axis steps by its strides, not a cursor. */
#define VROW_RANGE(NAME, T, V)                                               \
  static inline __attribute__((always_inline)) void NAME(                    \
      const tiny *t, T *c, const T *a, const T *b, int64_t lo, int64_t hi,   \
      const int64_t N, const int64_t K) {                                    \
    const int64_t m = t->m, am = t->am, ak = t->ak, bk = t->bk, cm = t->cm;  \
    const bool one = t->batch.n == 1;                                        \
    const int64_t s0 = t->batch.st[0][0], s1 = t->batch.st[0][1],            \
                  s2 = t->batch.st[0][2];                                    \
    ein_loop_cursor cur;                                                     \
    ein_loop_cursor_start(&t->batch, lo, &cur);                              \
    int64_t o0 = cur.off[0], o1 = cur.off[1], o2 = cur.off[2];               \
    const T alpha = (T)t->alpha;                                             \
    V brow[EIN_CPU_TINY];                                                    \
    for (int64_t e = lo; e < hi; e++) {                                      \
      for (int64_t p = 0; p < K; p++) {                                      \
        const T *bp = b + o2 + p * bk;                                       \
        brow[p] = (V){0};                                                    \
        for (int64_t j = 0; j < N; j++) brow[p][j] = bp[j];                  \
      }                                                                      \
      for (int64_t i = 0; i < m; i++) {                                      \
        const T *ai = a + o1 + i * am;                                       \
        V acc = ai[0] * brow[0];                                             \
        for (int64_t p = 1; p < K; p++) acc += ai[p * ak] * brow[p];         \
        acc *= alpha;                                                        \
        T *ci = c + o0 + i * cm;                                             \
        for (int64_t j = 0; j < N; j++) ci[j] = acc[j];                      \
      }                                                                      \
      if (one) {                                                             \
        o0 += s0, o1 += s1, o2 += s2;                                        \
      } else {                                                               \
        ein_loop_cursor_next(&t->batch, &cur);                               \
        o0 = cur.off[0], o1 = cur.off[1], o2 = cur.off[2];                   \
      }                                                                      \
    }                                                                        \
  }
VROW_RANGE(vrows_f32, float, v4f)
VROW_RANGE(vrows_f64, double, v4d)

/* One function per element type: N = 2..4 and K = 1..4 as constants. */
#define VROW_K(RANGE, N)                                                     \
  switch (t->k) {                                                            \
  case 1: RANGE(t, c, a, b, lo, hi, N, 1); return;                           \
  case 2: RANGE(t, c, a, b, lo, hi, N, 2); return;                           \
  case 3: RANGE(t, c, a, b, lo, hi, N, 3); return;                           \
  case 4: RANGE(t, c, a, b, lo, hi, N, 4); return;                           \
  default: RANGE(t, c, a, b, lo, hi, N, t->k); return;                       \
  }
#define VROW_RUN(NAME, RANGE, T)                                             \
  static void NAME(const tiny *t, T *c, const T *a, const T *b, int64_t lo,  \
                   int64_t hi) {                                             \
    if (t->n == 2) VROW_K(RANGE, 2)                                          \
    if (t->n == 3) VROW_K(RANGE, 3)                                          \
    VROW_K(RANGE, 4)                                                         \
  }
VROW_RUN(vrun_f32, vrows_f32, float)
VROW_RUN(vrun_f64, vrows_f64, double)
#endif

/* True when the vector-row kernel takes t: rows of B and C contiguous,
 * 2 to 4 long. */
static bool vector_rows(const tiny *t) {
#ifdef EIN_VECTOR_ROWS
  return t->bn == 1 && t->cn == 1 && t->n >= 2 && t->n <= 4 &&
         t->k <= EIN_CPU_TINY;
#else
  (void)t;
  return false;
#endif
}

TINY_RANGE(range_f32, float)
TINY_RANGE(range_f64, double)
TINY_RUN(run_f32, range_f32, float)
TINY_RUN(run_f64, range_f64, double)

static void run_part(const void *job, int64_t lo, int64_t hi) {
  const tiny *t = job;
  const char *a = t->a, *b = t->b;
  char *c = t->c;
  bool dots = t->k > EIN_CPU_TINY, f64 = t->dt == EIN_DT_F64;
#ifdef EIN_VECTOR_ROWS
  if (vector_rows(t)) {
    if (f64)
      vrun_f64(t, (double *)c, (const double *)a, (const double *)b, lo, hi);
    else
      vrun_f32(t, (float *)c, (const float *)a, (const float *)b, lo, hi);
    return;
  }
#endif
  if (f64)
    (dots ? dots_f64 : run_f64)(t, (double *)c, (const double *)a,
                                (const double *)b, lo, hi);
  else
    (dots ? dots_f32 : run_f32)(t, (float *)c, (const float *)a,
                                (const float *)b, lo, hi);
}

bool ein_cpu_tiny_contract(const ein_step *s, char *dst, const char *src0,
                           const char *src1, int threads) {
  tiny t;
  if (!classify(s, &t)) return false;
  int64_t nb = ein_loop_axes_volume(&t.batch);
  double work = (double)nb * (double)(t.m * t.n * t.k);
  t.dt = s->dst_dtype;
  t.c = dst;
  t.a = src0;
  t.b = src1;
  bool dots = t.m == 1 && t.n == 1 && t.k > EIN_CPU_TINY;
  if (dots && threads > 1 && nb < threads && t.k >= DOT_SPLIT_MIN) {
    if (t.dt == EIN_DT_F64)
      split_dots_f64(&t, (double *)dst, (const double *)src0,
                     (const double *)src1, threads);
    else
      split_dots_f32(&t, (float *)dst, (const float *)src0,
                     (const float *)src1, threads);
    return true;
  }
  ein_cpu_split(threads, nb, work >= TINY_SPLIT_WORK, run_part, &t);
  return true;
}

bool ein_cpu_contract(const ein_step *s, char *dst, const char *src0,
                      const char *src1, int threads) {
  return ein_cpu_tiny_contract(s, dst, src0, src1, threads) ||
         ein_cpu_outer(s, dst, src0, src1, threads) ||
         ein_cpu_trace_dot(s, dst, src0, src1, threads);
}
