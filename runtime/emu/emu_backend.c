/*
 * emu_backend.c - the emulated CUDA device as a backend (backend.h).
 *
 * It runs exactly what the CUDA backend runs: the same CUDA program
 * (cuda_program.h: per step a cuBLAS call or a generated kernel, decided
 * by the planner's side without a device), with the kernels compiled for
 * the host and executed by the emulated device (emu_device.h: a block's
 * threads as fibers, real barriers and warp shuffles) and the cuBLAS calls
 * made against the reference cuBLAS (emu_blas.h) with the same arguments,
 * FP8 GEMMs against the reference cublasLtMatmul (emu_blaslt.h).
 * Its memory is host memory kept apart (kDLExtDev tensors from
 * ein_device_alloc): a host pointer handed to a kernel is an error, and
 * under ASan every out-of-bounds kernel access and every host read of
 * device memory is reported.
 *
 * A plan's kernels are compiled into one shared object on its first run
 * (cached on disk, so later processes load it); runs are synchronous.
 *
 * EINC_EMU_DEVICES=N (1 to 8; default 1) makes it N devices, to test
 * what spreads over the devices of a node (ein_options.devices): each an
 * id of its own and memory of its own. The same host memory underneath,
 * so each allocation keeps the device it was made on (emu_device.h), each
 * call makes its device current, and a kernel or cuBLAS call of one
 * device handed another's memory fails (copies may cross, as peer copies).
 *
 * EINC_EMU_SM=NN (a compute capability x 10, 50 to 120; default 90, a
 * Hopper) is the device's sm, read when it is opened: tests pretend an
 * older GPU with it (FP8 GEMMs need sm_89, fp8_eval.c).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "cuda_backend.h"
#include "cuda_program.h"
#include "emu_blas.h"
#include "emu_blaslt.h"
#include "emu_device.h"
#include "emu_profile.h"

/* A plan's program as the CUDA entry makes it (cuda_backend.h; its
 * kernel handles go unused here) and, once loaded, the module of its
 * kernels. */
typedef struct emu_program {
  ein_cuda_plan_program base; /* first: the CUDA entry's functions read it */
  pthread_mutex_t lock; /* guards the modules and index on first load */
  ein_emu_module *module;
  ein_emu_module *counting; /* the counting flavour, when counters are on */
  /* step i's kernel at index[2i], its split pass 2 at index[2i+1], as
   * indices into module; -1: none */
  int *index;
} emu_program;

typedef struct emu_backend {
  ein_backend base;
  pthread_mutex_t lock; /* guards the counters and the launches */
  ein_backend_stats stats;
  /* the last counting run's launches (EINC_EMU_COUNTERS=1) */
  ein_launch_counters *launches;
  size_t nlaunches, cap_launches;
  int device; /* made current on each call (ein_emu_set_device) */
} emu_backend;

/* ------------------------------------------------------------ program */

static void emu_program_free(void *program) {
  emu_program *p = program;
  if (!p) return;
  ein_emu_module_free(p->module);
  ein_emu_module_free(p->counting);
  ein_free(p->index);
  pthread_mutex_destroy(&p->lock);
  ein_cuda_plan_program_free(p);
}

static ein_status emu_prepare(const ein_plan_ir *plan, void **program,
                              ein_error_rec *err) {
  ein_status st = ein_cuda_plan_program_new(
      plan, sizeof(emu_program),
      "out of memory preparing an emulated-device plan", program, err);
  if (!st) pthread_mutex_init(&((emu_program *)*program)->lock, NULL);
  return st;
}

static void emu_describe(const ein_plan_ir *plan, const void *program,
                         ein_strbuf *sb) {
  const emu_program *p = program;
  ein_cuda_describe(plan, p->base.cuda, sb);
  ein_strbuf_printf(sb, "emu: the steps above run on the emulated device "
                        "(kernels compiled for the host, reference "
                        "cuBLAS)\n");
}

/* The sources of the program's kernels, each step's pass 1 then pass 2,
 * with their places in index (see emu_program). Returns how many. */
static int list_kernels(const ein_cuda_program *c, const char **src,
                        int *index) {
  int n = 0;
  for (int i = 0; i < c->nsteps; i++) {
    const ein_cuda_step *cs = &c->steps[i];
    const ein_kernel_src *k[2] = {&cs->kernel, &cs->finish};
    for (int j = 0; j < 2; j++) {
      bool kernel = !cs->cublas && k[j]->kind != EIN_KERNEL_NONE;
      index[2 * i + j] = kernel ? n : -1;
      if (kernel)
        src[n++] = k[j]->source;
    }
  }
  return n;
}

/* Counts a module load as the CUDA backend counts its kernel cache. */
static void count_load(emu_backend *eb, ein_status st,
                       const ein_emu_module *m, bool first) {
  bool disk = first && !st && ein_emu_module_from_disk(m);
  pthread_mutex_lock(&eb->lock);
  eb->stats.compiles += first && !st && !disk;
  eb->stats.disk_hits += disk;
  eb->stats.memory_hits += !first;
  pthread_mutex_unlock(&eb->lock);
}

/* Compiles the program's kernels into one module of the flavour asked
 * for (counting or plain) on first use. */
static ein_status load_module(emu_backend *eb, emu_program *p, bool counting,
                              ein_error_rec *err) {
  pthread_mutex_lock(&p->lock);
  ein_emu_module **slot = counting ? &p->counting : &p->module;
  bool first = !*slot;
  ein_status st = EIN_OK;
  if (first) {
    const ein_cuda_program *c = p->base.cuda;
    const char **src = ein_calloc(2 * (size_t)c->nsteps + 1, sizeof *src);
    int *index = ein_calloc(2 * (size_t)c->nsteps + 1, sizeof *index);
    if (!src || !index) {
      st = ein_fail_memory(err, "out of memory loading emulated kernels");
    } else {
      int n = list_kernels(c, src, index);
      st = ein_emu_module_load_ex(src, n, counting, slot, err);
    }
    ein_free(src);
    if (st || p->index) /* the other flavour listed the same indices */
      ein_free(index);
    else
      p->index = index;
  }
  count_load(eb, st, *slot, first);
  pthread_mutex_unlock(&p->lock);
  return st;
}

static int blas_type(ein_dtype dt) {
  switch (dt) {
  case EIN_DT_F16: return EIN_EMU_R_16F;
  case EIN_DT_BF16: return EIN_EMU_R_16BF;
  case EIN_DT_F64: return EIN_EMU_R_64F;
  case EIN_DT_C64: return EIN_EMU_C_32F;
  case EIN_DT_C128: return EIN_EMU_C_64F;
  default: return EIN_EMU_R_32F;
  }
}

/* The arguments of one cuBLAS call as the CUDA backend makes it. */
typedef struct blas_args {
  int atype, ctype, compute;
  float af[2], bf[2];   /* (re, im): complex GEMMs read both */
  double ad[2], bd[2];
  const void *alpha, *beta;
  int64_t asz, csz; /* element bytes of A/B and of C */
} blas_args;

static void blas_args_of(const ein_step *s, const ein_cublas_gemm *g,
                         blas_args *b) {
  b->atype = blas_type(g->ab_dtype);
  b->ctype = blas_type(g->c_dtype);
  b->compute = g->compute == EIN_GEMM_COMPUTE_64F ? EIN_EMU_COMPUTE_64F
               : g->compute == EIN_GEMM_COMPUTE_32F_TF32
                   ? EIN_EMU_COMPUTE_32F_FAST_TF32
                   : EIN_EMU_COMPUTE_32F;
  b->af[0] = (float)s->alpha;
  b->ad[0] = s->alpha;
  b->af[1] = b->bf[0] = b->bf[1] = 0;
  b->ad[1] = b->bd[0] = b->bd[1] = 0;
  bool f64 = b->compute == EIN_EMU_COMPUTE_64F;
  b->alpha = f64 ? (const void *)b->ad : (const void *)b->af;
  b->beta = f64 ? (const void *)b->bd : (const void *)b->bf;
  b->asz = (int64_t)ein_dtype_size(g->ab_dtype);
  b->csz = (int64_t)ein_dtype_size(g->c_dtype);
}

static ein_status blas_status(int r, const char *call, ein_error_rec *err) {
  if (r == EIN_EMU_BLAS_SUCCESS) return EIN_OK;
  return ein_fail_backend(err, "%s failed: %s (emulated cuBLAS)", call,
                          ein_emu_blas_status_name(r));
}

/* A cuBLASLt matrix layout: rows x cols, ld, batch of the call. */
static ein_emu_lt_layout lt_layout(ein_dtype dt, int64_t rows, int64_t cols,
                                   int64_t ld, const ein_cublas_gemm *g,
                                   int64_t stride) {
  int type = dt == EIN_DT_F8E4M3   ? EIN_EMU_R_8F_E4M3
             : dt == EIN_DT_F8E5M2 ? EIN_EMU_R_8F_E5M2
                                   : blas_type(dt);
  return (ein_emu_lt_layout){type, rows, cols, ld, (int)g->count, stride};
}

/* A cuBLAS call reaches only its own device's memory, as a kernel does
 * (emu_device.h: the device each allocation was made on). */
static ein_status own_operands(const char *call, const void *a, const void *b,
                               const void *c, ein_error_rec *err) {
  const void *ptr[3] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    int owner;
    ein_emu_where w = ein_emu_locate(ptr[i], 0, &owner);
    if (w == EIN_EMU_OWN) continue;
    if (w == EIN_EMU_HOST)
      return ein_fail_device(err, "emulated device: %s: its %c (%p) is not "
                             "device memory", call, "ABC"[i], ptr[i]);
    return ein_fail_device(err, "emulated device %d: %s: its %c (%p) is "
                           "memory of device %d: cuBLAS reaches only its own "
                           "device's memory", ein_emu_current_device(), call,
                           "ABC"[i], ptr[i], owner);
  }
  return EIN_OK;
}

/* An FP8 GEMM: one reference cublasLtMatmul, as the CUDA backend makes
 * it (TN; the scales read from the plan's inputs on the device). */
static ein_status run_lt(emu_backend *eb, const ein_step *s,
                         const ein_cublas_gemm *g, char *const *inputs,
                         char *c, const char *step_a, const char *step_b,
                         ein_error_rec *err) {
  ein_status st = ein_fp8_gemm_sm_check(eb->base.sm, err);
  if (st) return st;
  const char *a = g->a_is_step_a ? step_a : step_b;
  const char *b = g->a_is_step_a ? step_b : step_a;
  if ((st = own_operands("cublasLtMatmul", a, b, c, err))) return st;
  ein_emu_lt_desc desc = {EIN_EMU_COMPUTE_32F, EIN_EMU_R_32F, EIN_EMU_OP_T,
                          EIN_EMU_OP_N,
                          (const float *)(void *)inputs[g->scale_input[0]],
                          (const float *)(void *)inputs[g->scale_input[1]]};
  ein_emu_lt_layout la = lt_layout(g->ab_dtype, g->k, g->m, g->lda, g,
                                   g->stride_a),
                    lb = lt_layout(g->b_dtype, g->k, g->n, g->ldb, g,
                                   g->stride_b),
                    ld = lt_layout(g->c_dtype, g->m, g->n, g->ldc, g,
                                   g->stride_c);
  float alpha = (float)s->alpha, beta = 0;
  int r = ein_emu_lt_matmul(eb->base.sm, &desc, &alpha, a, &la, b, &lb, &beta,
                            c, &ld, c, &ld);
  if (r == EIN_EMU_BLAS_SUCCESS) {
    pthread_mutex_lock(&eb->lock);
    eb->stats.fp8_gemms++;
    pthread_mutex_unlock(&eb->lock);
  }
  return blas_status(r, "cublasLtMatmul", err);
}

/* Many outer iterations: one pointer-array call, as the CUDA backend. */
static ein_status gemm_pointer_array(const ein_cublas_gemm *g,
                                     const blas_args *b, char *c,
                                     const char *a, const char *bm,
                                     ein_error_rec *err) {
  int64_t total;
  const void **ptr = ein_cublas_pointer_arrays(g, c, a, bm, &total, err);
  if (!ptr) return err->pub.status;
  int r = ein_emu_gemm_batched(
      g->trans_a ? EIN_EMU_OP_T : EIN_EMU_OP_N,
      g->trans_b ? EIN_EMU_OP_T : EIN_EMU_OP_N, (int)g->m, (int)g->n,
      (int)g->k, b->alpha, ptr + total, b->atype, (int)g->lda,
      ptr + 2 * total, b->atype, (int)g->ldb, b->beta, (void *const *)ptr,
      b->ctype, (int)g->ldc, (int)total, b->compute);
  ein_free(ptr);
  return blas_status(r, "cublasGemmBatchedEx", err);
}

static ein_status run_gemm(const ein_step *s, const ein_cublas_gemm *g,
                           char *c, const char *step_a, const char *step_b,
                           ein_error_rec *err) {
  const char *a = g->a_is_step_a ? step_a : step_b;
  const char *bm = g->a_is_step_a ? step_b : step_a;
  ein_status st = own_operands("cublasGemmEx", a, bm, c, err);
  if (st) return st;
  blas_args b;
  blas_args_of(s, g, &b);
  if (ein_cublas_pointer_array(g))
    return gemm_pointer_array(g, &b, c, a, bm, err);
  int64_t outer = ein_loop_axes_volume(&g->loops);
  for (int64_t i = 0; i < outer; i++) {
    int64_t off[3];
    ein_loop_axes_offsets(&g->loops, i, off);
    int r = ein_emu_gemm_strided_batched(
        g->trans_a ? EIN_EMU_OP_T : EIN_EMU_OP_N,
        g->trans_b ? EIN_EMU_OP_T : EIN_EMU_OP_N, (int)g->m, (int)g->n,
        (int)g->k, b.alpha, a + off[1] * b.asz, b.atype, (int)g->lda,
        g->stride_a, bm + off[2] * b.asz, b.atype, (int)g->ldb, g->stride_b,
        b.beta, c + off[0] * b.csz, b.ctype, (int)g->ldc, g->stride_c,
        (int)g->count, b.compute);
    st = blas_status(r, "cublasGemmStridedBatchedEx", err);
    if (st) return st;
  }
  return EIN_OK;
}

/* ---------------------------------------------------------------- run */

/* What an emulated run's steps share. */
typedef struct emu_run_ctx {
  emu_backend *eb;
  emu_program *p;
  char *const *inputs; /* the FP8 GEMM's scales are among them */
  char *scratch;
  bool counting;       /* the counting flavour runs; launches recorded */
} emu_run_ctx;

/* Keeps a counted launch for the backend's launch_counters. */
static ein_status record_launch(emu_backend *eb, const ein_launch_counters *l,
                                ein_error_rec *err) {
  pthread_mutex_lock(&eb->lock);
  if (eb->nlaunches == eb->cap_launches) {
    size_t cap = eb->cap_launches ? 2 * eb->cap_launches : 16;
    ein_launch_counters *n = ein_realloc(eb->launches, cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&eb->lock);
      return ein_fail_memory(err, "out of memory keeping launch counters");
    }
    eb->launches = n;
    eb->cap_launches = cap;
  }
  eb->launches[eb->nlaunches++] = *l;
  pthread_mutex_unlock(&eb->lock);
  return EIN_OK;
}

/* Bytes any schedule of step s must read and write: its plan bytes, or
 * for a view copied into a caller's output (which the plan counts as 0)
 * its elements read once and written once. */
static double compulsory_bytes(const ein_step *s) {
  if (!s->view)
    return s->bytes_read + s->bytes_written;
  double n = 1;
  for (int i = 0; i < s->naxes; i++)
    n *= (double)s->axes[i].size;
  return n * (double)(ein_dtype_size(s->dst_dtype) +
                      ein_dtype_size(s->src_dtype[0]));
}

/* The same choice as the CUDA backend: the vector variant when every
 * pointer it takes is 16-byte aligned. Counted and recorded when the run
 * counts. */
static ein_status launch(emu_run_ctx *r, const ein_step *s, int step,
                         int pass, int index, const ein_kernel_src *k,
                         char *dst, const char *s0, const char *s1,
                         ein_error_rec *err) {
  bool vec = k->has_vec && ((uintptr_t)dst % 16) == 0 &&
             ((uintptr_t)s0 % 16) == 0 && ((uintptr_t)s1 % 16) == 0;
  const unsigned *grid = vec ? k->grid_vec : k->grid;
  if (!r->counting)
    return ein_emu_launch(r->p->module, index, vec, grid, k->block, dst, s0,
                          s1, err);
  ein_launch_counters l = {.step = step, .pass = pass, .vec = vec,
                           .kind = ein_kernel_kind_name(k->kind),
                           .compulsory_bytes = compulsory_bytes(s)};
  memcpy(l.grid, grid, sizeof l.grid);
  memcpy(l.block, k->block, sizeof l.block);
  ein_status st = ein_emu_launch_counted(r->p->counting, index, vec, grid,
                                         k->block, dst, s0, s1, &l.c, err);
  return st ? st : record_launch(r->eb, &l, err);
}

/* A step's kernel; a split reduction's pass 1 into the scratch buffer,
 * then its pass 2 from there into dst. */
static ein_status run_kernel(emu_run_ctx *r, const ein_step *s, int step,
                             const ein_cuda_step *cs, char *dst,
                             const char *s0, const char *s1,
                             ein_error_rec *err) {
  int first = r->p->index[2 * step], second = r->p->index[2 * step + 1];
  if (first < 0)
    return EIN_OK;
  if (second < 0)
    return launch(r, s, step, 1, first, &cs->kernel, dst, s0, s1, err);
  ein_status st =
      launch(r, s, step, 1, first, &cs->kernel, r->scratch, s0, s1, err);
  if (st)
    return st;
  return launch(r, s, step, 2, second, &cs->finish, dst, r->scratch, NULL,
                err);
}

static ein_status emu_step(void *ctx, int i, const ein_step *s, char *dst,
                           const char *src[2], ein_error_rec *err) {
  emu_run_ctx *r = ctx;
  const ein_cuda_step *cs = &r->p->base.cuda->steps[i];
  if (cs->cublas && cs->gemm.lt_fp8)
    return run_lt(r->eb, s, &cs->gemm, r->inputs, dst, src[0], src[1], err);
  return cs->cublas ? run_gemm(s, &cs->gemm, dst, src[0], src[1], err)
                    : run_kernel(r, s, i, cs, dst, src[0], src[1], err);
}

static ein_status emu_run(ein_backend *self, const ein_plan_ir *plan,
                          const void *program, char *const *inputs,
                          char *output, const ein_step_marks *marks,
                          ein_error_rec *err) {
  emu_program *p = (emu_program *)program;
  if (!p || p->base.cuda->nsteps != plan->nsteps)
    return ein_fail_internal(err, "emu backend: the plan has no CUDA program");
  emu_backend *eb = (emu_backend *)self;
  ein_emu_set_device(eb->device);
  bool counting = ein_emu_counting();
  if (counting) { /* launch_counters describes the last counting run */
    pthread_mutex_lock(&eb->lock);
    eb->nlaunches = 0;
    pthread_mutex_unlock(&eb->lock);
  }
  ein_status st = load_module(eb, p, counting, err);
  if (st) return st;
  void *ws = NULL, *scratch = NULL;
  if (plan->workspace_bytes > 0 &&
      (st = ein_emu_malloc(&ws, (size_t)plan->workspace_bytes, err)))
    return st;
  /* split reductions' partials: device memory, so kernels accept it */
  if (p->base.cuda->scratch_bytes > 0 &&
      (st = ein_emu_malloc(&scratch, (size_t)p->base.cuda->scratch_bytes, err))) {
    ein_emu_free(ws);
    return st;
  }
  ein_emu_device_begin();
  emu_run_ctx r = {.eb = eb, .p = p, .inputs = inputs, .scratch = scratch,
                   .counting = counting};
  st = ein_run_steps(plan, inputs, output, ws, marks, emu_step, &r, err);
  ein_emu_device_end();
  ein_emu_free(scratch);
  ein_emu_free(ws);
  return st;
}

/* ------------------------------------------------------------ memory */

static ein_status emu_alloc(ein_backend *self, size_t bytes, void **ptr,
                            ein_error_rec *err) {
  ein_emu_set_device(((emu_backend *)self)->device);
  return ein_emu_malloc(ptr, bytes, err);
}

static void emu_free(ein_backend *self, void *ptr) {
  (void)self;
  ein_emu_free(ptr);
}

static ein_status emu_copy(ein_backend *self, void *dst, const void *src,
                           size_t bytes, ein_copy_dir dir,
                           ein_error_rec *err) {
  (void)self;
  return ein_emu_copy(dst, src, bytes,
                      dir == EIN_COPY_TO_DEVICE ? EIN_EMU_H2D : EIN_EMU_D2H,
                      err);
}

static void emu_stats(ein_backend *self, ein_backend_stats *out) {
  emu_backend *eb = (emu_backend *)self;
  pthread_mutex_lock(&eb->lock);
  *out = eb->stats;
  pthread_mutex_unlock(&eb->lock);
}

static size_t emu_launch_counters(ein_backend *self, ein_launch_counters *out,
                                  size_t cap) {
  emu_backend *eb = (emu_backend *)self;
  pthread_mutex_lock(&eb->lock);
  size_t n = eb->nlaunches;
  if (out && cap)
    memcpy(out, eb->launches, (n < cap ? n : cap) * sizeof *out);
  pthread_mutex_unlock(&eb->lock);
  return n;
}

/* ---------------------------------------------------------- lifecycle */

static void emu_destroy(ein_backend *self) {
  emu_backend *eb = (emu_backend *)self;
  pthread_mutex_destroy(&eb->lock);
  ein_free(eb->launches);
  ein_free(eb);
}

/* EINC_EMU_DEVICES, read on each call (tests set it per process). */
static int emu_device_count(void) {
  const char *v = getenv("EINC_EMU_DEVICES");
  long n = v && *v ? strtol(v, NULL, 10) : 1;
  return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

/* EINC_EMU_SM, read when a device is opened; 90 when unset or out of
 * range. */
static int emu_sm(void) {
  const char *v = getenv("EINC_EMU_SM");
  long sm = v && *v ? strtol(v, NULL, 10) : 90;
  return sm < 50 || sm > 120 ? 90 : (int)sm;
}

static ein_backend *emu_open(int device, ein_error_rec *err) {
  int count = emu_device_count();
  if (device < 0 || device >= count) {
    ein_fail_device(err,
                    "the emulated device has %d device%s (EINC_EMU_DEVICES), "
                    "0 to %d, not %d",
                    count, count == 1 ? "" : "s", count - 1, device);
    return NULL;
  }
  emu_backend *eb = ein_calloc(1, sizeof *eb);
  if (!eb) {
    ein_fail_memory(err, "out of memory creating the emulated device");
    return NULL;
  }
  pthread_mutex_init(&eb->lock, NULL);
  eb->base = (ein_backend){.entry = &ein_emu_entry,
                           .run = emu_run,
                           .alloc = emu_alloc,
                           .free = emu_free,
                           .copy = emu_copy,
                           .free_memory = ein_host_free_memory,
                           .stats = emu_stats,
                           .launch_counters = emu_launch_counters,
                           .destroy = emu_destroy,
                           .sm = emu_sm()};
  eb->device = device;
  return &eb->base;
}

static bool emu_memory(DLDeviceType t) { return t == kDLExtDev; }

const ein_backend_entry ein_emu_entry = {
    .name = "emu",
    .kind = EIN_BACKEND_EMU,
    .memory = kDLExtDev,
    .memory_name = "emulated-device memory",
    .accepts = emu_memory,
    .caps = ein_cuda_caps, /* it plans exactly as the CUDA backend */
    .prepare = emu_prepare,
    .program_free = emu_program_free,
    .describe = emu_describe,
    .describe_step_json = ein_cuda_plan_describe_step_json,
    .cuda_program = ein_cuda_plan_cuda,
    .device_count = emu_device_count,
    .open = emu_open,
};

/* ---------------------------------------------- profile (emu_profile.h) */

/* The last element (+1) a step's operand k (0: dst) reaches, in
 * elements from its buffer's start. */
static int64_t ref_extent(const ein_step *s, int k) {
  const ein_ref *r = k == 0 ? &s->dst : &s->src[k - 1];
  int64_t last = r->offset;
  for (int i = 0; i < s->naxes; i++) {
    int64_t st = s->axes[i].stride[k];
    last += (s->axes[i].size - 1) * (st < 0 ? -st : st);
  }
  return last + 1;
}

/* Bytes of buffer `buf` the program's kernels reach (0: none). */
static int64_t buffer_extent(const ein_plan_ir *plan,
                             const ein_cuda_program *c, int buf) {
  int64_t most = 0;
  for (int i = 0; i < plan->nsteps; i++) {
    const ein_cuda_step *cs = &c->steps[i];
    if (cs->cublas || cs->kernel.kind == EIN_KERNEL_NONE)
      continue;
    ein_step loop = plan->steps[i];
    ein_loop_axis axes[EIN_MAX_DIMS + 3];
    if (loop.kind == EIN_STEP_GEMM) /* a direct contraction kernel */
      ein_gemm_as_loop(&plan->steps[i], &loop, axes);
    for (int k = 0; k <= loop.nsrc; k++) {
      int b = k == 0 ? loop.dst.buffer : loop.src[k - 1].buffer;
      ein_dtype dt = k == 0 ? loop.dst_dtype : loop.src_dtype[k - 1];
      int64_t bytes = ref_extent(&loop, k) * (int64_t)ein_dtype_size(dt);
      if (b == buf && bytes > most)
        most = bytes;
    }
  }
  return most;
}

/* The run's memory: inputs and output as large as the kernels reach, the
 * workspace, the split reductions' scratch; freed by free_profile_memory. */
typedef struct profile_memory {
  char **inputs;
  char *output;
  void *ws, *scratch;
  int ninputs;
} profile_memory;

static void free_profile_memory(profile_memory *m) {
  for (int i = 0; m->inputs && i < m->ninputs; i++)
    ein_emu_free(m->inputs[i]);
  ein_free(m->inputs);
  ein_emu_free(m->output);
  ein_emu_free(m->ws);
  ein_emu_free(m->scratch);
}

static ein_status alloc_profile_memory(const ein_plan_ir *plan,
                                       const ein_cuda_program *c,
                                       profile_memory *m, ein_error_rec *err) {
  memset(m, 0, sizeof *m);
  m->ninputs = plan->ninputs;
  m->inputs = ein_calloc((size_t)plan->ninputs + 1, sizeof *m->inputs);
  if (!m->inputs)
    return ein_fail_memory(err, "out of memory profiling a plan");
  ein_status st = EIN_OK;
  for (int b = 0; b < plan->nbuffers && !st; b++) {
    const ein_plan_buffer *pb = &plan->buffers[b];
    size_t bytes = (size_t)buffer_extent(plan, c, b);
    if (pb->kind == EIN_BUF_INPUT)
      st = ein_emu_malloc((void **)&m->inputs[pb->input], bytes, err);
    else if (pb->kind == EIN_BUF_OUTPUT)
      st = ein_emu_malloc((void **)&m->output, bytes, err);
  }
  if (!st)
    st = ein_emu_malloc(&m->ws, (size_t)plan->workspace_bytes, err);
  if (!st)
    st = ein_emu_malloc(&m->scratch, (size_t)c->scratch_bytes, err);
  if (st)
    free_profile_memory(m);
  return st;
}

/* Every kernel step of the program, counted into r->eb's launches. */
static ein_status profile_steps(const ein_plan_ir *plan, emu_run_ctx *r,
                                const profile_memory *m, ein_error_rec *err) {
  ein_status st = EIN_OK;
  ein_emu_device_begin();
  for (int i = 0; i < plan->nsteps && !st; i++) {
    const ein_cuda_step *cs = &r->p->base.cuda->steps[i];
    if (cs->cublas || cs->kernel.kind == EIN_KERNEL_NONE)
      continue;
    const ein_step *s = &plan->steps[i];
    const char *src[2];
    char *dst = ein_step_operands(plan, s, m->inputs, m->output, m->ws, src);
    st = run_kernel(r, s, i, cs, dst, src[0], src[1], err);
  }
  ein_emu_device_end();
  return st;
}

ein_status ein_emu_profile(const ein_plan_ir *plan, ein_launch_counters **out,
                           size_t *n, ein_error_rec *err) {
  *out = NULL;
  *n = 0;
  void *program;
  ein_status st = emu_prepare(plan, &program, err);
  if (st)
    return st;
  emu_program *p = program;
  emu_backend eb = {.base = {.entry = &ein_emu_entry}};
  pthread_mutex_init(&eb.lock, NULL);
  profile_memory m = {0};
  st = load_module(&eb, p, true, err);
  if (!st)
    st = alloc_profile_memory(plan, p->base.cuda, &m, err);
  if (!st) {
    emu_run_ctx r = {.eb = &eb, .p = p, .scratch = m.scratch,
                     .counting = true};
    const char *e = getenv("EINC_EMU_SAMPLE_BLOCKS");
    ein_emu_sample_set(e && *e ? strtoull(e, NULL, 10) : 0);
    st = profile_steps(plan, &r, &m, err);
    ein_emu_sample_set(0);
    free_profile_memory(&m);
  }
  if (!st) {
    *out = eb.launches;
    *n = eb.nlaunches;
  } else {
    ein_free(eb.launches);
  }
  pthread_mutex_destroy(&eb.lock);
  emu_program_free(p);
  return st;
}
