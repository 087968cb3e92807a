/*
 * kernel_resources.c - registers, spills, local and shared memory of the
 * generated kernels from ptxas' own report, and the occupancy they allow
 * (kernel_resources.h).
 *
 * A report block looks like this (CUDA 13; the same lines since CUDA 6):
 *   ptxas info    : Compiling entry function 'ein_main' for 'sm_80'
 *   ptxas info    : Function properties for ein_main
 *   ptxas         .     160 bytes stack frame, 160 bytes spill stores, ...
 *   ptxas info    : Used 32 registers, used 1 barriers, 160 bytes
 *                   cumulative stack size, 4224 bytes smem, 368 bytes cmem[0]
 * Figures ptxas leaves out (no smem, no stack) are 0.
 */
#include "kernel_resources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "nvrtc_compile.h"
#include "occupancy.h"

/* The number right before `suffix` in [lo, hi), or -1 when the suffix is
 * not there with digits before it. */
static long number_before(const char *lo, const char *hi, const char *suffix) {
  size_t n = strlen(suffix);
  for (const char *p = lo; p + n <= hi; p++) {
    if (memcmp(p, suffix, n) != 0)
      continue;
    const char *d = p;
    while (d > lo && d[-1] >= '0' && d[-1] <= '9')
      d--;
    if (d < p)
      return strtol(d, NULL, 10);
  }
  return -1;
}

static int or_zero(long v) { return v < 0 ? 0 : (int)v; }

bool ein_ptxas_report_parse(const char *log, const char *entry, int arch,
                            ein_kernel_resources *out) {
  char head[160];
  snprintf(head, sizeof head, "Compiling entry function '%s' for 'sm_%d",
           entry, arch);
  const char *lo = strstr(log, head);
  if (!lo)
    return false;
  lo += strlen(head);
  const char *hi = strstr(lo, "Compiling entry function");
  hi = hi ? hi : lo + strlen(lo);
  long regs = number_before(lo, hi, " registers");
  if (regs < 0)
    return false;
  *out = (ein_kernel_resources){
      .arch = arch,
      .registers = (int)regs,
      .barriers = or_zero(number_before(lo, hi, " barriers")),
      .stack_frame = or_zero(number_before(lo, hi, " bytes stack frame")),
      .spill_stores = or_zero(number_before(lo, hi, " bytes spill stores")),
      .spill_loads = or_zero(number_before(lo, hi, " bytes spill loads")),
      .local_bytes =
          or_zero(number_before(lo, hi, " bytes cumulative stack size")),
      .static_smem = or_zero(number_before(lo, hi, " bytes smem")),
  };
  if (out->local_bytes < out->stack_frame) /* older reports lack the sum */
    out->local_bytes = out->stack_frame;
  return true;
}

ein_status ein_kernel_resources_get(const ein_kernel_src *k, int arch,
                                    ein_kernel_resources *main,
                                    ein_kernel_resources *vec,
                                    ein_error_rec *err) {
  char *log = NULL;
  ein_status st = ein_nvrtc_compile_report(k->source, k->len, arch, &log, err);
  if (st)
    return st;
  const char *missing = NULL;
  if (!ein_ptxas_report_parse(log, "ein_main", arch, main))
    missing = "ein_main";
  else if (k->has_vec && !ein_ptxas_report_parse(log, "ein_vec", arch, vec))
    missing = "ein_vec";
  if (missing)
    st = ein_fail_backend(err,
                          "ptxas' -v report for sm_%d has no figures for %s "
                          "(its format changed?):\n%.1500s",
                          arch, missing, log);
  ein_free(log);
  return st;
}

int ein_kernel_resources_archs(int archs[4]) {
  static const int base[] = {80, 89, 90};
  int n = 0, list[64], count = 0;
  for (; n < 3; n++)
    archs[n] = base[n];
  ein_error_rec err;
  ein_error_init(&err);
  if (ein_nvrtc_archs(list, 64, &count, &err) == EIN_OK)
    for (int i = 0; i < count; i++)
      if (list[i] == 100)
        archs[n++] = 100;
  ein_error_clear(&err);
  return n;
}

/* ------------------------------------------------------------ report */

/* One launch of a report: an entry point of step `step`'s pass. */
typedef struct launch_row {
  int step, pass;
  const char *entry;
  const ein_kernel_src *k;
  const unsigned *grid;
  const ein_kernel_resources *res;
} launch_row;

static long long count3(const unsigned v[3]) {
  return (long long)v[0] * v[1] * v[2];
}

static void row_text(ein_strbuf *sb, const launch_row *r,
                     const ein_sm_limits *lim, const ein_occupancy *o) {
  const ein_kernel_resources *x = r->res;
  long long threads = count3(r->k->block), blocks = count3(r->grid);
  ein_strbuf_printf(sb,
                    "  %4d %4d %-8s sm_%-3d %4d %6d/%-6d %6d %7d+%-5u %7lld "
                    "%9d %8d %8.0f%% %-13s %8lld %7.2f\n",
                    r->step, r->pass, r->entry, x->arch, x->registers,
                    x->spill_stores, x->spill_loads, x->local_bytes,
                    x->static_smem, r->k->dynamic_smem, threads,
                    o->blocks_per_sm, o->warps_per_sm, 100 * o->fraction,
                    ein_occ_limiter_name(o->limiter), blocks,
                    ein_occupancy_waves(blocks, o->blocks_per_sm, lim->sms));
}

static void row_json(ein_strbuf *sb, const launch_row *r,
                     const ein_sm_limits *lim, const ein_occupancy *o) {
  const ein_kernel_resources *x = r->res;
  long long blocks = count3(r->grid);
  ein_strbuf_printf(
      sb,
      "{\"step\":%d,\"pass\":%d,\"entry\":\"%s\",\"arch\":\"sm_%d\","
      "\"registers\":%d,\"spill_store_bytes\":%d,\"spill_load_bytes\":%d,"
      "\"stack_frame_bytes\":%d,\"local_bytes\":%d,\"barriers\":%d,"
      "\"static_smem_bytes\":%d,\"dynamic_smem_bytes\":%u,"
      "\"threads_per_block\":%lld,\"grid_blocks\":%lld,"
      "\"blocks_per_sm\":%d,\"warps_per_sm\":%d,\"occupancy\":%.4f,"
      "\"limiter\":\"%s\",\"regs_per_warp_allocated\":%d,"
      "\"smem_per_block_allocated\":%d,\"waves\":%.4f,\"sms\":%d,"
      "\"gpu\":\"%s\"}",
      r->step, r->pass, r->entry, x->arch, x->registers, x->spill_stores,
      x->spill_loads, x->stack_frame, x->local_bytes, x->barriers,
      x->static_smem, r->k->dynamic_smem, count3(r->k->block), blocks,
      o->blocks_per_sm, o->warps_per_sm, o->fraction,
      ein_occ_limiter_name(o->limiter), o->regs_per_warp, o->smem_per_block,
      ein_occupancy_waves(blocks, o->blocks_per_sm, lim->sms), lim->sms,
      lim->example);
}

static void emit(ein_strbuf *sb, bool json, bool *first, const launch_row *r) {
  const ein_sm_limits *lim = ein_sm_limits_of(r->res->arch);
  if (!lim)
    return; /* the architectures asked for are all in the table */
  ein_occupancy o =
      ein_occupancy_compute(lim, (int)count3(r->k->block), r->res->registers,
                            r->res->static_smem, (int)r->k->dynamic_smem);
  if (json) {
    ein_strbuf_printf(sb, "%s", *first ? "" : ",");
    row_json(sb, r, lim, &o);
  } else {
    row_text(sb, r, lim, &o);
  }
  *first = false;
}

/* Both entry points of kernel k (step `step`, pass `pass`) on each
 * architecture: one compile per architecture. */
static ein_status report_kernel(const ein_kernel_src *k, int step, int pass,
                                const int *archs, int narchs, bool json,
                                bool *first, ein_strbuf *sb,
                                ein_error_rec *err) {
  for (int a = 0; a < narchs; a++) {
    ein_kernel_resources main, vec;
    ein_status st = ein_kernel_resources_get(k, archs[a], &main, &vec, err);
    if (st)
      return st;
    launch_row r = {step, pass, "ein_main", k, k->grid, &main};
    emit(sb, json, first, &r);
    if (k->has_vec) {
      r = (launch_row){step, pass, "ein_vec", k, k->grid_vec, &vec};
      emit(sb, json, first, &r);
    }
  }
  return EIN_OK;
}

ein_status ein_kernel_resources_report(const ein_cuda_program *prog, bool json,
                                       ein_strbuf *sb, ein_error_rec *err) {
  int archs[4], narchs = ein_kernel_resources_archs(archs);
  bool first = true;
  if (json)
    ein_strbuf_printf(sb, "[");
  else
    ein_strbuf_printf(
        sb, "kernel resources (ptxas -v through NVRTC; occupancy by the "
            "per-SM limits of each architecture; waves on its example GPU):\n"
            "  step pass entry    arch   regs spill st/ld  local "
            "smem st+dyn threads blocks/SM warps/SM occupancy limiter       "
            "   blocks   waves\n");
  ein_status st = EIN_OK;
  for (int i = 0; i < prog->nsteps && !st; i++) {
    const ein_cuda_step *cs = &prog->steps[i];
    if (cs->cublas || cs->kernel.kind == EIN_KERNEL_NONE)
      continue;
    st = report_kernel(&cs->kernel, i + 1, 1, archs, narchs, json, &first, sb,
                       err);
    if (!st && cs->finish.kind != EIN_KERNEL_NONE)
      st = report_kernel(&cs->finish, i + 1, 2, archs, narchs, json, &first,
                         sb, err);
  }
  if (json)
    ein_strbuf_printf(sb, "]");
  else if (first && !st)
    ein_strbuf_printf(sb, "  (no generated kernels: every step is a cuBLAS "
                          "call or empty)\n");
  return st;
}
