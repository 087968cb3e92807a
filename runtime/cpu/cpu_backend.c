/*
 * cpu_backend.c - runs plans on the host: GEMM steps through CBLAS
 * (OpenBLAS) for f32, f64, c64 and c128 (sgemm, dgemm, cgemm, zgemm),
 * bf16/f16 ones where the planner kept them half through oneDNN
 * (cpu_dnnl.c),
 * LOOP contractions of tiny matrices, outer products and transposed dots
 * through cpu_contract.c and cpu_contract_rows.c, other LOOP
 * and FILL steps through cpu_loops.c.
 * Without a CBLAS at build time, GEMMs fall back to a blocked C loop so
 * that einc still builds and computes the same results everywhere.
 *
 * The backend keeps a few workspaces for temporaries, grown as plans need
 * them: a run takes one for itself and gives it back, so threads sharing a
 * context run at once without allocating in the steady state.
 */
#include <complex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "cpu_contract.h"
#include "cpu_dnnl.h"
#include "cpu_loops.h"
#include "cpu_map.h"
#include "cpu_threads.h"
#include "cpu_rates.h"

#ifdef EIN_HAVE_CBLAS
#include <cblas.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct workspace {
  char *data;
  int64_t bytes;
} workspace;

/* Idle workspaces kept for reuse; a run finding none allocates its own,
 * and a workspace given back to a full pool is freed. */
enum { WORKSPACE_POOL = 16 };

typedef struct cpu_backend {
  ein_backend base;
  pthread_mutex_t lock; /* guards the pool */
  workspace pool[WORKSPACE_POOL];
  int npool;
  int threads;
} cpu_backend;

/* Returns a workspace to the pool (or frees it when the pool is full). */
static void workspace_give(cpu_backend *cb, workspace w) {
  if (!w.data) return;
  pthread_mutex_lock(&cb->lock);
  bool kept = cb->npool < WORKSPACE_POOL;
  if (kept) cb->pool[cb->npool++] = w;
  pthread_mutex_unlock(&cb->lock);
  if (!kept) ein_free(w.data);
}

/* Takes an idle workspace of at least `bytes` (growing one if none is big
 * enough); false when the allocation fails. */
static bool workspace_take(cpu_backend *cb, int64_t bytes, workspace *out) {
  *out = (workspace){NULL, 0};
  if (bytes <= 0) return true;
  pthread_mutex_lock(&cb->lock);
  int pick = -1;
  for (int i = 0; i < cb->npool; i++)
    if (pick < 0 || (cb->pool[pick].bytes < bytes &&
                     cb->pool[i].bytes > cb->pool[pick].bytes))
      pick = i;
  if (pick >= 0) {
    *out = cb->pool[pick];
    cb->pool[pick] = cb->pool[--cb->npool];
  }
  pthread_mutex_unlock(&cb->lock);
  if (out->bytes >= bytes) return true;
  char *w = ein_malloc((size_t)bytes);
  if (!w) {
    if (out->data) workspace_give(cb, *out);
    *out = (workspace){NULL, 0};
    return false;
  }
  ein_free(out->data);
  *out = (workspace){w, bytes};
  return true;
}

#ifndef EIN_HAVE_CBLAS
/* Portable fallback: i-k-j order so the innermost loop streams B and C. */
#define FALLBACK_GEMM(NAME, T)                                               \
  static void NAME(const ein_gemm_call *g, T alpha, const T *a, const T *b,  \
                   T *c) {                                                   \
    for (int64_t i = 0; i < g->m; i++) {                                     \
      T *crow = c + i * g->ldc;                                              \
      for (int64_t j = 0; j < g->n; j++) crow[j] = 0;                        \
      for (int64_t p = 0; p < g->k; p++) {                                   \
        T av = alpha * (g->ta ? a[p * g->lda + i] : a[i * g->lda + p]);      \
        if (!g->tb) {                                                        \
          const T *brow = b + p * g->ldb;                                    \
          for (int64_t j = 0; j < g->n; j++) crow[j] += av * brow[j];        \
        } else {                                                             \
          for (int64_t j = 0; j < g->n; j++) crow[j] += av * b[j * g->ldb + p]; \
        }                                                                    \
      }                                                                      \
    }                                                                        \
  }
FALLBACK_GEMM(gemm_f32, float)
FALLBACK_GEMM(gemm_f64, double)
FALLBACK_GEMM(gemm_c64, float complex)
FALLBACK_GEMM(gemm_c128, double complex)
#endif

#ifdef EIN_HAVE_CBLAS
/* cgemm and zgemm: alpha and beta by pointer, as complex numbers. */
static void gemm_complex(const ein_gemm_call *g, ein_dtype dt, double alpha,
                         const char *a, const char *b, char *c) {
  enum CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = g->tb ? CblasTrans : CblasNoTrans;
  if (dt == EIN_DT_C128) {
    double complex al = alpha, be = 0;
    cblas_zgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, &al,
                a, (int)g->lda, b, (int)g->ldb, &be, c, (int)g->ldc);
  } else {
    float complex al = (float)alpha, be = 0;
    cblas_cgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, &al,
                a, (int)g->lda, b, (int)g->ldb, &be, c, (int)g->ldc);
  }
}
#endif

#ifdef EIN_HAVE_CBLAS
/* A GEMM with one column or one row of C is a matrix-vector product:
 * OpenBLAS 0.3.21's sgemm/dgemm with n = 1 runs its GEMM kernels on a
 * packed one-column panel (`i j, j -> i`, 4096^2 f32: 8.3 ms, against
 * 2.5 ms for numpy's gemv), so those calls go to ?gemv. y = op(M) x with
 * M, x and y strided as the GEMM's operands lie; false when the call is
 * not of that form or the dtype is complex (its conjugation rules are
 * gemm's). */
static bool gemv_one(const ein_gemm_call *g, ein_dtype dt, double alpha,
                     const char *a, const char *b, char *c) {
  if ((g->n != 1 && g->m != 1) || (dt != EIN_DT_F32 && dt != EIN_DT_F64))
    return false;
  enum CBLAS_TRANSPOSE op;
  const char *mat, *x;
  int rows, cols, ld, incx, incy;
  if (g->n == 1) { /* c[i] = sum_p op(A)[i, p] b[p] */
    mat = a, ld = (int)g->lda, x = b, incy = (int)g->ldc;
    op = g->ta ? CblasTrans : CblasNoTrans;
    rows = (int)(g->ta ? g->k : g->m), cols = (int)(g->ta ? g->m : g->k);
    incx = g->tb ? 1 : (int)g->ldb;
  } else { /* c[j] = sum_p a[p] op(B)[p, j] = (op(B)^T a)[j] */
    mat = b, ld = (int)g->ldb, x = a, incy = 1;
    op = g->tb ? CblasNoTrans : CblasTrans;
    rows = (int)(g->tb ? g->n : g->k), cols = (int)(g->tb ? g->k : g->n);
    incx = g->ta ? (int)g->lda : 1;
  }
  if (dt == EIN_DT_F64)
    cblas_dgemv(CblasRowMajor, op, rows, cols, alpha, (const double *)mat, ld,
                (const double *)x, incx, 0.0, (double *)c, incy);
  else
    cblas_sgemv(CblasRowMajor, op, rows, cols, (float)alpha,
                (const float *)mat, ld, (const float *)x, incx, 0.0f,
                (float *)c, incy);
  return true;
}
#endif

/* OpenBLAS runs a GEMM call on its own threads from this many
 * multiply-adds on (m n k; 0.3.x: 65536 times its multithread threshold
 * of 4); smaller calls stay on the caller's thread. */
#define BLAS_THREADED_WORK (4.0 * 65536.0)

/* Does an f32 call go to oneDNN's sgemm? Where ein_cpu_dnnl_f32_gemm says
 * so (docs/design.md, "f32 and f64 GEMMs: which BLAS"), for
 * calls above BLAS_THREADED_WORK: below it OpenBLAS's smaller per-call
 * cost wins (tn_ring3's 1024 calls of 64^3 with both operands transposed:
 * 8.2 ms on OpenBLAS, 14.5 on oneDNN, one thread), and matrix-vector
 * products stay on OpenBLAS's gemv. */
static bool f32_on_onednn(const ein_gemm_call *g) {
  return g->m > 1 && g->n > 1 &&
         (double)g->m * (double)g->n * (double)g->k > BLAS_THREADED_WORK &&
         ein_cpu_dnnl_f32_gemm();
}

/* One GEMM call on `threads` threads (OpenBLAS's own pool sizes itself;
 * oneDNN's sgemm takes the count). */
static void gemm_one(const ein_gemm_call *g, ein_dtype dt, double alpha,
                     const char *a, const char *b, char *c, int threads) {
  if (dt == EIN_DT_F32 && f32_on_onednn(g) &&
      ein_cpu_dnnl_sgemm(g, (float)alpha, (const float *)a,
                         (const float *)b, (float *)c, threads))
    return;
#ifdef EIN_HAVE_CBLAS
  enum CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = g->tb ? CblasTrans : CblasNoTrans;
  if (gemv_one(g, dt, alpha, a, b, c))
    return;
  if (dt == EIN_DT_C64 || dt == EIN_DT_C128)
    gemm_complex(g, dt, alpha, a, b, c);
  else if (dt == EIN_DT_F64)
    cblas_dgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, alpha,
                (const double *)a, (int)g->lda, (const double *)b,
                (int)g->ldb, 0.0, (double *)c, (int)g->ldc);
  else
    cblas_sgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k,
                (float)alpha, (const float *)a, (int)g->lda,
                (const float *)b, (int)g->ldb, 0.0f, (float *)c,
                (int)g->ldc);
#else
  if (dt == EIN_DT_C128)
    gemm_c128(g, alpha, (const double complex *)a,
              (const double complex *)b, (double complex *)c);
  else if (dt == EIN_DT_C64)
    gemm_c64(g, (float)alpha, (const float complex *)a,
             (const float complex *)b, (float complex *)c);
  else if (dt == EIN_DT_F64)
    gemm_f64(g, alpha, (const double *)a, (const double *)b, (double *)c);
  else
    gemm_f32(g, (float)alpha, (const float *)a, (const float *)b, (float *)c);
#endif
}

bool ein_cpu_gemm_square(ein_dtype dt, int64_t n, const char *a,
                         const char *b, char *c) {
  ein_gemm_call g = {.m = n, .n = n, .k = n, .lda = n, .ldb = n, .ldc = n};
  if (dt == EIN_DT_BF16 || dt == EIN_DT_F16)
    return ein_cpu_dnnl_square(dt, n, a, b, c);
  gemm_one(&g, dt, 1.0, a, b, c, ein_cpu_threads_now(ein_cpu_threads()));
  return true;
}


/* Multiply-adds of a whole batch of one-core calls from which the batch
 * is split over threads: about 100 µs of work on one core, against some
 * 20 µs to start and join a thread. */
#define GEMM_SPLIT_BATCH_WORK (64.0 * 65536.0)

/* At most this many threads split one batch. */
enum { GEMM_SPLIT_MAX_THREADS = 64 };

/* Batch element bi of GEMM step s: its C, A and B. */
static void gemm_batch_one(const ein_step *s, const ein_gemm_call *call,
                           int64_t bi, char *c, const char *a,
                           const char *b, int threads) {
  const ein_gemm *g = &s->gemm;
  int64_t esz = (int64_t)ein_dtype_size(s->dst_dtype);
  int64_t off[3] = {0, 0, 0}, idx = bi;
  for (int i = g->nbatch - 1; i >= 0; i--) {
    int64_t ci = idx % g->batch[i].size;
    idx /= g->batch[i].size;
    for (int k = 0; k < 3; k++) off[k] += ci * g->batch[i].stride[k];
  }
  const char *pa = a + off[1] * esz, *pb = b + off[2] * esz;
  char *pc = c + off[0] * esz;
  if (call->swap)
    gemm_one(call, s->dst_dtype, s->alpha, pb, pa, pc, threads);
  else
    gemm_one(call, s->dst_dtype, s->alpha, pa, pb, pc, threads);
}

/* OpenBLAS runs a call below BLAS_THREADED_WORK on the calling thread,
 * so a batch of such calls would keep one core (tn_ring3: 1024 calls of
 * 64^3 on one of two): the batch is split over the backend's threads
 * instead. Larger calls thread themselves and run one after another on
 * the calling thread. */
int ein_cpu_gemm_batch_threads(const ein_gemm *g, int threads) {
#ifdef EIN_HAVE_CBLAS
  int64_t nb = 1;
  for (int i = 0; i < g->nbatch; i++) nb *= g->batch[i].size;
  double work = (double)g->m * (double)g->n * (double)g->k;
  if (nb < 2 || work > BLAS_THREADED_WORK ||
      work * (double)nb < GEMM_SPLIT_BATCH_WORK)
    return 1;
  if (threads > GEMM_SPLIT_MAX_THREADS) threads = GEMM_SPLIT_MAX_THREADS;
  return threads < nb ? threads : (int)nb;
#else
  (void)g, (void)threads;
  return 1; /* the fallback GEMM splits nothing */
#endif
}

/* One thread's share of a GEMM step's batch: [lo, hi), each call on
 * `threads` threads (1 where the batch is split). */
typedef struct gemm_slice {
  const ein_step *s;
  const ein_gemm_call *call;
  int64_t lo, hi;
  char *c;
  const char *a, *b;
  int threads;
} gemm_slice;

static void *gemm_slice_run(void *arg) {
  const gemm_slice *sl = arg;
  for (int64_t bi = sl->lo; bi < sl->hi; bi++)
    gemm_batch_one(sl->s, sl->call, bi, sl->c, sl->a, sl->b, sl->threads);
  return NULL;
}

/* Runs the batch as nt slices: nt - 1 threads started for this step and
 * the calling thread. Threads of their own, not the OpenMP team: the team
 * spins for a while after its region, on the cores a threaded OpenBLAS
 * call that follows needs (see ein_cpu_loop_threads); these end with the
 * step. A thread that cannot be started leaves its slice to the caller. */
static void gemm_batch_split(const gemm_slice *all, int nt) {
  pthread_t tid[GEMM_SPLIT_MAX_THREADS];
  gemm_slice sl[GEMM_SPLIT_MAX_THREADS];
  bool started[GEMM_SPLIT_MAX_THREADS] = {false};
  int64_t nb = all->hi;
  for (int t = 0; t < nt; t++) {
    sl[t] = *all;
    sl[t].threads = 1;
    sl[t].lo = nb * t / nt;
    sl[t].hi = nb * (t + 1) / nt;
    if (t > 0)
      started[t] = pthread_create(&tid[t], NULL, gemm_slice_run, &sl[t]) == 0;
  }
  gemm_slice_run(&sl[0]);
  for (int t = 1; t < nt; t++) {
    if (started[t])
      pthread_join(tid[t], NULL);
    else
      gemm_slice_run(&sl[t]);
  }
}

static ein_status run_gemm(const ein_step *s, char *c, const char *a,
                           const char *b, int threads, ein_error_rec *err) {
  const ein_gemm *g = &s->gemm;
  ein_gemm_call call;
  if (s->dst_dtype != s->src_dtype[0] || s->dst_dtype != s->src_dtype[1] ||
      (s->dst_dtype != EIN_DT_F32 && s->dst_dtype != EIN_DT_F64 &&
       !ein_dtype_is_complex(s->dst_dtype)) ||
      !ein_gemm_rowmajor(g, &call))
    return ein_fail_internal(err,
                             "cpu backend: a GEMM step it cannot run "
                             "(%s, m %lld n %lld k %lld)",
                             ein_dtype_name(s->dst_dtype), (long long)g->m,
                             (long long)g->n, (long long)g->k);
  int64_t nb = 1;
  for (int i = 0; i < g->nbatch; i++) nb *= g->batch[i].size;
  gemm_slice all = {s, &call, 0, nb, c, a, b, threads};
  int nt = ein_cpu_gemm_batch_threads(g, threads);
  if (nt > 1)
    gemm_batch_split(&all, nt);
  else
    gemm_slice_run(&all);
  return EIN_OK;
}

/* FLOPs of BLAS GEMM per byte a loop moves in the same time on one core
 * (~60 GFLOP/s against ~20 GB/s on our 2-core host): a GEMM step's FLOPs
 * over this, against a loop's bytes, says which of the two takes longer. */
#define GEMM_FLOPS_PER_LOOP_BYTE 3.0

/* Our OpenMP team and OpenBLAS's pthreads are two pools that both
 * busy-wait after their work (libgomp spins for a while before it sleeps,
 * OpenBLAS's workers yield in a loop for far longer). With as many threads
 * as cores, a loop after a threaded GEMM, or a GEMM after a loop, shares
 * its cores with the other pool's spinning threads: on 2 cores bilinear
 * took 12-16 ms instead of 4, quadform 28 instead of 18. So when the
 * threaded GEMMs of a plan take longer than its loops, the loops run on
 * the calling thread: the GEMMs keep every core, and the loops lose at
 * most their own parallel speed-up. */
int ein_cpu_loop_threads(const ein_plan_ir *plan, int threads) {
  double gemm_flops = 0, loop_bytes = 0;
  for (int i = 0; i < plan->nsteps; i++) {
    const ein_step *s = &plan->steps[i];
    const ein_gemm *g = &s->gemm;
    /* oneDNN's GEMMs (half, and f32 where it takes them) run on the
     * OpenMP team the loops use: no second pool spins beside them */
    bool own_pool = s->src_dtype[0] == EIN_DT_BF16 ||
                    s->src_dtype[0] == EIN_DT_F16 ||
                    (s->src_dtype[0] == EIN_DT_F32 && g->m > 1 && g->n > 1 &&
                     ein_cpu_dnnl_f32_gemm());
    if (s->kind != EIN_STEP_GEMM)
      loop_bytes += s->bytes_read + s->bytes_written;
    else if (!own_pool &&
             (double)g->m * (double)g->n * (double)g->k > BLAS_THREADED_WORK)
      gemm_flops += s->flops;
  }
  bool gemm_bound = gemm_flops > 0 &&
                    gemm_flops / GEMM_FLOPS_PER_LOOP_BYTE >= loop_bytes;
  return gemm_bound ? 1 : threads;
}

/* The threads a run's steps use: the loops' (ein_cpu_loop_threads) and
 * the backend's own, for batches of small GEMMs split by einc; the plan
 * and its program (oneDNN's primitives for half GEMM steps). */
typedef struct cpu_run_ctx {
  int loop_threads, gemm_threads;
  const ein_plan_ir *plan;
  const void *program;
} cpu_run_ctx;

/* One CPU step: a GEMM, else one of the contraction kernels, else the
 * general loops. */
static ein_status cpu_step(void *ctx, int i, const ein_step *s, char *dst,
                           const char *src[2], ein_error_rec *err) {
  const cpu_run_ctx *r = ctx;
  int threads = r->loop_threads;
  /* A GEMM whose A and B are half the planner stored so for oneDNN
   * (caps.gemm_half_dtype) */
  if (s->kind == EIN_STEP_GEMM && (s->src_dtype[0] == EIN_DT_BF16 ||
                                   s->src_dtype[0] == EIN_DT_F16))
    return ein_cpu_dnnl_run(r->plan, r->program, i, dst, src[0], src[1],
                            r->gemm_threads, err);
  if (s->kind == EIN_STEP_GEMM)
    return run_gemm(s, dst, src[0], src[1], r->gemm_threads, err);
  if (s->kind == EIN_STEP_LOOP && s->map != EIN_MAP_PRODUCT) {
    ein_status st = ein_cpu_map(s, dst, src[0], src[1]);
    return st ? ein_fail(err, st, "cpu backend: step %d has more axes than "
                        "it handles", i + 1)
              : EIN_OK;
  }
  if (ein_cpu_contract(s, dst, src[0], src[1], threads))
    return EIN_OK;
  ein_status st = ein_cpu_loop(s, dst, src[0], src[1], threads);
  if (st)
    ein_fail(err, st, "cpu backend: step %d has more axes than it handles",
             i + 1);
  return st;
}

static ein_status cpu_run(ein_backend *self, const ein_plan_ir *plan,
                          const void *program, char *const *inputs,
                          char *output, const ein_step_marks *marks,
                          ein_error_rec *err) {
  cpu_backend *cb = (cpu_backend *)self;
  workspace ws;
  if (!workspace_take(cb, plan->workspace_bytes, &ws))
    return ein_fail_memory(err, "cannot allocate %lld bytes of workspace",
                           (long long)plan->workspace_bytes);
  int now = ein_cpu_threads_now(cb->threads);
#ifdef EIN_HAVE_CBLAS
  int threads = ein_cpu_loop_threads(plan, now);
#else
  int threads = now; /* the fallback GEMM runs on this thread */
#endif
  cpu_run_ctx r = {.loop_threads = threads, .gemm_threads = now,
                   .plan = plan, .program = program};
  ein_status st = ein_run_steps(plan, inputs, output, ws.data, marks,
                                cpu_step, &r, err);
  workspace_give(cb, ws);
  return st;
}

static void cpu_destroy(ein_backend *self) {
  cpu_backend *cb = (cpu_backend *)self;
  for (int i = 0; i < cb->npool; i++) ein_free(cb->pool[i].data);
  pthread_mutex_destroy(&cb->lock);
  ein_free(cb);
}

/* Host memory: the CPU backend's "device" is the host. */
static ein_status cpu_alloc(ein_backend *self, size_t bytes, void **ptr,
                            ein_error_rec *err) {
  (void)self;
  *ptr = ein_malloc(bytes ? bytes : 1);
  if (!*ptr)
    return ein_fail_memory(err, "out of memory allocating %zu bytes", bytes);
  return EIN_OK;
}

static void cpu_free(ein_backend *self, void *ptr) {
  (void)self;
  ein_free(ptr);
}

static ein_status cpu_copy(ein_backend *self, void *dst, const void *src,
                           size_t bytes, ein_copy_dir dir,
                           ein_error_rec *err) {
  (void)self, (void)dir, (void)err;
  if (bytes) memcpy(dst, src, bytes);
  return EIN_OK;
}

static const ein_backend_caps *cpu_caps(void) {
  /* Below ~16^3 multiply-adds a BLAS call costs more than a loop, in all
   * and per call of a batch (one call per batch element). */
  static const ein_backend_caps caps = {.device = "cpu",
                                        .gemm_half = false,
                                        .gemm_half_dtype =
                                            ein_cpu_dnnl_gemm_dtype,
                                        .half_vector_batch_loop = true,
                                        .gemm_int = false,
                                        .gemm_min_flops = 2 * 16 * 16 * 16,
                                        .gemm_min_call_flops = 2 * 16 * 16 * 16};
  return &caps;
}

static ein_backend *cpu_open(int device, ein_error_rec *err) {
  cpu_backend *cb = ein_backend_new_single(
      device, sizeof *cb, "the CPU backend has one device, 0, not %d",
      "out of memory creating the CPU backend", err);
  if (!cb) return NULL;
  pthread_mutex_init(&cb->lock, NULL);
  cb->base = (ein_backend){.entry = &ein_cpu_entry,
                           .run = cpu_run,
                           .alloc = cpu_alloc,
                           .free = cpu_free,
                           .copy = cpu_copy,
                           .free_memory = ein_host_free_memory,
                           .destroy = cpu_destroy};
  cb->threads = ein_cpu_threads();
  return &cb->base;
}

static bool host_memory(DLDeviceType t) {
  return t == kDLCPU || t == kDLCUDAHost || t == kDLROCMHost;
}

const ein_backend_entry ein_cpu_entry = {
    .name = "cpu",
    .kind = EIN_BACKEND_CPU,
    .memory = kDLCPU,
    .memory_name = "host memory",
    .accepts = host_memory,
    .caps = cpu_caps,
    .prepare = ein_cpu_dnnl_prepare,
    .program_free = ein_cpu_dnnl_program_free,
    .describe = ein_cpu_dnnl_describe,
    .describe_step_json = ein_cpu_dnnl_describe_step_json,
    .device_count = ein_backend_one_device,
    .open = cpu_open,
};
