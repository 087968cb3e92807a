/*
 * backend.h - the interface every backend implements (CPU, CUDA, the
 * emulated device), and the table that names them.
 *
 * Two levels, as ggml's backend registry and backend interface:
 *   ein_backend_entry  one per kind of backend, static, needs no device:
 *                      where its tensors live, the caps the planner plans
 *                      with, how a plan becomes the backend's program (so
 *                      CUDA plans are made and shown without a GPU), how
 *                      that program is described, and how to open a device;
 *   ein_backend        one opened device (what the context caches): run a
 *                      plan with its program, device memory, synchronise.
 * The planner decides dtypes, accumulators and kernel kinds (plan.h,
 * cuda_program.h); a backend executes what it is given and decides
 * nothing that another backend would have to decide again.
 *
 * Code above this header (src/api, the CLI) finds backends only through
 * ein_backend_find / ein_backend_for_memory and names none of them.
 */
#ifndef EIN_BACKEND_H
#define EIN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "ein.h"
#include "emu_counters.h"
#include "error.h"
#include "plan.h"
#include "strbuf.h"

typedef struct ein_backend ein_backend;

/* Cache counters of a backend that compiles kernels (zeros otherwise). */
typedef struct ein_backend_stats {
  unsigned long long memory_hits, disk_hits, compiles;
  /* cublasLtMatmul FP8 GEMMs run (CUDA, the emulated device): how a test
   * tells the FP8 path from the decode path (fp8_eval.c). */
  unsigned long long fp8_gemms;
} ein_backend_stats;

/* One kernel launch of a backend's last run with counters on (the
 * emulated device with EINC_EMU_COUNTERS=1): which step and pass, the
 * entry point and geometry, the step's compulsory bytes (its plan bytes
 * read and written: what any schedule must move), and what the launch
 * did to memory. */
typedef struct ein_launch_counters {
  int step;          /* 0-based plan step */
  int pass;          /* 1, or 2 for a split reduction's second pass */
  bool vec;          /* the ein_vec variant ran */
  const char *kind;  /* "map", "transpose", ... */
  unsigned grid[3], block[3];
  double compulsory_bytes;
  ein_emu_counters c;
} ein_launch_counters;

typedef struct ein_backend_entry {
  const char *name;      /* "cpu", "cuda", "emu" */
  ein_backend_kind kind; /* its value in the public enum */
  DLDeviceType memory;   /* where its tensors live */
  const char *memory_name; /* that memory in messages: "host memory" */
  /* Whether a tensor on DLPack device type t is this backend's memory. */
  bool (*accepts)(DLDeviceType t);
  /* What the planner may ask of it; static, no device needed. */
  const ein_backend_caps *(*caps)(void);
  /* The backend's program for a plan (NULL: it runs the plan IR itself).
   * Pure: no device. EIN_ERR_NO_MEMORY or EIN_ERR_LIMIT, message on err. */
  ein_status (*prepare)(const ein_plan_ir *plan, void **program,
                        ein_error_rec *err);
  void (*program_free)(void *program);
  /* Appends what the program runs per step to a plan report; optional. */
  void (*describe)(const ein_plan_ir *plan, const void *program,
                   ein_strbuf *sb);
  /* The same for the JSON report: appends members (each followed by ',')
   * to the object of step `step` (ein_report_hook); optional. */
  void (*describe_step_json)(const ein_plan_ir *plan, const void *program,
                             int step, ein_strbuf *sb);
  /* The CUDA program inside a program, for backends that run one (CUDA
   * and the emulated device): `einc cuda-src` and the tests read it. */
  const struct ein_cuda_program *(*cuda_program)(const void *program);
  /* Devices usable now (0 when the backend cannot run here). */
  int (*device_count)(void);
  /* Opens device `device`; NULL with the reason on err (EIN_ERR_DEVICE
   * names what is missing). */
  ein_backend *(*open)(int device, ein_error_rec *err);
} ein_backend_entry;

typedef enum ein_copy_dir {
  EIN_COPY_TO_DEVICE,
  EIN_COPY_TO_HOST
} ein_copy_dir;

/* Marks around the steps of one run (ein_plan_execute_marked): a backend
 * calls ein_step_mark(marks, i) right before it starts step i, and
 * ein_step_mark(marks, nsteps) after the last; marks may be NULL. */
typedef struct ein_step_marks {
  ein_step_mark_fn fn;
  void *arg;
} ein_step_marks;

static inline void ein_step_mark(const ein_step_marks *marks, int step) {
  if (marks) marks->fn(marks->arg, step);
}

struct ein_backend {
  const ein_backend_entry *entry;
  /* The device's compute capability x 10 (89 for 8.9; the emulated
   * device's is EINC_EMU_SM's); 0 for the CPU. */
  int sm;
  /* Runs every step of plan. inputs[i] is operand i's first element (in
   * the backend's memory); `program` is entry->prepare's result; marks
   * (may be NULL) are called around each step. */
  ein_status (*run)(ein_backend *self, const ein_plan_ir *plan,
                    const void *program, char *const *inputs, char *output,
                    const ein_step_marks *marks, ein_error_rec *err);
  /* Device memory: bytes may be 0 (a valid, unique pointer comes back). */
  ein_status (*alloc)(ein_backend *self, size_t bytes, void **ptr,
                      ein_error_rec *err);
  void (*free)(ein_backend *self, void *ptr);
  /* Memory for one run's temporaries, ordered on the backend's current
   * stream: work queued after temp_alloc may use it, and temp_free gives
   * it back once the work queued before the free has finished (CUDA's
   * stream-ordered pool: no device-wide synchronisation per buffer).
   * Optional; through ein_backend_temp_alloc/free, which fall back to
   * alloc and free. */
  ein_status (*temp_alloc)(ein_backend *self, size_t bytes, void **ptr,
                           ein_error_rec *err);
  void (*temp_free)(ein_backend *self, void *ptr);
  /* Synchronous copy between host memory and the backend's memory. */
  ein_status (*copy)(ein_backend *self, void *dst, const void *src,
                     size_t bytes, ein_copy_dir dir, ein_error_rec *err);
  /* Waits for queued work and reports its errors; NULL: runs are
   * synchronous. */
  ein_status (*sync)(ein_backend *self, ein_error_rec *err);
  /* Queues later runs on a caller's stream (NULL: own); optional. */
  void (*set_stream)(ein_backend *self, void *stream);
  /* The bytes the device could allocate now (EIN_MEMORY_FREE). */
  ein_status (*free_memory)(ein_backend *self, int64_t *bytes,
                            ein_error_rec *err);
  /* Kernel cache counters; optional. */
  void (*stats)(ein_backend *self, ein_backend_stats *out);
  /* The kernel launches of the last run that counted memory accesses:
   * up to cap copied to out, their number returned; optional (the
   * emulated device). */
  size_t (*launch_counters)(ein_backend *self, ein_launch_counters *out,
                            size_t cap);
  void (*destroy)(ein_backend *self);
};

/* The entry of a public backend kind (never AUTO), or NULL. */
const ein_backend_entry *ein_backend_find(ein_backend_kind kind);

/* The entry whose memory holds tensors of DLPack device type t, or NULL
 * (host memory maps to the CPU backend). */
const ein_backend_entry *ein_backend_for_memory(DLDeviceType t);

/* For backends of one device, 0 (the host's, the emulated one): their
 * device_count, and the start of their open: `size` zeroed bytes (the
 * backend's struct, its ein_backend first) for device 0; NULL otherwise,
 * with err set from the caller's messages, `not_one` (a format of the
 * device asked for, %d) or `oom`. */
int ein_backend_one_device(void);
void *ein_backend_new_single(int device, size_t size, const char *not_one,
                             const char *oom, ein_error_rec *err);

/* A run's temporary memory: the backend's temp_alloc, else alloc. */
ein_status ein_backend_temp_alloc(ein_backend *be, size_t bytes, void **ptr,
                                  ein_error_rec *err);
void ein_backend_temp_free(ein_backend *be, void *ptr);

/* The host's available memory in bytes (/proc/meminfo's MemAvailable,
 * else free pages): the free_memory of backends in host memory. */
ein_status ein_host_free_memory(ein_backend *self, int64_t *bytes,
                                ein_error_rec *err);

/* The first byte of plan buffer `buf` given the run's pointers. */
static inline char *ein_buffer_base(const ein_plan_ir *plan, int buf,
                                    char *const *inputs, char *output,
                                    char *workspace) {
  const ein_plan_buffer *b = &plan->buffers[buf];
  switch (b->kind) {
  case EIN_BUF_INPUT: return inputs[b->input];
  case EIN_BUF_OUTPUT: return output;
  case EIN_BUF_TEMP: return workspace + b->offset;
  }
  return NULL;
}

/* Where step s writes and what it reads, given the run's pointers: each
 * operand's buffer base plus its element offset. src[k] for k >= nsrc is
 * NULL. Every backend's run loop starts a step with this. */
static inline char *ein_step_operands(const ein_plan_ir *plan,
                                      const ein_step *s, char *const *inputs,
                                      char *output, char *workspace,
                                      const char *src[2]) {
  src[0] = src[1] = NULL;
  for (int k = 0; k < s->nsrc; k++)
    src[k] = ein_buffer_base(plan, s->src[k].buffer, inputs, output,
                             workspace) +
             s->src[k].offset * (int64_t)ein_dtype_size(s->src_dtype[k]);
  return ein_buffer_base(plan, s->dst.buffer, inputs, output, workspace) +
         s->dst.offset * (int64_t)ein_dtype_size(s->dst_dtype);
}

/* One step of a run as a backend carries it out: step i of the plan,
 * writing dst from src[0..nsrc) (ein_step_operands). */
typedef ein_status (*ein_step_fn)(void *ctx, int i, const ein_step *s,
                                  char *dst, const char *src[2],
                                  ein_error_rec *err);

/* Every backend's run loop: each step marked, its operands found and run
 * by `run`, the end marked once all succeeded; the first failure stops
 * it and is returned. */
ein_status ein_run_steps(const ein_plan_ir *plan, char *const *inputs,
                         char *output, char *workspace,
                         const ein_step_marks *marks, ein_step_fn run,
                         void *ctx, ein_error_rec *err);

/* FP8 GEMMs (cuBLASLt's FP8 rows) need compute capability 8.9 (Ada) or
 * later. */
enum { EIN_FP8_GEMM_MIN_SM = 89 };

/* EIN_OK when a device of compute capability sm (x 10) runs FP8 GEMMs,
 * else EIN_ERR_DEVICE naming its sm and the minimum (the CUDA backend and
 * the emulated device refuse an FP8 GEMM step with it). */
ein_status ein_fp8_gemm_sm_check(int sm, ein_error_rec *err);

/* The table's entries; each backend's file defines its own. */
extern const ein_backend_entry ein_cpu_entry, ein_cuda_entry, ein_emu_entry;

#endif
