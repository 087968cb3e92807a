/*
 * cmd_bench.c - `einc bench EXPR SHAPE...`: times one case and sets it
 * against the floor measured in the same run.
 *
 * Inputs hold random values in [-1, 1) (small integers for integer
 * dtypes); when they would fit twice in the device's last-level cache (L2
 * on a GPU), several copies are made and the runs rotate through them so no
 * run reads warm data. After warm-up runs (which also compile any kernel),
 * each run is timed alone: CUDA events around ein_plan_execute on the GPU,
 * the wall clock on the host. The report is the median.
 *
 * floor = max(plan FLOPs / GEMM rate, compulsory bytes / copy bandwidth),
 * both rates measured here: cuBLAS GEMM 8192^3 in the case's dtype and a
 * 1 GiB device-to-device copy on a GPU; on the host the CPU backend's own
 * measurements (runtime/cpu/cpu_rates.h, the device model's): its GEMM in
 * the case's dtype (up to 2048^3) and its threaded copy. With --steps, the
 * plan's GEMM steps alone give a second yardstick for GEMM-bound plans:
 * the BLAS time of exactly the plan's GEMMs, which small or thin GEMMs
 * cannot bring to the large GEMM's rate.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "bench_device.h"
#include "commands.h"
#include "cost.h"
#include "inspect.h"
#include "device_models.h"
#include "dtype.h"
#include "kernel_resources.h"
#include "plan.h"

void cmd_bench_help(void) {
  puts(
      "usage: einc bench EXPR SHAPE|FILE.npy... [--dtype T] [--backend B]\n"
      "                  [--runs N] [--warmup N] [--no-floor] [--steps]\n"
      "                  [--json] [--path P] [--memory-limit B]\n"
      "                  [--counters [--device M]]\n"
      "                  [-D NAME=SIZE]... [--reduce R] [--numpy]\n"
      "\n"
      "Times EXPR on random inputs of the given shapes and reports the\n"
      "median time, TFLOP/s, GB/s of compulsory traffic (inputs read once,\n"
      "output written once) and the ratio to the floor measured in the same\n"
      "run: max(FLOPs / GEMM rate, bytes / copy bandwidth), with cuBLAS GEMM\n"
      "8192^3 and a 1 GiB copy on a GPU, and on the host the CPU backend's\n"
      "GEMM (up to 2048^3) and threaded copy, measured as for the device\n"
      "model. Inputs that fit twice in the last-level cache are\n"
      "copied and rotated between runs. Then the device model's predicted\n"
      "time (einc plan's) beside the measured one, and MFU: the FLOPs the\n"
      "expression needs per second over the data-sheet peak of the device\n"
      "and dtype (the CPU's measured GEMM rate on the host, and when it was\n"
      "measured; a run faster than it raises it, in the cache too), with\n"
      "HFU where the plan does more FLOPs than that.\n"
      "\n"
      "  FILE.npy      in place of a shape: a .npy file's shape (and its\n"
      "                dtype, the first file's, without --dtype); the data\n"
      "                is not read: inputs are random all the same\n"
      "  --dtype T     f32 (default), f64, f16, bf16, c64, c128, integers\n"
      "  --backend B   auto (default: cuda when a GPU exists, else cpu)\n"
      "  --runs N      timed runs (default 20), each timed alone\n"
      "  --warmup N    untimed runs first (default 3; they compile kernels)\n"
      "  --no-floor    skip the floor measurements\n"
      "  --steps       also time each plan step (as many runs again, with a\n"
      "                mark around each step: the host clock on the CPU,\n"
      "                CUDA events on a GPU) beside its roofline time at\n"
      "                the floor's rates and its share of the steps' total;\n"
      "                then the GEMM steps' time alone (the BLAS calls of\n"
      "                exactly the plan's GEMMs) and einc/GEMMs\n"
      "  --json        one JSON object instead of the text report\n"
      "  --counters    with --backend emu, whose times mean nothing: no\n"
      "                timing; each generated kernel runs once on the\n"
      "                emulated device with its memory accesses counted\n"
      "                (sectors a request against the ideal, shared\n"
      "                wavefronts, basic blocks issued) and is priced by\n"
      "                the per-kernel model beside the roofline (as `einc\n"
      "                plan --kernel-model`; EINC_EMU_SAMPLE_BLOCKS=N counts\n"
      "                about N blocks a launch, scaled, for large cases)\n"
      "  --device M    the device model --counters prices with (h100)\n"
      "  --path P      the contraction order to take instead of searching,\n"
      "                in opt_einsum's linear form: '[(0, 1), (0, 1)]'\n"
      "  --slice A,B   run the plan slice by slice over the named axes\n"
      "                (A:N: A in N chunks)\n"
      "  --memory-limit B  the bytes one intermediate may take (512M; 'free':\n"
      "                a third of the device's free memory), slicing where\n"
      "                no order keeps within it, as for `einc plan`\n"
      "  --plan-time S, --seed N, --objective O  the order search's budget,\n"
      "                seed and objective, as for `einc plan`\n"
      CLI_HELP_TAIL
      "  einc bench 'b h i d, b h j d -> b h i j' 8x16x2048x128 "
      "8x16x2048x128 --dtype bf16");
}

typedef struct bench_opts {
  bool retype;     /* --dtype given */
  ein_dtype dtype; /* the case's dtype */
  int runs, warmup;
  bool json, floor, steps;
  cli_common *common;
  bool counters;      /* --counters: the emulated device's door */
  const char *device; /* --device: the model --counters prices with */
} bench_opts;

static bool parse_count(const char *opt, const char *v, int lo, int *out) {
  char *end;
  long n = strtol(v, &end, 10);
  if (*end || end == v || n < lo || n > 100000) {
    cli_errorf("%s takes a count from %d to 100000, not '%.40s'", opt, lo,
               v);
    return false;
  }
  *out = (int)n;
  return true;
}

/* bench's own options. */
static int bench_option(int argc, char **argv, int *i, void *state) {
  bench_opts *bo = state;
  const char *arg = argv[*i];
  if (strcmp(arg, "--json") == 0) return bo->json = true, 1;
  if (strcmp(arg, "--no-floor") == 0) return bo->floor = false, 1;
  if (strcmp(arg, "--steps") == 0) return bo->steps = true, 1;
  if (strcmp(arg, "--counters") == 0) return bo->counters = true, 1;
  if (cli_is_option(arg, "--device"))
    return (bo->device = cli_option_value(argc, argv, i)) ? 1 : -1;
  bool backend = cli_is_option(arg, "--backend");
  bool runs = cli_is_option(arg, "--runs");
  bool warmup = cli_is_option(arg, "--warmup");
  if (!backend && !runs && !warmup && !cli_is_option(arg, "--dtype"))
    return 0;
  const char *v = cli_option_value(argc, argv, i);
  if (!v) return -1;
  if (backend)
    return cli_parse_backend(v, &bo->common->options.backend) ? 1 : -1;
  if (runs) return parse_count("--runs", v, 1, &bo->runs) ? 1 : -1;
  if (warmup) return parse_count("--warmup", v, 0, &bo->warmup) ? 1 : -1;
  bo->retype = true;
  return cli_parse_dtype(v, &bo->dtype) ? 1 : -1;
}

typedef struct bench_run {
  ein_ctx *ctx;
  const ein_plan *plan;
  int ninputs, copies;
  DLTensor (*inputs)[CLI_MAX_OPERANDS]; /* [copy][operand] */
  DLTensor *output;
} bench_run;

static bool run_marked(void *arg, int run, ein_step_mark_fn mark,
                       void *mark_arg) {
  bench_run *br = arg;
  const DLTensor *ins[CLI_MAX_OPERANDS];
  for (int i = 0; i < br->ninputs; i++)
    ins[i] = &br->inputs[run % br->copies][i];
  ein_status st = ein_plan_execute_marked(br->ctx, br->plan, ins, br->ninputs,
                                          br->output, mark, mark_arg);
  if (st) cli_print_error(ein_last_error(br->ctx));
  return st == EIN_OK;
}

static bool run_once(void *arg, int run) {
  bench_run *br = arg;
  const DLTensor *ins[CLI_MAX_OPERANDS];
  for (int i = 0; i < br->ninputs; i++)
    ins[i] = &br->inputs[run % br->copies][i];
  ein_status st =
      ein_plan_execute(br->ctx, br->plan, ins, br->ninputs, br->output);
  if (st) cli_print_error(ein_last_error(br->ctx));
  return st == EIN_OK;
}

/* What one benchmark measured. */
typedef struct bench_result {
  double median_ms, min_ms, max_ms, plan_ms, first_ms;
  double flops, min_bytes;
  double gemm_rate, copy_rate; /* 0 when not measured */
  bool sectors; /* steps' bytes in 32-byte sectors (a GPU's; cost.h) */
  int copies;
  int nsteps;      /* --steps: the plan's steps, */
  double *step_ms; /* the median time of each (owned by bench_state) */
} bench_result;

/* A time in milliseconds in the unit that keeps it readable: "850 ns",
 * "12.5 µs", "3.20 ms", "1.50 s". */
static const char *time_text(char *buf, size_t cap, double ms) {
  static const struct { double scale; const char *unit; } units[] = {
      {1e6, "ns"}, {1e3, "\xc2\xb5s"}, {1, "ms"}, {1e-3, "s"}};
  int u = 0;
  while (u < 3 && ms * units[u].scale >= 1000) u++;
  snprintf(buf, cap, "%.3g %s", ms * units[u].scale, units[u].unit);
  return buf;
}

/* A step's roofline time at the floor's rates (0 when not measured). */
static double step_predicted_ms(const ein_step *s, const bench_result *r) {
  double c = r->gemm_rate > 0 ? s->flops / r->gemm_rate : 0;
  double m = r->copy_rate > 0
                 ? ein_cost_step_bytes(s, r->sectors) / r->copy_rate
                 : 0;
  return fmax(c, m) * 1e3;
}

static double steps_total_ms(const bench_result *r) {
  double t = 0;
  for (int i = 0; i < r->nsteps; i++) t += r->step_ms[i];
  return t;
}

/* The plan's GEMM steps alone: the sum of their median times and their
 * count. A GEMM step is nothing but the BLAS calls (cuBLAS on a GPU) for
 * its batch, so this is the library's own time for exactly the plan's
 * GEMMs (their M, N, K, batch, transposes and threads), against which
 * the whole plan's time is set. The ratio reported is
 * all steps over the GEMM steps in the same marked runs, so the noise
 * between the timed and the marked runs does not enter it. */
static double gemm_steps_ms(const ein_plan_ir *ir, const bench_result *r,
                            int *count) {
  double t = 0;
  *count = 0;
  for (int i = 0; i < r->nsteps; i++)
    if (ir->steps[i].kind == EIN_STEP_GEMM) {
      t += r->step_ms[i];
      ++*count;
    }
  return t;
}

/* --steps in the text report: one line per step, the slowest to blame. */
static void report_steps_text(const ein_plan_ir *ir, const bench_result *r,
                              int runs) {
  double total = steps_total_ms(r);
  char a[32], b[32];
  printf("steps    median of %d marked runs, %s in all; predicted: the "
         "roofline at the floor's rates\n",
         runs, time_text(a, sizeof a, total));
  printf("  %-4s %-22s %12s %12s %7s\n", "step", "kind", "measured",
         "predicted", "share");
  for (int i = 0; i < r->nsteps; i++) {
    const ein_step *s = &ir->steps[i];
    char kind[48];
    snprintf(kind, sizeof kind, "%s (%s)", ein_step_name(s),
             ein_step_role_name(s->role));
    double pred = step_predicted_ms(s, r);
    /* 'µ' is two bytes and one column: pad by hand */
    time_text(a, sizeof a, r->step_ms[i]);
    if (pred > 0) time_text(b, sizeof b, pred); else snprintf(b, sizeof b, "-");
    printf("  %-4d %-22s %*s %*s %6.1f%%\n", i + 1, kind,
           12 + (strstr(a, "\xc2\xb5") ? 1 : 0), a,
           12 + (strstr(b, "\xc2\xb5") ? 1 : 0), b,
           total > 0 ? 100.0 * r->step_ms[i] / total : 0.0);
  }
  int ngemm;
  double gemm = gemm_steps_ms(ir, r, &ngemm);
  if (ngemm > 0)
    printf("GEMMs    %s in the %d GEMM step%s alone; einc/GEMMs %.3f "
           "(all steps over them, same runs)\n",
           time_text(a, sizeof a, gemm), ngemm, ngemm == 1 ? "" : "s",
           gemm > 0 ? total / gemm : 0.0);
}

/* --steps in the JSON report: the "steps" member, after a comma. */
static void report_steps_json(const ein_plan_ir *ir, const bench_result *r,
                              int runs) {
  double total = steps_total_ms(r);
  printf(",\"steps_runs\":%d,\"steps_ms\":%.6g,\"steps\":[", runs, total);
  for (int i = 0; i < r->nsteps; i++) {
    const ein_step *s = &ir->steps[i];
    double pred = step_predicted_ms(s, r);
    printf("%s{\"step\":%d,\"kind\":\"%s\",\"role\":\"%s\",\"ms\":%.6g,",
           i ? "," : "", i + 1, ein_step_name(s), ein_step_role_name(s->role),
           r->step_ms[i]);
    if (pred > 0)
      printf("\"predicted_ms\":%.6g,", pred);
    else
      printf("\"predicted_ms\":null,");
    printf("\"share\":%.6g}", total > 0 ? r->step_ms[i] / total : 0.0);
  }
  printf("]");
  int ngemm;
  double gemm = gemm_steps_ms(ir, r, &ngemm);
  printf(",\"gemm_steps\":%d", ngemm);
  if (ngemm > 0 && gemm > 0)
    printf(",\"gemm_ms\":%.6g,\"gemm_ratio\":%.4g", gemm, total / gemm);
  else
    printf(",\"gemm_ms\":null,\"gemm_ratio\":null");
}

/* What the device model says of the run: the predicted time, and the
 * achieved FLOP/s against the data-sheet peak (MFU; HFU where the plan
 * does more FLOPs than the expression needs). */
typedef struct bench_model {
  bool have;
  bool raised; /* this run raised the measured peak (see raise_peak) */
  ein_device_model m;
  double predicted_ms, peak, mfu, hfu, model_flops;
} bench_model;

/* The peak the bench's GEMM floor bounds from below: the floor ran in
 * the case's dtype where the host has a GEMM for it, else in f32 (f16,
 * bf16 and integers are computed in f32), and a half dtype's peak is
 * never below f32's (a plan converts where its own GEMM is slower). */
static ein_peak_kind floor_kind(ein_dtype dt) {
  if (dt == EIN_DT_F64) return EIN_PEAK_F64;
  if (dt == EIN_DT_BF16) return EIN_PEAK_BF16;
  if (dt == EIN_DT_F16) return EIN_PEAK_F16;
  return EIN_PEAK_F32;
}

/* The machine just ran this fast, so a measured peak below it is wrong
 * (a peak measured under load once made MFU read 199%): the case's
 * best run (the FLOPs the plan did) and the GEMM floor raise the "cpu"
 * model's peak, in the cache too. A data sheet's peak is not touched (a
 * GPU's sheet is its upper bound). */
static bool raise_peak(const ein_plan *plan, const bench_result *r,
                       ein_dtype dt, ein_device_model *m) {
  if (strcmp(m->name, "cpu") != 0) return false;
  bool raised = false;
  if (r->min_ms > 0)
    raised = ein_cpu_model_raise(m, ein_plan_peak_kind(plan),
                                 r->flops / (r->min_ms * 1e-3));
  if (r->gemm_rate > 0)
    raised = ein_cpu_model_raise(m, floor_kind(dt), r->gemm_rate) ||
             raised;
  return raised;
}

/* The model of the device the bench ran on ("cpu", or "cuda": the GPU). */
static bench_model model_of_run(const ein_plan *plan, const bench_result *r,
                                ein_dtype dt) {
  bench_model bm = {0};
  const char *name = ein_plan_backend(plan) == EIN_BACKEND_CPU ? "cpu" : "cuda";
  if (ein_device_model_get(name, &bm.m) != EIN_OK) return bm;
  bm.have = true;
  bm.raised = raise_peak(plan, r, dt, &bm.m);
  double s = r->median_ms * 1e-3;
  bm.predicted_ms = ein_plan_predicted_seconds(plan, &bm.m) * 1e3;
  bm.peak = ein_plan_peak_flops(plan, &bm.m);
  bm.mfu = ein_plan_mfu(plan, s, &bm.m);
  bm.hfu = ein_plan_hfu(plan, s, &bm.m);
  bm.model_flops = ein_plan_unsliced_flops(plan);
  return bm;
}

/* "2026-11-29 01:02 UTC", or "unknown" for 0 (an entry older than the
 * times). */
static const char *when_text(char *buf, size_t cap, double unix_s) {
  time_t t = (time_t)unix_s;
  struct tm tm;
  if (unix_s <= 0 || !gmtime_r(&t, &tm) ||
      strftime(buf, cap, "%Y-%m-%d %H:%M UTC", &tm) == 0)
    snprintf(buf, cap, "unknown");
  return buf;
}

/* Where MFU's peak comes from: "data sheet, dense", or a measurement and
 * when it was taken (or raised by this run). */
static void peak_source_text(const bench_model *bm, ein_peak_kind kind,
                             char *buf, size_t cap) {
  char when[40];
  if (bm->m.measured[kind] != bm->peak) {
    snprintf(buf, cap, "data sheet, dense");
    return;
  }
  snprintf(buf, cap, "measured peak, %s %s: no data sheet",
           bm->raised ? "raised to this run's rate" : "measured",
           when_text(when, sizeof when, bm->m.measured_at[kind]));
}

static void report_model_text(const ein_plan *plan, const bench_result *r,
                              const bench_model *bm) {
  if (!bm->have) return;
  char a[32], src[128];
  ein_peak_kind pk = ein_plan_peak_kind(plan);
  const char *kind = ein_peak_kind_name(pk);
  printf("model    predicted %s on %s (measured/predicted %.3g)\n",
         time_text(a, sizeof a, bm->predicted_ms), bm->m.name,
         bm->predicted_ms > 0 ? r->median_ms / bm->predicted_ms : 0.0);
  peak_source_text(bm, pk, src, sizeof src);
  printf("MFU      %.3g%% of %s %.4g TFLOP/s (%s)", 100 * bm->mfu, kind,
         bm->peak * 1e-12, src);
  if (r->flops != bm->model_flops)
    printf("; HFU %.3g%% (the plan does %.4g FLOPs, the expression needs "
           "%.4g)",
           100 * bm->hfu, r->flops, bm->model_flops);
  printf("\n");
}

static void report_model_json(const ein_plan *plan, const bench_model *bm) {
  if (!bm->have) return;
  ein_peak_kind pk = ein_plan_peak_kind(plan);
  char when[40];
  printf(",\"device_model\":\"%s\",\"predicted_ms\":%.6g,"
         "\"peak_kind\":\"%s\",\"peak_flops\":%.6g,\"model_flops\":%.6g,"
         "\"mfu\":%.6g,\"hfu\":%.6g",
         bm->m.name, bm->predicted_ms, ein_peak_kind_name(pk), bm->peak,
         bm->model_flops, bm->mfu, bm->hfu);
  if (bm->m.measured[pk] == bm->peak)
    printf(",\"peak_measured_at\":\"%s\",\"peak_raised\":%s",
           when_text(when, sizeof when, bm->m.measured_at[pk]),
           bm->raised ? "true" : "false");
}

static void report(const char *expr, const bench_opts *bo,
                   const bench_device *dev, const ein_plan *plan,
                   const bench_result *r) {
  bench_model bm = model_of_run(plan, r, bo->dtype);
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  double fl_c = r->gemm_rate > 0 ? r->flops / r->gemm_rate * 1e3 : 0;
  double fl_m = r->copy_rate > 0 ? r->min_bytes / r->copy_rate * 1e3 : 0;
  double floor_ms = fmax(fl_c, fl_m);
  const char *bound = fl_c > fl_m ? "compute" : "memory";
  double tflops = r->flops / (r->median_ms * 1e-3) * 1e-12;
  double gbs = r->min_bytes / (r->median_ms * 1e-3) * 1e-9;
  const char *dt = ein_dtype_name(bo->dtype);
  if (bo->json) {
    printf("{\"expression\":\"");
    for (const char *c = expr; *c; c++)
      printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
    printf("\",\"dtype\":\"%s\",\"device\":\"%s\",\"device_name\":\"%s\","
           "\"runs\":%d,\"warmup\":%d,\"input_copies\":%d,"
           "\"ms\":%.6g,\"ms_min\":%.6g,\"ms_max\":%.6g,"
           "\"plan_ms\":%.6g,\"first_run_ms\":%.6g,"
           "\"flops\":%.6g,\"min_bytes\":%.6g,\"tflops\":%.6g,\"gbs\":%.6g",
           dt, dev->name, dev->description, bo->runs, bo->warmup, r->copies,
           r->median_ms, r->min_ms, r->max_ms, r->plan_ms, r->first_ms,
           r->flops, r->min_bytes, tflops, gbs);
    if (floor_ms > 0)
      printf(",\"gemm_tflops\":%.6g,\"copy_gbs\":%.6g,\"floor_ms\":%.6g,"
             "\"floor_bound\":\"%s\",\"floor_ratio\":%.4g",
             r->gemm_rate * 1e-12, r->copy_rate * 1e-9, floor_ms, bound,
             r->median_ms / floor_ms);
    report_model_json(plan, &bm);
    if (r->step_ms) report_steps_json(ir, r, bo->runs);
    printf("}\n");
    return;
  }
  printf("case     %s  (%s on %s, %s)\n", expr, dt, dev->name,
         dev->description);
  printf("time     %.4f ms  median of %d runs (min %.4f, max %.4f); "
         "%d input cop%s\n",
         r->median_ms, bo->runs, r->min_ms, r->max_ms, r->copies,
         r->copies == 1 ? "y" : "ies");
  printf("compile  plan %.3f ms, first run %.3f ms\n", r->plan_ms,
         r->first_ms);
  printf("work     %.4g FLOPs = %.4g TFLOP/s; %.4g bytes compulsory = "
         "%.4g GB/s\n",
         r->flops, tflops, r->min_bytes, gbs);
  if (floor_ms > 0)
    printf("floor    %.4f ms (%s bound; GEMM %.4g TFLOP/s, copy %.4g GB/s)"
           "  einc/floor %.3f\n",
           floor_ms, bound, r->gemm_rate * 1e-12, r->copy_rate * 1e-9,
           r->median_ms / floor_ms);
  report_model_text(plan, r, &bm);
  if (r->step_ms) report_steps_text(ir, r, bo->runs);
}

/* Everything one benchmark holds, released by bench_release. */
typedef struct bench_state {
  ein_ctx *ctx;
  bench_device *dev;
  ein_plan *plan;
  bench_run br;
  DLTensor shape_only[CLI_MAX_OPERANDS]; /* the inputs' shapes, no data */
  DLTensor out;
  double *ms; /* one time per timed run */
  double *step_ms; /* --steps: [run][step], then each step's median */
  void *bufs[32 * CLI_MAX_OPERANDS + 1];
  int nbufs;
  char msg[512];
} bench_state;

/* Plans the case from the shapes alone (the plan says how big the output
 * is); *plan_ms is how long that took. */
static int bench_plan(bench_state *bs, const char *expr,
                      const cli_shape *shapes, int nin,
                      const ein_options *opt, double *plan_ms) {
  const DLTensor *ins[CLI_MAX_OPERANDS];
  cli_shape_tensors(shapes, nin, bs->dev->dl.device_type, bs->shape_only,
                    ins);
  double t0 = bench_now_ms();
  ein_status st = ein_plan_create(bs->ctx, expr, ins, nin, NULL, opt,
                                  &bs->plan);
  *plan_ms = bench_now_ms() - t0;
  if (!st) return EXIT_OK;
  cli_print_error(ein_last_error(bs->ctx));
  cli_numpy_hint(st, expr, ins, nin, opt);
  return cli_exit_status(st);
}

/* How many copies of the inputs the runs rotate through: enough that
 * they do not fit the last-level cache twice over (at most 32). */
static int input_copies(const bench_device *dev, size_t in_bytes) {
  if (in_bytes == 0 || (double)in_bytes >= 2.0 * (double)dev->cache_bytes)
    return 1;
  double want = ceil(4.0 * (double)dev->cache_bytes / (double)in_bytes);
  return want > 32 ? 32 : (int)want;
}

/* Inputs: one random host copy each, uploaded `copies` times. */
static int upload_inputs(bench_state *bs, const cli_shape *shapes, int nin,
                         ein_dtype dtype, int copies) {
  size_t esize = ein_dtype_size(dtype);
  for (int i = 0; i < nin; i++) {
    size_t elems = 1;
    for (int d = 0; d < shapes[i].ndim; d++) elems *= (size_t)shapes[i].dims[d];
    void *host = bench_random_data(dtype, elems, 0x9E3779B97F4A7C15ull + i);
    if (!host) {
      cli_errorf("out of host memory for input %d", i + 1);
      return EXIT_INTERNAL;
    }
    for (int c = 0; c < copies; c++) {
      void *p = bs->dev->upload(bs->dev, host, elems * esize, bs->msg,
                                sizeof bs->msg);
      if (!p) {
        free(host);
        cli_errorf("input %d: %s", i + 1, bs->msg);
        return EXIT_INTERNAL;
      }
      bs->bufs[bs->nbufs++] = p;
      bs->br.inputs[c][i] = bs->shape_only[i];
      bs->br.inputs[c][i].data = p;
    }
    free(host);
  }
  return EXIT_OK;
}

/* The output buffer on the device, of the plan's shape. */
static int upload_output(bench_state *bs, ein_dtype dtype) {
  int out_ndim = ein_plan_output_ndim(bs->plan);
  const int64_t *out_shape = ein_plan_output_shape(bs->plan);
  size_t out_elems = 1;
  for (int d = 0; d < out_ndim; d++) out_elems *= (size_t)out_shape[d];
  void *op = bs->dev->upload(bs->dev, NULL, out_elems * ein_dtype_size(dtype),
                             bs->msg, sizeof bs->msg);
  if (!op) {
    cli_errorf("output: %s", bs->msg);
    return EXIT_INTERNAL;
  }
  bs->bufs[bs->nbufs++] = op;
  bs->out.data = op;
  bs->out.device = bs->dev->dl;
  bs->out.ndim = out_ndim;
  bs->out.shape = (int64_t *)out_shape;
  bs->out.dtype = ein_dtype_to_dl(dtype);
  return EXIT_OK;
}

/* Allocates the rotation of input copies and uploads inputs and output. */
static int bench_buffers(bench_state *bs, const cli_shape *shapes, int nin,
                         const bench_opts *bo, int *copies) {
  size_t in_bytes = 0;
  for (int i = 0; i < nin; i++) {
    size_t elems = 1;
    for (int d = 0; d < shapes[i].ndim; d++) elems *= (size_t)shapes[i].dims[d];
    in_bytes += elems * ein_dtype_size(bo->dtype);
  }
  *copies = input_copies(bs->dev, in_bytes);
  bs->br.inputs = calloc((size_t)*copies, sizeof *bs->br.inputs);
  bs->ms = calloc((size_t)bo->runs, sizeof *bs->ms);
  if (!bs->br.inputs || !bs->ms) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  int rc = upload_inputs(bs, shapes, nin, bo->dtype, *copies);
  if (rc == EXIT_OK) rc = upload_output(bs, bo->dtype);
  bs->br = (bench_run){bs->ctx, bs->plan, nin, *copies, bs->br.inputs,
                       &bs->out};
  return rc;
}

/* --steps: as many runs again, each with a mark around every step; each
 * step's median lands in res->step_ms[0, nsteps). */
static int measure_steps(bench_state *bs, const bench_opts *bo,
                         bench_result *res) {
  int n = ein_plan_nsteps(bs->plan), runs = bo->runs;
  bs->step_ms = calloc((size_t)runs * (size_t)(n > 0 ? n : 1) + (size_t)n,
                       sizeof *bs->step_ms);
  if (!bs->step_ms) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  double *med = bs->step_ms + (size_t)runs * (size_t)n, *col = bs->ms;
  if (!bs->dev->time_steps(bs->dev, run_marked, &bs->br, runs, n,
                           bs->step_ms, bs->msg, sizeof bs->msg)) {
    if (*bs->msg) cli_errorf("steps: %s", bs->msg);
    return EXIT_INTERNAL;
  }
  for (int i = 0; i < n; i++) { /* bs->ms (the case's times) is read */
    for (int r = 0; r < runs; r++) col[r] = bs->step_ms[r * n + i];
    med[i] = bench_median(col, runs);
  }
  res->nsteps = n;
  res->step_ms = med;
  return EXIT_OK;
}

/* The first run alone (it compiles kernels or reads them from cache),
 * then the warm-up and timed runs, then the floor's rates. */
static int bench_measure(bench_state *bs, const bench_opts *bo,
                         bench_result *res) {
  bench_device *dev = bs->dev;
  double first[1];
  if (!dev->time(dev, run_once, &bs->br, 0, 1, first, bs->msg,
                 sizeof bs->msg) ||
      !dev->time(dev, run_once, &bs->br, bo->warmup, bo->runs, bs->ms,
                 bs->msg, sizeof bs->msg)) {
    if (*bs->msg) cli_errorf("%s", bs->msg);
    return EXIT_INTERNAL;
  }
  res->flops = ein_plan_flops(bs->plan);
  res->sectors = ein_plan_backend(bs->plan) != EIN_BACKEND_CPU;
  res->min_bytes = ein_plan_min_bytes(bs->plan);
  res->first_ms = first[0];
  res->median_ms = bench_median(bs->ms, bo->runs);
  res->min_ms = bs->ms[0];
  res->max_ms = bs->ms[bo->runs - 1];
  if (bo->floor &&
      (!dev->gemm_rate(dev, bo->dtype, &res->gemm_rate, bs->msg,
                       sizeof bs->msg) ||
       !dev->copy_rate(dev, &res->copy_rate, bs->msg, sizeof bs->msg))) {
    cli_errorf("floor: %s", bs->msg);
    return EXIT_INTERNAL;
  }
  return bo->steps ? measure_steps(bs, bo, res) : EXIT_OK;
}

static void bench_release(bench_state *bs) {
  ein_plan_destroy(bs->plan);
  if (bs->dev) {
    /* before the bench's stream goes away; a fault there was reported by
     * the timed runs already */
    (void)ein_ctx_synchronize(bs->ctx);
    ein_ctx_set_cuda_stream(bs->ctx, NULL);
    for (int i = 0; i < bs->nbufs; i++) bs->dev->release(bs->dev, bs->bufs[i]);
    bs->dev->close(bs->dev);
  }
  free(bs->br.inputs);
  free(bs->ms);
  free(bs->step_ms);
  ein_ctx_destroy(bs->ctx);
}

/* The timer for the memory backend `kind` keeps its tensors in (its
 * entry's, through ein_backend_dl_device): the host's clock, or CUDA
 * events. EXIT_OK with bs->dev set, else the exit status, message printed:
 * a device that cannot be opened is a runtime failure; a backend whose
 * memory has no timer here (the emulated device, which runs the CUDA path
 * on the CPU: its times mean nothing) is a usage error. */
static int bench_open(bench_state *bs, ein_backend_kind kind) {
  switch (ein_backend_dl_device(kind, 0).device_type) {
  case kDLCPU: bs->dev = bench_cpu_open(bs->msg, sizeof bs->msg); break;
  case kDLCUDA:
    bs->dev = bench_cuda_open(0, bs->ctx, bs->msg, sizeof bs->msg);
    break;
  default:
    cli_errorf("einc bench times backends on host or CUDA memory; '%s' "
               "keeps its tensors elsewhere (the emulated device's times "
               "mean nothing): bench cpu or cuda",
               ein_backend_name(kind));
    return EXIT_INVALID;
  }
  if (bs->dev) return EXIT_OK;
  cli_errorf("%s", bs->msg);
  return EXIT_INTERNAL;
}

/* --counters on the emulated device: no timing (its times mean nothing);
 * each kernel of the plan counted and priced by the kernel model beside
 * the roofline (ein_kernel_model_report: the same figures as `einc plan
 * --backend emu --kernel-model`). */
static int bench_emu_counters(bench_state *bs, const char *expr,
                              const cli_shape *shapes, int nin,
                              const bench_opts *bo, const ein_options *opt) {
  ein_device_model m;
  const char *name = bo->device ? bo->device : "h100";
  if (ein_device_model_get(name, &m)) {
    cli_errorf("unknown device model '%.40s' (%s)", name,
               ein_device_model_names());
    return EXIT_INVALID;
  }
  const DLTensor *ins[CLI_MAX_OPERANDS];
  cli_shape_tensors(shapes, nin, ein_backend_dl_device(opt->backend, 0)
                                     .device_type, bs->shape_only, ins);
  if (ein_plan_create(bs->ctx, expr, ins, nin, NULL, opt, &bs->plan)) {
    cli_print_error(ein_last_error(bs->ctx));
    return cli_exit_status(ein_last_error(bs->ctx)->status);
  }
  ein_strbuf sb = {0};
  ein_error_rec err;
  ein_error_init(&err);
  ein_status st = ein_kernel_model_report(ein_plan_ir_of(bs->plan),
                                          ein_plan_cuda_program(bs->plan), &m,
                                          bo->json, &sb, &err);
  if (!st && sb.failed)
    st = ein_fail_memory(&err, "out of memory writing the kernel model");
  if (st)
    cli_errorf("%s", err.message);
  else if (bo->json)
    printf("{\"expression\":\"%s\",\"backend\":\"emu\",\"kernel_model\":%s}"
           "\n", expr, sb.data);
  else
    printf("%s (%s) on the emulated device: no times, counted and "
           "modelled\n%s", expr, ein_dtype_name(bo->dtype), sb.data);
  ein_strbuf_free(&sb);
  ein_error_clear(&err);
  return st ? cli_exit_status(st) : EXIT_OK;
}

/* Opens the device, plans, uploads, measures and reports one case. */
static int bench_case(bench_state *bs, const char *expr,
                      const cli_shape *shapes, int nin, const bench_opts *bo,
                      const ein_options *opt) {
  int rc = bench_open(bs, opt->backend);
  if (rc != EXIT_OK) return rc;
  bench_result res = {0};
  rc = bench_plan(bs, expr, shapes, nin, opt, &res.plan_ms);
  if (rc == EXIT_OK) rc = bench_buffers(bs, shapes, nin, bo, &res.copies);
  if (rc == EXIT_OK) rc = bench_measure(bs, bo, &res);
  if (rc == EXIT_OK) report(expr, bo, bs->dev, bs->plan, &res);
  return rc;
}

int cmd_bench(int argc, char **argv) {
  static cli_common common;
  static cli_shape shapes[CLI_MAX_OPERANDS];
  static bench_state bs;
  memset(&common, 0, sizeof common);
  common.takes_path = true;
  memset(&bs, 0, sizeof bs);
  bench_opts bo = {false, EIN_DT_F32, 20, 3, false, true, false, &common,
                   false, NULL};
  const char *pos[CLI_MAX_OPERANDS + 1];
  int npos, nin;
  int r = cli_parse_args(argc, argv, "bench", cmd_bench_help, &common,
                         bench_option, &bo, pos, CLI_MAX_OPERANDS + 1, &npos);
  if (r != CLI_ARGS_OK) return r == CLI_ARGS_HELP ? EXIT_OK : EXIT_INVALID;
  int rc = cli_expr_and_shapes("bench", pos, npos, shapes, &nin);
  if (rc != EXIT_OK) return rc;
  /* one dtype for every input: --dtype, else the first file's */
  if (!bo.retype && nin > 0) bo.dtype = shapes[0].dtype;
  cli_shapes_set_dtype(shapes, nin, bo.dtype);
  ein_options *opt = &common.options;
  if (opt->backend == EIN_BACKEND_AUTO)
    opt->backend = ein_backend_default();
  if (ein_ctx_create(&bs.ctx) != EIN_OK) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  if (bo.counters && opt->backend != EIN_BACKEND_EMU) {
    cli_errorf("--counters counts on the emulated device: give --backend "
               "emu (other backends are timed)");
    rc = EXIT_INVALID;
  } else if (bo.counters) {
    rc = bench_emu_counters(&bs, pos[0], shapes, nin, &bo, opt);
  } else {
    rc = bench_case(&bs, pos[0], shapes, nin, &bo, opt);
  }
  bench_release(&bs);
  return rc;
}
