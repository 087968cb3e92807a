/*
 * test_roofline_sectors.c - the per-plan roofline's bytes in 32-byte
 * sectors (cost.c, ein_cost_sector_bytes; docs/design.md, "Sector bytes
 * in the roofline"), worked by hand and against the sectors the emulated
 * device counts when it runs the same plan's kernels (ein_emu_profile).
 *
 * Cases (f32, planned for the emulated device, whose program is the CUDA
 * backend's): a diagonal (a view: its copy reads one element a sector), a
 * column of a row-major matrix times a vector (a map whose first source
 * is 1200 bytes a step), a stride-2 read (8 bytes an element: the
 * sectors are shared), a transpose and a sum over a column-major matrix's
 * rows (contiguous: their element bytes unchanged), rows of 3 elements
 * 64 bytes apart (a sector a row).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cost.h"
#include "ctx_internal.h"
#include "emu_profile.h"
#include "harness.h"
#include "plan.h"

static ein_error_rec err;

typedef struct rcase {
  const char *name, *expr;
  int ninputs, ndim[2];
  int64_t shape[2][2], strides[2][2]; /* strides[k][0] == 0: C-contiguous */
  double want_sector_bytes, want_element_bytes;
} rcase;

static ein_plan *plan_of(ein_ctx *ctx, const rcase *c) {
  DLTensor t[2];
  const DLTensor *in[2];
  for (int k = 0; k < c->ninputs; k++) {
    t[k] = (DLTensor){.device = {kDLExtDev, 0}, .ndim = c->ndim[k],
                      .dtype = ein_dtype_to_dl(EIN_DT_F32),
                      .shape = (int64_t *)c->shape[k],
                      .strides = c->strides[k][0] ? (int64_t *)c->strides[k]
                                                  : NULL};
    in[k] = &t[k];
  }
  ein_options o = {.backend = EIN_BACKEND_EMU};
  ein_plan *plan = NULL;
  ein_status st = ein_plan_create(ctx, c->expr, in, c->ninputs, NULL, &o,
                                  &plan);
  CHECK(st == EIN_OK, "plan %s: %s", c->name, ein_last_error(ctx)->message);
  return st ? NULL : plan;
}

static double plan_sector_bytes(const ein_plan_ir *ir, double *elem) {
  double b = 0;
  *elem = 0;
  for (int i = 0; i < ir->nsteps; i++) {
    b += ir->steps[i].sector_bytes;
    *elem += ir->steps[i].bytes_read + ir->steps[i].bytes_written;
  }
  return b;
}

/* What the device counted: every request's sectors, loads and stores. */
static double counted_bytes(const ein_plan_ir *ir) {
  ein_launch_counters *l = NULL;
  size_t n = 0;
  ein_error_clear(&err);
  ein_status st = ein_emu_profile(ir, &l, &n, &err);
  CHECK(st == EIN_OK, "profile: %s", err.message);
  double b = 0;
  for (size_t i = 0; !st && i < n; i++)
    b += 32.0 * (double)(l[i].c.ld_sectors + l[i].c.st_sectors);
  ein_free(l);
  return b;
}

/* The roofline on a CUDA model prices the sectors, on a CPU one (the same
 * figures, backend CPU) the element bytes. */
static void roofline(const ein_plan_ir *ir, const rcase *c) {
  const ein_device_model *h100 = ein_device_model_find("h100");
  ein_device_model cpu = *h100;
  cpu.backend = EIN_BACKEND_CPU;
  double bw = ein_cost_bandwidth(h100), gpu = 0, host = 0;
  for (int i = 0; i < ir->nsteps; i++) {
    gpu += ein_cost_step_roofline(ir, &ir->steps[i], h100);
    host += ein_cost_step_roofline(ir, &ir->steps[i], &cpu);
  }
  double elem = c->want_element_bytes;
  CHECK(fabs(gpu - c->want_sector_bytes / bw) <= 1e-9 * gpu &&
            fabs(host - elem / bw) <= 1e-9 * host,
        "%s: roofline %.4g s on h100 (want %.4g), %.4g s on a CPU model "
        "(want %.4g)", c->name, gpu, c->want_sector_bytes / bw, host,
        elem / bw);
}

static void check_case(ein_ctx *ctx, const rcase *c) {
  ein_plan *plan = plan_of(ctx, c);
  if (!plan) return;
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  double elem, sectors = plan_sector_bytes(ir, &elem);
  if (ir->view.is_view) elem = c->want_element_bytes; /* plan bytes: 0 */
  CHECK(sectors == c->want_sector_bytes && elem == c->want_element_bytes,
        "%s: %.0f sector bytes (want %.0f), %.0f element bytes (want %.0f)",
        c->name, sectors, c->want_sector_bytes, elem,
        c->want_element_bytes);
  roofline(ir, c);
  double counted = counted_bytes(ir);
  double ratio = counted / sectors;
  CHECK(ratio >= 1 / 1.25 && ratio <= 1.25,
        "%s: %.0f bytes counted on the emulated device, %.0f priced "
        "(%.3gx; within 1.25x wanted)", c->name, counted, sectors, ratio);
  printf("%-12s priced %8.0f B (element bytes %8.0f), counted %8.0f B, "
         "counted/priced %.3f\n", c->name, sectors, elem, counted, ratio);
  ein_plan_destroy(plan);
}

int main(void) {
  char dir[] = "/tmp/einc-test-roofline-sectors-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("EINC_CACHE_DIR", dir, 1);
  ein_error_init(&err);
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  /* n = 256 elements; f32 */
  const rcase cases[] = {
      /* (i, i) is 257 elements from (i+1, i+1): a sector each read, the
       * output's 4 bytes written contiguously */
      {"diagonal", "i i -> i", 1, {2}, {{256, 256}}, {{0}},
       256 * (32 + 4), 256 * (4 + 4)},
      /* column 0 of a 256x300 row-major matrix (1200 bytes a step) times
       * a contiguous vector: 32 + 4 read, 4 written an element */
      {"column", "i, i -> i", 2, {1, 1}, {{256}, {256}}, {{300}, {0}},
       256 * (32 + 4 + 4), 256 * (4 + 4 + 4)},
      /* every other element: 8 bytes a sector's share an element */
      {"stride2", "i, i -> i", 2, {1, 1}, {{256}, {256}}, {{2}, {0}},
       256 * (8 + 4 + 4), 256 * (4 + 4 + 4)},
      /* rows of 3 elements (12 bytes) 64 bytes apart: a sector a row */
      {"runs_of_3", "i j, i j -> i j", 2, {2, 2}, {{256, 3}, {256, 3}},
       {{16, 1}, {0}}, 256 * 32 + 2 * 768 * 4, 3 * 768 * 4},
      /* tiled: both sides along their contiguous axis */
      {"transpose", "i j -> j i", 1, {2}, {{96, 160}}, {{0}},
       2 * 96 * 160 * 4, 2 * 96 * 160 * 4},
      /* a column-major 256x8 summed over j: read along i, contiguous */
      {"colmajor", "i j -> i", 1, {2}, {{256, 8}}, {{1, 256}},
       256 * 8 * 4 + 256 * 4, 256 * 8 * 4 + 256 * 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_case(ctx, &cases[i]);
  ein_ctx_destroy(ctx);
  ein_error_clear(&err);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return test_summary("roofline_sectors");
}
