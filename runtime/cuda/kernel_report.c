/*
 * kernel_report.c - the per-kernel time model of a plan (kernel_model.h)
 * beside its roofline prediction (cost.h): the kernels run once on the
 * emulated device with their accesses counted (emu_profile.h), compiled
 * with NVRTC for the device model's architecture for their occupancy
 * (kernel_resources.h), priced with the device model's bandwidth, rates
 * and launch time. cuBLAS steps keep the roofline's price (the device
 * model's GEMM rates), as the plan's prediction does.
 */
#include "kernel_resources.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "dtype.h"
#include "emu_profile.h"
#include "kernel_model.h"
#include "occupancy.h"

/* One launch priced. */
typedef struct model_row {
  const ein_launch_counters *l;
  ein_kernel_resources res;
  ein_occupancy occ;
  ein_kernel_model km;
} model_row;

static ein_status model_launch(const ein_plan_ir *plan,
                               const ein_cuda_program *prog,
                               const ein_device_model *m,
                               const ein_sm_limits *lim, model_row *row,
                               ein_error_rec *err) {
  const ein_launch_counters *l = row->l;
  const ein_cuda_step *cs = &prog->steps[l->step];
  const ein_kernel_src *k = l->pass == 1 ? &cs->kernel : &cs->finish;
  ein_kernel_resources main, vec;
  ein_status st = ein_kernel_resources_get(k, lim->sm, &main, &vec, err);
  if (st)
    return st;
  row->res = l->vec ? vec : main;
  int threads = (int)(l->block[0] * l->block[1] * l->block[2]);
  row->occ = ein_occupancy_compute(lim, threads, row->res.registers,
                                   row->res.static_smem,
                                   (int)k->dynamic_smem);
  const ein_step *s = &plan->steps[l->step];
  ein_dtype dt = s->nsrc ? s->src_dtype[0] : s->dst_dtype;
  ein_kernel_model_in in = {
      .traffic_bytes = 32.0 * (double)(l->c.ld_sectors + l->c.st_sectors),
      .distinct_bytes = 32.0 * (double)(l->c.ld_unique_sectors +
                                        l->c.st_unique_sectors),
      .block_load_bytes = 32.0 * (double)l->c.ld_block_sectors,
      .store_bytes = 32.0 * (double)l->c.st_sectors,
      .shared_per_block = row->res.static_smem + (int)k->dynamic_smem,
      .requests = (double)(l->c.ld_requests + l->c.st_requests),
      .warp_basic_blocks = (double)l->c.warp_basic_blocks,
      .shared_wavefronts =
          (double)(l->c.sh_ld_wavefronts + l->c.sh_st_wavefronts),
      .flops = l->pass == 1 ? s->flops : 0, /* pass 2 only combines */
      .blocks = (long long)l->c.blocks,
      .threads = threads,
      .blocks_per_sm = row->occ.blocks_per_sm,
      .lim = lim,
      .bytes_per_s = ein_cost_bandwidth(m),
      .flops_per_s = ein_kernel_model_rate(m, dt == EIN_DT_F64 ||
                                                  dt == EIN_DT_C128) /
                     (ein_dtype_is_complex(dt) ? 4 : 1),
      .launch_seconds = m->step_seconds};
  row->km = ein_kernel_model_time(&in);
  return EIN_OK;
}

static double per(uint64_t a, uint64_t b) { return b ? (double)a / b : 0; }

/* The longest of a launch's times but its arithmetic's. */
static double longest(const ein_kernel_model *k) {
  double t[] = {k->memory_seconds, k->l2_seconds, k->l1_seconds,
                k->shared_seconds, k->issue_seconds}, m = 0;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    m = t[i] > m ? t[i] : m;
  return m;
}

static void row_text(ein_strbuf *sb, const model_row *r) {
  const ein_launch_counters *l = r->l;
  const ein_emu_counters *c = &l->c;
  uint64_t req = c->ld_requests + c->st_requests;
  ein_strbuf_printf(sb,
                    "  %4d %4d %-8s %8llu %4d %4.0f%% %7.2f %6.2f %6.2f "
                    "%5.2f %10.0f %5.0f%% %9.2f %9.2f %9.2f  %s\n",
                    l->step + 1, l->pass, l->vec ? "ein_vec" : "ein_main",
                    (unsigned long long)l->c.blocks, r->res.registers,
                    100 * r->occ.fraction, r->km.waves,
                    per(c->ld_sectors + c->st_sectors, req),
                    per(ein_emu_ideal_sectors(c, 0) +
                            ein_emu_ideal_sectors(c, 1), req),
                    per(c->sh_ld_wavefronts + c->sh_st_wavefronts,
                        c->sh_ld_requests + c->sh_st_requests),
                    32.0 * (double)(l->c.ld_sectors + l->c.st_sectors),
                    100 * r->km.memory_efficiency, 1e6 * longest(&r->km),
                    1e6 * r->km.compute_seconds, 1e6 * r->km.seconds,
                    r->km.bound);
}

/* The raw counts behind a launch's figures (global requests, their
 * sectors and the ideal; shared-memory requests and wavefronts), so that
 * a stored copy (tests/gpu_model_figures.tsv) can compare ratios. */
static void counts_json(ein_strbuf *sb, const ein_emu_counters *c) {
  ein_strbuf_printf(
      sb,
      "\"requests\":%llu,\"sectors\":%llu,\"ideal_sectors\":%llu,"
      "\"request_bytes\":%llu,\"shared_requests\":%llu,"
      "\"shared_wavefronts\":%llu,\"shared_ideal\":%llu,"
      "\"warp_basic_blocks\":%llu,",
      (unsigned long long)(c->ld_requests + c->st_requests),
      (unsigned long long)(c->ld_sectors + c->st_sectors),
      (unsigned long long)(ein_emu_ideal_sectors(c, 0) +
                           ein_emu_ideal_sectors(c, 1)),
      (unsigned long long)(c->ld_bytes + c->st_bytes),
      (unsigned long long)(c->sh_ld_requests + c->sh_st_requests),
      (unsigned long long)(c->sh_ld_wavefronts + c->sh_st_wavefronts),
      (unsigned long long)(c->sh_ld_ideal + c->sh_st_ideal),
      (unsigned long long)c->warp_basic_blocks);
}

static void row_json(ein_strbuf *sb, const model_row *r, bool first) {
  const ein_launch_counters *l = r->l;
  ein_strbuf_printf(
      sb,
      "%s{\"step\":%d,\"pass\":%d,\"entry\":\"%s\",\"kind\":\"%s\","
      "\"blocks\":%llu,\"threads_per_block\":%u,\"registers\":%d,"
      "\"spill_store_bytes\":%d,\"spill_load_bytes\":%d,",
      first ? "" : ",", l->step + 1, l->pass, l->vec ? "ein_vec" : "ein_main",
      l->kind, (unsigned long long)l->c.blocks,
      l->block[0] * l->block[1] * l->block[2], r->res.registers,
      r->res.spill_stores, r->res.spill_loads);
  counts_json(sb, &l->c);
  ein_strbuf_printf(
      sb,
      "\"blocks_per_sm\":%d,\"occupancy\":%.4f,\"limiter\":\"%s\","
      "\"waves\":%.4f,\"traffic_bytes\":%.0f,\"distinct_bytes\":%.0f,"
      "\"memory_efficiency\":%.4f,\"memory_seconds\":%.4g,"
      "\"l2_seconds\":%.4g,\"l1_seconds\":%.4g,\"l2_bytes\":%.0f,"
      "\"block_load_bytes\":%.0f,\"shared_seconds\":%.4g,"
      "\"issue_seconds\":%.4g,"
      "\"compute_seconds\":%.4g,\"seconds\":%.4g,\"floor_seconds\":%.4g,"
      "\"bound\":\"%s\"}",
      r->occ.blocks_per_sm, r->occ.fraction,
      ein_occ_limiter_name(r->occ.limiter), r->km.waves,
      32.0 * (double)(l->c.ld_sectors + l->c.st_sectors),
      32.0 * (double)(l->c.ld_unique_sectors + l->c.st_unique_sectors),
      r->km.memory_efficiency, r->km.memory_seconds, r->km.l2_seconds,
      r->km.l1_seconds, r->km.l2_bytes, 32.0 * (double)l->c.ld_block_sectors,
      r->km.shared_seconds, r->km.issue_seconds, r->km.compute_seconds,
      r->km.seconds, r->km.floor_seconds, r->km.bound);
}

/* Each step at the model (its launches; cuBLAS and empty steps at the
 * roofline's price) into model[], the roofline's into roof[]. */
static void step_times(const ein_plan_ir *plan, const ein_cuda_program *prog,
                       const ein_device_model *m, const model_row *rows,
                       size_t n, double *model, double *roof) {
  for (int i = 0; i < plan->nsteps; i++) {
    roof[i] = ein_cost_step_seconds(plan, &plan->steps[i], m);
    model[i] = prog->steps[i].cublas ? roof[i] : 0;
  }
  for (size_t r = 0; r < n; r++)
    model[rows[r].l->step] += rows[r].km.seconds;
}

/* The plan's total by the model: the roofline's total with its steps'
 * times replaced (slices, their sums and the call kept as it prices
 * them). */
static double model_total(const ein_plan_ir *plan, const ein_device_model *m,
                          const double *model, const double *roof) {
  double slices = plan->slicing.n ? plan->slicing.count : 1, d = 0;
  for (int i = 0; i < plan->nsteps; i++)
    d += model[i] - roof[i];
  return ein_cost_predicted_seconds(plan, m) + slices * d;
}

static void write_report(const ein_plan_ir *plan, const ein_cuda_program *prog,
                         const ein_device_model *m, const ein_sm_limits *lim,
                         const model_row *rows, size_t n, bool json,
                         double *model, double *roof, ein_strbuf *sb) {
  step_times(plan, prog, m, rows, n, model, roof);
  double total = model_total(plan, m, model, roof);
  double roofline = ein_cost_predicted_seconds(plan, m);
  if (json) {
    ein_strbuf_printf(sb, "{\"device\":\"%s\",\"arch\":\"sm_%d\",\"sms\":%d,"
                          "\"launches\":[", m->name, lim->sm, lim->sms);
    for (size_t r = 0; r < n; r++)
      row_json(sb, &rows[r], r == 0);
    ein_strbuf_printf(sb, "],\"steps\":[");
    for (int i = 0; i < plan->nsteps; i++)
      ein_strbuf_printf(sb, "%s{\"step\":%d,\"model_seconds\":%.4g,"
                            "\"roofline_seconds\":%.4g}", i ? "," : "",
                        i + 1, model[i], roof[i]);
    ein_strbuf_printf(sb, "],\"predicted_seconds\":%.4g,"
                          "\"roofline_seconds\":%.4g}", total, roofline);
    return;
  }
  for (size_t r = 0; r < n; r++)
    row_text(sb, &rows[r]);
  for (int i = 0; i < plan->nsteps; i++)
    ein_strbuf_printf(sb, "  step %d: %.2f us by the kernel model, %.2f us "
                          "by the roofline%s\n", i + 1, 1e6 * model[i],
                      1e6 * roof[i],
                      prog->steps[i].cublas ? " (cuBLAS: the roofline's)" : "");
  ein_strbuf_printf(sb, "predicted    %.2f us by the kernel model, %.2f us "
                        "by the roofline, on %s\n", 1e6 * total,
                    1e6 * roofline, m->name);
}

static void header(ein_strbuf *sb, const ein_device_model *m,
                   const ein_sm_limits *lim) {
  ein_strbuf_printf(
      sb,
      "kernel model on %s (sm_%d, %d SMs): launch %.1f us + max(distinct "
      "sectors x 32 / %.3g TB/s, the L1's misses and the stores x 32 / "
      "the L2's, sectors x 32 / the L1's, shared "
      "wavefronts / SM clocks, warp instructions / issue slots, FLOPs / "
      "the CUDA cores' rate), each derated "
      "by the warps per SM and the waves (docs/design.md, \"The kernel "
      "model checked against the H100\", \"An L1 term\"):\n"
      "(sec/req: global sectors a request, ideal: the fewest its bytes "
      "fit, or the distinct sectors where more; wf/req: shared "
      "wavefronts a request; mem us: the longest of DRAM, L2, L1, shared "
      "and issue)\n"
      "  step pass entry      blocks regs  occ   waves sec/req  ideal "
      "wf/req  traffic B   eff    mem us    cmp us  model us  bound\n",
      m->name, lim->sm, lim->sms, 1e6 * m->step_seconds,
      ein_cost_bandwidth(m) / 1e12);
}

ein_status ein_kernel_model_report(const ein_plan_ir *plan,
                                   const ein_cuda_program *prog,
                                   const ein_device_model *m, bool json,
                                   ein_strbuf *sb, ein_error_rec *err) {
  const ein_sm_limits *lim = ein_sm_limits_of(ein_kernel_model_sm(m->name));
  ein_launch_counters *l = NULL;
  size_t n = 0;
  ein_status st = ein_emu_profile(plan, &l, &n, err);
  model_row *rows = st ? NULL : ein_calloc(n + 1, sizeof *rows);
  double *times = st ? NULL : ein_calloc(2 * (size_t)plan->nsteps + 1,
                                         sizeof *times);
  if (!st && (!rows || !times))
    st = ein_fail_memory(err, "out of memory modelling a plan's kernels");
  for (size_t r = 0; r < n && !st; r++) {
    rows[r].l = &l[r];
    st = model_launch(plan, prog, m, lim, &rows[r], err);
  }
  if (!st) {
    if (!json)
      header(sb, m, lim);
    write_report(plan, prog, m, lim, rows, n, json, times,
                 times + plan->nsteps, sb);
  }
  ein_free(times);
  ein_free(rows);
  ein_free(l);
  return st;
}
