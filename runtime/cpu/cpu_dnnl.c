/*
 * cpu_dnnl.c - half-precision GEMM steps through oneDNN's matmul primitive
 * (cpu_dnnl.h; docs/design.md, "Half-precision GEMMs on the
 * CPU").
 *
 * Why oneDNN: the CPU's bf16 units (AVX512-BF16's vdpbf16ps, AMX) run a
 * bf16 GEMM at about twice the rate of an f32 one, and nothing einc could
 * already load uses them: Debian's OpenBLAS 0.3.21 has no sbgemm. Debian
 * ships oneDNN 2.6 (libdnnl.so.2), whose matmul multiplies bf16 with f32
 * accumulation on those units (its brgemm kernels), as torch's does.
 *
 * The library is opened with dlopen on the first half-dtype plan, as the
 * CUDA libraries are (runtime/cuda/cuda_libs.c): one list below names
 * every oneDNN function einc calls, each resolved into a pointer whose
 * type is the header's own prototype, and every call goes through
 * DNNL_CHECK, which records the call, the file and line and oneDNN's
 * status. einc builds without the header (the path is then never taken),
 * and runs without the library (plans convert to f32, as before).
 */
#include "cpu_dnnl.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(EIN_HAVE_DNNL_H)
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#if DNNL_VERSION_MAJOR != 2
#undef EIN_HAVE_DNNL_H /* oneDNN 3 dropped the op descriptors used here */
#endif
#endif

static atomic_long calls, sgemm_calls;

long ein_cpu_dnnl_calls(void) { return atomic_load(&calls); }
long ein_cpu_dnnl_sgemm_calls(void) { return atomic_load(&sgemm_calls); }

#if !defined(EIN_HAVE_DNNL_H)

bool ein_cpu_dnnl_gemm_dtype(ein_dtype dt) {
  (void)dt;
  return false;
}

void ein_cpu_dnnl_why(ein_dtype dt, char *buf, size_t cap) {
  (void)dt;
  snprintf(buf, cap, "einc was built without oneDNN 2's header");
}

ein_status ein_cpu_dnnl_prepare(const ein_plan_ir *plan, void **program,
                                ein_error_rec *err) {
  (void)plan, (void)err;
  *program = NULL;
  return EIN_OK;
}

void ein_cpu_dnnl_program_free(void *program) { (void)program; }

void ein_cpu_dnnl_describe_step_json(const ein_plan_ir *plan,
                                     const void *program, int step,
                                     ein_strbuf *sb) {
  (void)plan, (void)program, (void)step, (void)sb;
}

void ein_cpu_dnnl_describe(const ein_plan_ir *plan, const void *program,
                           ein_strbuf *sb) {
  (void)plan, (void)program, (void)sb;
}

ein_status ein_cpu_dnnl_run(const ein_plan_ir *plan, const void *program,
                            int i, char *c, const char *a, const char *b,
                            int threads, ein_error_rec *err) {
  (void)plan, (void)program, (void)c, (void)a, (void)b, (void)threads;
  return ein_fail_internal(err, "cpu backend: half GEMM step %d without "
                                "oneDNN",
                           i + 1);
}

bool ein_cpu_dnnl_square(ein_dtype dt, int64_t n, const char *a,
                         const char *b, char *c) {
  (void)dt, (void)n, (void)a, (void)b, (void)c;
  return false;
}

bool ein_cpu_dnnl_f32_gemm(void) { return false; }

bool ein_cpu_dnnl_sgemm(const ein_gemm_call *g, float alpha, const float *a,
                        const float *b, float *c, int threads) {
  (void)g, (void)alpha, (void)a, (void)b, (void)c, (void)threads;
  return false;
}

#else /* EIN_HAVE_DNNL_H */

#include <cpuid.h>
#include <dlfcn.h>
#include <pthread.h>

#include "alloc.h"
#include "cpu_rates.h"
#include "cpu_threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Every oneDNN function einc calls. */
#define EIN_DNNL_FUNCTIONS(X)                                                  \
  X(dnnl_version)                                                              \
  X(dnnl_status2str)                                                           \
  X(dnnl_engine_create)                                                        \
  X(dnnl_stream_create)                                                        \
  X(dnnl_stream_wait)                                                          \
  X(dnnl_stream_destroy)                                                       \
  X(dnnl_memory_desc_init_by_strides)                                          \
  X(dnnl_matmul_desc_init)                                                     \
  X(dnnl_primitive_attr_create)                                                \
  X(dnnl_primitive_attr_set_output_scales)                                     \
  X(dnnl_primitive_attr_destroy)                                               \
  X(dnnl_primitive_desc_create)                                                \
  X(dnnl_primitive_desc_query)                                                 \
  X(dnnl_primitive_desc_destroy)                                               \
  X(dnnl_primitive_create)                                                     \
  X(dnnl_primitive_execute)                                                    \
  X(dnnl_primitive_destroy)                                                    \
  X(dnnl_memory_create)                                                        \
  X(dnnl_memory_set_data_handle)                                               \
  X(dnnl_memory_destroy)                                                       \
  X(dnnl_sgemm)

/* A pointer per function, of the header's type: the compiler checks each
 * call against the real prototype. */
#define POINTER(name) static __typeof__(name) *p_##name;
EIN_DNNL_FUNCTIONS(POINTER)
#define DNNL(name) (*p_##name)

/* Every oneDNN call that returns a status: a failure is recorded on `err`
 * (the call's text, file, line and oneDNN's name for the status) and the
 * enclosing function returns EIN_ERR_BACKEND; `err` may be a scratch
 * record (the probe's). */
#define DNNL_CHECK(err, call)                                                  \
  do {                                                                         \
    dnnl_status_t st_ = (call);                                                \
    if (st_ != dnnl_success)                                                   \
      return ein_fail_backend((err), "oneDNN: %s failed at %s:%d: %s", #call, \
                              __FILE__, __LINE__, DNNL(dnnl_status2str)(st_)); \
  } while (0)

/* ------------------------------------------------------------ loading */

static struct {
  pthread_once_t once;
  bool ok;
  dnnl_engine_t engine; /* the process's CPU engine, never destroyed */
  char why[512];        /* why the library is not used */
} lib = {.once = PTHREAD_ONCE_INIT};

/* Stores dlsym's answer in a function pointer (POSIX guarantees that a
 * data pointer holds a function's address). */
static bool resolve(void *handle, const char *symbol, void *slot) {
  void *sym = dlsym(handle, symbol);
  if (sym) memcpy(slot, &sym, sizeof sym);
  return sym != NULL;
}

/* Opens libdnnl.so.2 (or $EINC_DNNL's file) and resolves every function;
 * lib.why says what failed. A handle that misses a function stays open,
 * unused. */
static bool open_functions(void) {
  const char *file = getenv("EINC_DNNL");
  const char *name = file && *file ? file : "libdnnl.so.2";
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(lib.why, sizeof lib.why, "%s", dlerror());
    return false;
  }
  const char *missing = NULL;
#define RESOLVE(fn)                                                            \
  if (!missing && !resolve(h, #fn, &p_##fn)) missing = #fn;
  EIN_DNNL_FUNCTIONS(RESOLVE)
#undef RESOLVE
  if (missing) {
    snprintf(lib.why, sizeof lib.why, "%s has no %s", name, missing);
    return false;
  }
  const dnnl_version_t *v = DNNL(dnnl_version)();
  if (v->major != 2) {
    snprintf(lib.why, sizeof lib.why, "%s is oneDNN %d, not 2", name,
             v->major);
    return false;
  }
  return true;
}

static ein_status make_engine(ein_error_rec *err) {
  DNNL_CHECK(err, DNNL(dnnl_engine_create)(&lib.engine, dnnl_cpu, 0));
  return EIN_OK;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EIN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EIN_ASAN 1
#endif

static void open_lib(void) {
  const char *file = getenv("EINC_DNNL");
  if (file && strcmp(file, "0") == 0) {
    snprintf(lib.why, sizeof lib.why, "EINC_DNNL=0: oneDNN is not used");
    return;
  }
#ifdef EIN_ASAN
  /* LeakSanitizer (GCC 12's) crashes at exit scanning the dynamic TLS of
   * the OpenMP threads that ran libdnnl's code, failing every program
   * that ran a bf16 GEMM: a sanitizer build loads oneDNN only where
   * EINC_DNNL names it (test_cpu_half, with LSAN_OPTIONS=use_tls=0) */
  if (!file || !*file) {
    snprintf(lib.why, sizeof lib.why, "an AddressSanitizer build loads "
                                      "oneDNN only where EINC_DNNL names it");
    return;
  }
#endif
  ein_error_rec err;
  ein_error_init(&err);
  lib.ok = open_functions();
  if (lib.ok && make_engine(&err) != EIN_OK) {
    snprintf(lib.why, sizeof lib.why, "%s", err.message);
    lib.ok = false;
  }
  ein_error_clear(&err);
}

/* The CPU's half-precision GEMM units, from cpuid leaf 7: bf16
 * (AVX512-BF16: subleaf 1 EAX bit 5; AMX-BF16: subleaf 0 EDX bit 22) or
 * f16 (AVX512-FP16: subleaf 0 EDX bit 23; AMX-FP16: subleaf 1 EAX bit
 * 21). Without them oneDNN's half matmul converts in software, slower
 * than the f32 path. */
static bool cpu_has_units(ein_dtype dt) {
  unsigned a0, b0, c0, d0, a1, b1, c1, d1;
  if (!__get_cpuid_count(7, 0, &a0, &b0, &c0, &d0)) return false;
  if (!__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) a1 = 0;
  if (dt == EIN_DT_BF16) return (a1 >> 5 & 1) || (d0 >> 22 & 1);
  if (dt == EIN_DT_F16) return (d0 >> 23 & 1) || (a1 >> 21 & 1);
  return false;
}

/* ------------------------------------------------------ one primitive */

/* One GEMM step as oneDNN runs it: a batched matmul over some of the
 * step's batch axes (up to DNNL_MAX_NDIMS - 2), the rest looped here,
 * row-major C. */
typedef struct ein_dnnl_gemm {
  dnnl_primitive_t prim;
  int threads;              /* the OpenMP threads it was made for */
  int nloop, inner;         /* batch axes looped here, taken by oneDNN */
  bool lead;                /* a size-1 batch axis first (see choose_split) */
  int axes[EIN_MAX_DIMS];   /* plan batch indices: looped, then oneDNN's */
  dnnl_memory_desc_t md[3]; /* A, B, C as oneDNN reads them */
  char impl[64];            /* oneDNN's implementation, for reports */
} ein_dnnl_gemm;

enum {
  MAX_INNER_BATCH = DNNL_MAX_NDIMS - 2,
  /* batch axes up to which every split into looped and taken axes is
   * tried (2^6 candidates at most) */
  MAX_SPLIT_SEARCH = 6,
  /* the fewest FLOPs per execution and thread for which a loop is taken
   * to reach brgemm on more than one thread, where each execution starts
   * and joins the OpenMP team (docs/design.md, "Which batch axes oneDNN
   * takes": measured on 1 and 2 threads) */
  MIN_RUN_FLOPS_PER_THREAD = 1 << 23,
};

static dnnl_data_type_t to_dnnl_dt(ein_dtype dt) {
  return dt == EIN_DT_BF16 ? dnnl_bf16 : dt == EIN_DT_F16 ? dnnl_f16
                                                           : dnnl_f32;
}

/* d's axes for the batch axes in `looped` (a bit per plan batch axis):
 * those first, in plan order, then the others in the order oneDNN gets
 * them: C's strides descending, as its brgemm kernels want (a C of layout
 * `b i (h d)` is then one batched call they take; the order of batch axes
 * is free, as long as A, B and C share it). */
static void split_batch(const ein_gemm *sg, uint64_t looped,
                        ein_dnnl_gemm *d) {
  d->nloop = d->inner = 0;
  for (int i = 0; i < sg->nbatch; i++)
    if (looped >> i & 1) d->axes[d->nloop++] = i;
  int *in = &d->axes[d->nloop];
  for (int i = 0; i < sg->nbatch; i++) {
    if (looped >> i & 1) continue;
    int j = d->inner++;
    for (; j > 0 && sg->batch[in[j - 1]].stride[0] < sg->batch[i].stride[0];
         j--)
      in[j] = in[j - 1];
    in[j] = i;
  }
}

/* One matrix of the call as oneDNN's dims and strides: d's taken batch
 * axes (a stride-0 axis is size 1, which oneDNN broadcasts), then rows and
 * columns. `which` is 0 for C, 1 and 2 for the call's A and B. */
static void matrix_dims(const ein_gemm *sg, const ein_gemm_call *g, int which,
                        const ein_dnnl_gemm *d, dnnl_dims_t dims,
                        dnnl_dims_t strides) {
  int plan_op = which == 0 ? 0 : g->swap ? 3 - which : which;
  int64_t rows = which == 2 ? g->k : g->m, cols = which == 1 ? g->k : g->n;
  int64_t ld = which == 0 ? g->ldc : which == 1 ? g->lda : g->ldb;
  bool trans = which == 1 ? g->ta : which == 2 ? g->tb : false;
  int lead = d->lead, inner = lead + d->inner;
  for (int i = lead; i < inner; i++) {
    const ein_loop_axis *ax = &sg->batch[d->axes[d->nloop + i - lead]];
    int64_t st = ax->stride[plan_op];
    dims[i] = which == 0 || st ? ax->size : 1;
    strides[i] = st ? st : rows * cols;
  }
  dims[inner] = rows;
  dims[inner + 1] = cols;
  strides[inner] = trans ? 1 : ld;
  strides[inner + 1] = trans ? ld : 1;
  if (lead) { /* the extent of the rest: what a dense layout has */
    dims[0] = 1;
    strides[0] = 1;
    for (int i = 1; i < inner + 2; i++)
      if (dims[i] * strides[i] > strides[0]) strides[0] = dims[i] * strides[i];
  }
}

/* The row-major call's three matrices with d's taken batch axes. */
static ein_status make_mds(const ein_step *s, const ein_gemm_call *g,
                           ein_dnnl_gemm *d, ein_error_rec *err) {
  static const int order[3] = {1, 2, 0}; /* md: A, B, C */
  for (int k = 0; k < 3; k++) {
    dnnl_dims_t dims, strides;
    matrix_dims(&s->gemm, g, order[k], d, dims, strides);
    dnnl_data_type_t dt = to_dnnl_dt(k == 2 ? s->dst_dtype : s->src_dtype[0]);
    DNNL_CHECK(err, DNNL(dnnl_memory_desc_init_by_strides)(
                        &d->md[k], d->lead + d->inner + 2, dims, dt, strides));
  }
  return EIN_OK;
}

/* The primitive descriptor of d->md for the scale alpha (1/count for a
 * mean) as an output scale, so no pass over C follows; d->impl names
 * oneDNN's implementation. */
static ein_status make_pd(ein_dnnl_gemm *d, double alpha,
                          dnnl_primitive_desc_t *pd, ein_error_rec *err) {
  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = NULL;
  float scale = (float)alpha;
  *pd = NULL;
  DNNL_CHECK(err, DNNL(dnnl_matmul_desc_init)(&desc, &d->md[0], &d->md[1],
                                              NULL, &d->md[2]));
  DNNL_CHECK(err, DNNL(dnnl_primitive_attr_create)(&attr));
  dnnl_status_t st =
      alpha == 1 ? dnnl_success
                 : DNNL(dnnl_primitive_attr_set_output_scales)(attr, 1, 0,
                                                               &scale);
  if (st == dnnl_success)
    st = DNNL(dnnl_primitive_desc_create)(pd, &desc, attr, lib.engine, NULL);
  DNNL(dnnl_primitive_attr_destroy)(attr);
  DNNL_CHECK(err, st);
  const char *impl = NULL;
  st = DNNL(dnnl_primitive_desc_query)(*pd, dnnl_query_impl_info_str, 0,
                                       &impl);
  snprintf(d->impl, sizeof d->impl, "%s", st == dnnl_success && impl ? impl
                                                                     : "?");
  return EIN_OK;
}

/* The descriptor for the batch axes `looped` looped here, the others
 * taken by oneDNN. */
static ein_status try_split(const ein_step *s, const ein_gemm_call *g,
                            uint64_t looped, bool lead, ein_dnnl_gemm *d,
                            dnnl_primitive_desc_t *pd, ein_error_rec *err) {
  split_batch(&s->gemm, looped, d);
  d->lead = lead;
  ein_status st = make_mds(s, g, d, err);
  return st ? st : make_pd(d, s->alpha, pd, err);
}

/* d's primitive, from its descriptor pd (the caller's to destroy). */
static ein_status make_prim(ein_dnnl_gemm *d, dnnl_primitive_desc_t pd,
                            ein_error_rec *err) {
  dnnl_status_t st = DNNL(dnnl_primitive_create)(&d->prim, pd);
  if (st != dnnl_success) d->prim = NULL;
  DNNL_CHECK(err, st);
  return EIN_OK;
}

/* Product of the sizes of the batch axes in `looped`. */
static int64_t looped_count(const ein_gemm *sg, uint64_t looped) {
  int64_t n = 1;
  for (int i = 0; i < sg->nbatch; i++)
    if (looped >> i & 1) n *= sg->batch[i].size;
  return n;
}

static bool is_brgemm(const ein_dnnl_gemm *d) {
  return strncmp(d->impl, "brg", 3) == 0;
}

/* The split of the batch axes oneDNN runs best. Its brgemm kernels (2.6)
 * take A, B and C only in dense layouts of a few kinds: batch axes in
 * stride order, or (4-d) the second batch axis inside the rows (`b i h
 * d`). So `h b i d` from `b h`-ordered operands is refused, and loops over
 * b and h are taken; and C `c e f` of one batch axis e is taken as `1 e c
 * f`, a size-1 axis first (the `lead` candidate). The first candidate is
 * all axes taken (the outermost looped beyond MAX_INNER_BATCH), kept where
 * it gets brgemm or nothing else does (gemm:jit); else the split of fewest
 * executions that does, over every split up to MAX_SPLIT_SEARCH batch
 * axes, where a loop pays: always on one thread, else where each
 * execution does MIN_RUN_FLOPS_PER_THREAD per thread. oneDNN itself
 * answers which layouts it takes (the descriptor's impl), so another
 * version answers for itself. */
static ein_status choose_split(const ein_step *s, const ein_gemm_call *g,
                               ein_dnnl_gemm *d, dnnl_primitive_desc_t *pd,
                               ein_error_rec *err) {
  const ein_gemm *sg = &s->gemm;
  int extra = sg->nbatch - MAX_INNER_BATCH;
  uint64_t first = extra > 0 ? (UINT64_C(1) << extra) - 1 : 0, best = first;
  ein_status st = try_split(s, g, first, false, d, pd, err);
  if (st || is_brgemm(d) || sg->nbatch > MAX_SPLIT_SEARCH) return st;
  double flops = 2.0 * g->m * g->n * g->k * looped_count(sg, ~UINT64_C(0));
  double most = d->threads == 1
                    ? flops
                    : flops / ((double)d->threads * MIN_RUN_FLOPS_PER_THREAD);
  int64_t best_n = (most > 1 ? (int64_t)most : 1) + 1;
  bool best_lead = false;
  for (uint64_t m = 0; m < UINT64_C(1) << sg->nbatch; m++)
    for (int lead = 0; lead < 2; lead++) {
      int64_t n = looped_count(sg, m);
      if (n >= best_n || (m == first && !lead) ||
          (lead && sg->nbatch - __builtin_popcountll(m) != 1))
        continue;
      dnnl_primitive_desc_t alt;
      ein_dnnl_gemm t = *d;
      if (try_split(s, g, m, lead, &t, &alt, err)) {
        DNNL(dnnl_primitive_desc_destroy)(*pd);
        *pd = NULL;
        return EIN_ERR_BACKEND;
      }
      if (is_brgemm(&t)) best = m, best_n = n, best_lead = lead;
      DNNL(dnnl_primitive_desc_destroy)(alt);
    }
  if (best == first && !best_lead) return EIN_OK;
  DNNL(dnnl_primitive_desc_destroy)(*pd);
  *pd = NULL;
  return try_split(s, g, best, best_lead, d, pd, err);
}

/* Sets the calling thread's OpenMP thread count; returns the one before.
 * oneDNN reads it when a primitive is made (its blocking and the team its
 * execution starts are fixed then), so a primitive runs on the threads it
 * was made for. */
static int set_threads(int threads) {
#ifdef _OPENMP
  int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  return before;
#else
  (void)threads;
  return 1;
#endif
}

/* Step s's primitive, made for `threads` OpenMP threads. */
static ein_status gemm_make(const ein_step *s, int threads,
                            ein_dnnl_gemm *d, ein_error_rec *err) {
  ein_gemm_call g;
  memset(d, 0, sizeof *d);
  d->threads = threads;
  if (!ein_gemm_rowmajor(&s->gemm, &g))
    return ein_fail_internal(err, "cpu backend: a half GEMM step that is "
                                  "not row-major in any order");
  int before = set_threads(threads);
  dnnl_primitive_desc_t pd = NULL;
  ein_status st = choose_split(s, &g, d, &pd, err);
  if (!st) st = make_prim(d, pd, err);
  if (pd) DNNL(dnnl_primitive_desc_destroy)(pd);
  set_threads(before);
  return st;
}

static void gemm_free(ein_dnnl_gemm *d) {
  if (d->prim) DNNL(dnnl_primitive_destroy)(d->prim);
  d->prim = NULL;
}

/* ------------------------------------------------------------ probing */

/* Whether dt's matmul runs on the CPU's units: a 64^3 one is made, and a
 * reference implementation ("ref:any") counts as no (it runs scalar
 * code, far below the f32 path). */
static struct probe {
  pthread_once_t once;
  bool ok;
  char why[512];
} probes[2] = {{.once = PTHREAD_ONCE_INIT}, {.once = PTHREAD_ONCE_INIT}};

static void probe_dtype(ein_dtype dt, struct probe *p) {
  if (!cpu_has_units(dt)) {
    snprintf(p->why, sizeof p->why, "the CPU has no %s GEMM units",
             ein_dtype_name(dt));
    return;
  }
  pthread_once(&lib.once, open_lib);
  if (!lib.ok) {
    snprintf(p->why, sizeof p->why, "%s", lib.why);
    return;
  }
  ein_step s = {.kind = EIN_STEP_GEMM, .dst_dtype = EIN_DT_F32,
                .src_dtype = {dt, dt}, .alpha = 1,
                .gemm = {.m = 64, .n = 64, .k = 64, .a_ms = 64, .a_ks = 1,
                         .b_ks = 64, .b_ns = 1, .c_ms = 64, .c_ns = 1}};
  ein_dnnl_gemm d;
  ein_error_rec err;
  ein_error_init(&err);
  ein_status st = gemm_make(&s, 1, &d, &err);
  if (st) snprintf(p->why, sizeof p->why, "%s", err.message);
  ein_error_clear(&err);
  if (st) return;
  const dnnl_version_t *v = DNNL(dnnl_version)();
  p->ok = strncmp(d.impl, "ref", 3) != 0;
  snprintf(p->why, sizeof p->why, "oneDNN %d.%d.%d matmul %s%s", v->major,
           v->minor, v->patch, d.impl,
           p->ok ? "" : " (a reference implementation: not used)");
  gemm_free(&d);
}

static void probe_bf16(void) { probe_dtype(EIN_DT_BF16, &probes[0]); }
static void probe_f16(void) { probe_dtype(EIN_DT_F16, &probes[1]); }

static struct probe *probe_of(ein_dtype dt) {
  if (dt != EIN_DT_BF16 && dt != EIN_DT_F16) return NULL;
  struct probe *p = &probes[dt == EIN_DT_F16];
  pthread_once(&p->once, dt == EIN_DT_F16 ? probe_f16 : probe_bf16);
  return p;
}

bool ein_cpu_dnnl_gemm_dtype(ein_dtype dt) {
  struct probe *p = probe_of(dt);
  return p && p->ok;
}

void ein_cpu_dnnl_why(ein_dtype dt, char *buf, size_t cap) {
  struct probe *p = probe_of(dt);
  snprintf(buf, cap, "%s", p ? p->why : "not a half dtype");
}

/* ------------------------------------------------------------ programs */

/* A plan's primitives: gemm[i] for half GEMM step i (prim NULL
 * elsewhere), for the plan `ir` only. */
typedef struct ein_dnnl_program {
  const ein_plan_ir *ir;
  int nsteps;
  ein_dnnl_gemm *gemm;
} ein_dnnl_program;

static bool half_gemm(const ein_step *s) {
  return s->kind == EIN_STEP_GEMM && (s->src_dtype[0] == EIN_DT_BF16 ||
                                      s->src_dtype[0] == EIN_DT_F16);
}

void ein_cpu_dnnl_program_free(void *program) {
  ein_dnnl_program *p = program;
  if (!p) return;
  for (int i = 0; i < p->nsteps; i++) gemm_free(&p->gemm[i]);
  ein_free(p->gemm);
  ein_free(p);
}

ein_status ein_cpu_dnnl_prepare(const ein_plan_ir *plan, void **program,
                                ein_error_rec *err) {
  *program = NULL;
  int n = 0;
  for (int i = 0; i < plan->nsteps; i++) n += half_gemm(&plan->steps[i]);
  if (n == 0) return EIN_OK;
  /* the threads the backend's runs will use (ein_cpu_dnnl_run makes the
   * primitive again for another count: a forked child's one) */
  int threads = ein_cpu_threads_now(ein_cpu_threads());
  ein_dnnl_program *p = ein_calloc(1, sizeof *p);
  ein_dnnl_gemm *g = p ? ein_calloc((size_t)plan->nsteps, sizeof *g) : NULL;
  if (!g) {
    ein_free(p);
    return ein_fail_memory(err, "out of memory for the oneDNN program");
  }
  *p = (ein_dnnl_program){plan, plan->nsteps, g};
  for (int i = 0; i < plan->nsteps; i++) {
    const ein_step *s = &plan->steps[i];
    ein_status st = EIN_OK;
    if (half_gemm(s) && !ein_cpu_dnnl_gemm_dtype(s->src_dtype[0]))
      st = ein_fail_internal(err, "cpu backend: a %s GEMM step without "
                                  "oneDNN",
                             ein_dtype_name(s->src_dtype[0]));
    else if (half_gemm(s))
      st = gemm_make(s, threads, &g[i], err);
    if (st) {
      ein_cpu_dnnl_program_free(p);
      return st;
    }
  }
  *program = p;
  return EIN_OK;
}

void ein_cpu_dnnl_describe_step_json(const ein_plan_ir *plan,
                                     const void *program, int step,
                                     ein_strbuf *sb) {
  const ein_dnnl_program *p = program;
  if (!p || p->ir != plan || step >= p->nsteps || !p->gemm[step].prim)
    return;
  ein_strbuf_printf(sb, "\"cpu_gemm\":{\"library\":\"oneDNN\","
                        "\"impl\":\"%s\",\"accumulate\":\"f32\"},",
                    p->gemm[step].impl);
}

void ein_cpu_dnnl_describe(const ein_plan_ir *plan, const void *program,
                           ein_strbuf *sb) {
  const ein_dnnl_program *p = program;
  if (!p || p->ir != plan) return;
  for (int i = 0; i < p->nsteps; i++) {
    const ein_dnnl_gemm *d = &p->gemm[i];
    if (!d->prim) continue;
    int64_t runs = 1;
    for (int k = 0; k < d->nloop; k++)
      runs *= plan->steps[i].gemm.batch[d->axes[k]].size;
    ein_strbuf_printf(sb, "cpu gemm     step %d: oneDNN %s (%s in, f32 "
                          "accumulation",
                      i + 1, d->impl,
                      ein_dtype_name(plan->steps[i].src_dtype[0]));
    if (runs > 1)
      ein_strbuf_printf(sb, "; %lld runs, batch axes looped",
                        (long long)runs);
    ein_strbuf_printf(sb, ")\n");
  }
}

/* ------------------------------------------------------------ running */

/* Runs d over the step's batch: one execution per index of the batch
 * axes it loops. */
static ein_status execute(const ein_step *s, const ein_dnnl_gemm *d, char *c,
                          const char *a, const char *b, ein_error_rec *err) {
  const ein_gemm *g = &s->gemm;
  ein_gemm_call call;
  (void)ein_gemm_rowmajor(g, &call); /* gemm_make checked it */
  dnnl_stream_t stream;
  dnnl_memory_t mem[3] = {NULL, NULL, NULL};
  DNNL_CHECK(err, DNNL(dnnl_stream_create)(&stream, lib.engine,
                                           dnnl_stream_default_flags));
  dnnl_status_t st = dnnl_success;
  for (int i = 0; i < 3 && st == dnnl_success; i++)
    st = DNNL(dnnl_memory_create)(&mem[i], &d->md[i], lib.engine,
                                  DNNL_MEMORY_NONE);
  int64_t esz[3] = {(int64_t)ein_dtype_size(s->dst_dtype),
                    (int64_t)ein_dtype_size(s->src_dtype[0]),
                    (int64_t)ein_dtype_size(s->src_dtype[1])};
  int nouter = d->nloop;
  int64_t outer = 1;
  for (int i = 0; i < nouter; i++) outer *= g->batch[d->axes[i]].size;
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, mem[0]},
                             {DNNL_ARG_WEIGHTS, mem[1]},
                             {DNNL_ARG_DST, mem[2]}};
  for (int64_t bi = 0; bi < outer && st == dnnl_success; bi++) {
    int64_t off[3] = {0, 0, 0}, idx = bi;
    for (int i = nouter - 1; i >= 0; i--) {
      const ein_loop_axis *ax = &g->batch[d->axes[i]];
      int64_t ci = idx % ax->size;
      idx /= ax->size;
      for (int k = 0; k < 3; k++) off[k] += ci * ax->stride[k];
    }
    /* oneDNN reads A and B only; its handles are not const */
    char *pa = (char *)(uintptr_t)(a + off[1] * esz[1]);
    char *pb = (char *)(uintptr_t)(b + off[2] * esz[2]);
    st = DNNL(dnnl_memory_set_data_handle)(mem[0], call.swap ? pb : pa);
    if (st == dnnl_success)
      st = DNNL(dnnl_memory_set_data_handle)(mem[1], call.swap ? pa : pb);
    if (st == dnnl_success)
      st = DNNL(dnnl_memory_set_data_handle)(mem[2], c + off[0] * esz[0]);
    if (st == dnnl_success)
      st = DNNL(dnnl_primitive_execute)(d->prim, stream, 3, args);
  }
  if (st == dnnl_success) st = DNNL(dnnl_stream_wait)(stream);
  for (int i = 0; i < 3; i++)
    if (mem[i]) DNNL(dnnl_memory_destroy)(mem[i]);
  DNNL(dnnl_stream_destroy)(stream);
  DNNL_CHECK(err, st);
  atomic_fetch_add(&calls, outer);
  return EIN_OK;
}

ein_status ein_cpu_dnnl_run(const ein_plan_ir *plan, const void *program,
                            int i, char *c, const char *a, const char *b,
                            int threads, ein_error_rec *err) {
  const ein_dnnl_program *p = program;
  const ein_step *s = &plan->steps[i];
  /* A primitive made for other threads is made again for these: in a
   * forked child (one thread: libgomp's team is the parent's, and a region
   * of two would wait for it forever) or a plan run without its program
   * (a sub-plan, the rate measurement). */
  bool prepared = p && p->ir == plan && i < p->nsteps && p->gemm[i].prim &&
                  p->gemm[i].threads == threads;
  ein_dnnl_gemm once;
  if (!prepared) {
    if (!ein_cpu_dnnl_gemm_dtype(s->src_dtype[0]))
      return ein_fail_internal(err, "cpu backend: a %s GEMM step without "
                                    "oneDNN",
                               ein_dtype_name(s->src_dtype[0]));
    ein_status st = gemm_make(s, threads, &once, err);
    if (st) return st;
  }
  /* oneDNN runs on the OpenMP team of the calling thread */
  int before = set_threads(threads);
  ein_status st = execute(s, prepared ? &p->gemm[i] : &once, c, a, b, err);
  set_threads(before);
  if (!prepared) gemm_free(&once);
  return st;
}

bool ein_cpu_dnnl_square(ein_dtype dt, int64_t n, const char *a,
                         const char *b, char *c) {
  if (!ein_cpu_dnnl_gemm_dtype(dt)) return false;
  ein_step s = {.kind = EIN_STEP_GEMM, .dst_dtype = EIN_DT_F32,
                .src_dtype = {dt, dt}, .alpha = 1,
                .gemm = {.m = n, .n = n, .k = n, .a_ms = n, .a_ks = 1,
                         .b_ks = n, .b_ns = 1, .c_ms = n, .c_ns = 1}};
  ein_plan_ir ir = {.nsteps = 1, .steps = &s};
  ein_error_rec err;
  ein_error_init(&err);
  ein_status st = ein_cpu_dnnl_run(&ir, NULL, 0, c, a, b,
                                   ein_cpu_threads_now(ein_cpu_threads()),
                                   &err);
  ein_error_clear(&err);
  return st == EIN_OK;
}

/* ---------------------------------------------------------- f32 GEMMs */

/* AVX-512F (cpuid leaf 7, subleaf 0, EBX bit 16): oneDNN's sgemm then
 * runs its avx512_core kernels. */
static bool cpu_has_avx512f(void) {
  unsigned a0, b0, c0, d0;
  return __get_cpuid_count(7, 0, &a0, &b0, &c0, &d0) && (b0 >> 16 & 1);
}

static struct {
  pthread_once_t once;
  bool ok;
} f32_gemm = {.once = PTHREAD_ONCE_INIT};

/* EINC_SGEMM=openblas keeps OpenBLAS (to compare the two), =onednn takes
 * oneDNN on any CPU (its AVX2 kernels: measured, not chosen). */
static void decide_f32_gemm(void) {
#ifndef _OPENMP
  /* einc without OpenMP cannot size oneDNN's team (set_threads), so a
   * child forked after oneDNN ran two threads would wait in libgomp for
   * the parent's (test_cpu_sgemm's child hung in the TSan build) */
  return;
#endif
  const char *pick = getenv("EINC_SGEMM");
  if (pick && strcmp(pick, "openblas") == 0) return;
  bool forced = pick && strcmp(pick, "onednn") == 0;
  if (!forced && !cpu_has_avx512f()) return;
  pthread_once(&lib.once, open_lib);
  f32_gemm.ok = lib.ok;
}

bool ein_cpu_dnnl_f32_gemm(void) {
  pthread_once(&f32_gemm.once, decide_f32_gemm);
  return f32_gemm.ok;
}

bool ein_cpu_dnnl_sgemm(const ein_gemm_call *g, float alpha, const float *a,
                        const float *b, float *c, int threads) {
  if (!ein_cpu_dnnl_f32_gemm()) return false;
  /* oneDNN's sgemm threads itself on the calling thread's OpenMP team
   * (one thread inside a parallel region or a batch split's thread) */
  int before = set_threads(threads);
  dnnl_status_t st = DNNL(dnnl_sgemm)(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N',
                                      g->m, g->n, g->k, alpha, a, g->lda, b,
                                      g->ldb, 0.0f, c, g->ldc);
  set_threads(before);
  if (st == dnnl_success) atomic_fetch_add(&sgemm_calls, 1);
  return st == dnnl_success;
}

#endif /* EIN_HAVE_DNNL_H */
