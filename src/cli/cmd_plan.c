/*
 * cmd_plan.c - `einc plan EXPR SHAPE...`: plans an expression for inputs
 * of the given shapes and dtype and prints the plan (text or JSON): axes,
 * naive and optimised FLOPs, the largest intermediate, every step with
 * its GEMM groups, FLOPs, bytes and intensity, and a predicted time on a
 * device model: the device the plan targets (this CPU's measured rates,
 * or the GPU present) unless --device names one. Nothing is computed and
 * no memory for data is allocated. --grad adds the backward: for each
 * input its gradient program (ein_grad_create) and the forward, backward
 * and total FLOPs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "inspect.h"
#include "dtype.h"
#include "kernel_resources.h"

void cmd_plan_help(void) {
  puts(
      "usage: einc plan EXPR SHAPE|FILE.npy... [--dtype T] [--json] [--device M]\n"
      "                 [--peak F] [--bandwidth B]\n"
      "                 [--memory-limit B] [--path P] [--slice A,B]\n"
      "                 [--plan-time S] [--seed N] [--objective O]\n"
      "                 [-D NAME=SIZE]... [--reduce R] [--numpy] [--grad]\n"
      "                 [--resources] [--kernel-model]\n"
      "                 [--workers N [--link-gbps G]]\n"
      "       einc plan --input FILE|- [options]\n"
      "\n"
      "Plans EXPR for inputs of the given shapes and prints the plan: every\n"
      "axis, naive and optimised FLOPs (opt_einsum's count: a multiply-add\n"
      "is 2), the largest intermediate, then one line per step (GEMM with\n"
      "its batch/M/N/K groups and transposes, copies, reductions) with\n"
      "FLOPs, bytes, arithmetic intensity and a roofline time.\n"
      "\n"
      "  SHAPE           one per input: sizes joined by 'x' (8x16x2048)\n"
      "  --input FILE    the expression and shapes from FILE ('-': standard\n"
      "                  input), for networks too large for a command line:\n"
      "                  the expression on the first line, then one SHAPE\n"
      "                  (or FILE.npy) per line; blank lines and lines\n"
      "                  starting with '#' are skipped\n"
      "  FILE.npy        in place of a shape: the shape and dtype in a .npy\n"
      "                  file's header (its data is not read)\n"
      "  --dtype T       every input's dtype: f32 (default for shapes; a\n"
      "                  file's own otherwise), f64, f16, bf16, c64, c128,\n"
      "                  integers\n"
      "  --json          print one JSON object instead of the table\n"
      "  --device M      the device predicted times are for: cpu (this\n"
      "                  host's GEMM rates and copy bandwidth, measured once,\n"
      "                  about 0.3 s, and cached in $EINC_CACHE_DIR or\n"
      "                  ~/.cache/einc), h100 (= h100-sxm), h100-pcie, h200,\n"
      "                  a100, l4, b200 (data-sheet peaks per dtype and\n"
      "                  bandwidth; h100 also einc's measured bf16 and f32\n"
      "                  GEMM rates and copy bandwidth, which predictions\n"
      "                  use) or cuda (the GPU present). A GPU plans for the\n"
      "                  cuda backend (no GPU needed). Default: the device\n"
      "                  the plan targets, cpu for the CPU backend, the GPU\n"
      "                  present for cuda and emu (an unknown GPU, or none,\n"
      "                  gets h100's model, with a note). Predicted time =\n"
      "                  per-call + per-step overheads + roofline per step\n"
      "  --peak F        your own peak FLOP/s for the plan's dtype (used for\n"
      "                  the prediction and as MFU's peak)\n"
      "  --bandwidth B   your own memory bandwidth, bytes/s read + written\n"
      CLI_HELP_PATH
      "  --workers N     also what spreading the plan's slices over N devices\n"
      "                  or nodes would take, by the model of docs/design.md\n"
      "                  (\"Cost of spreading units\"): each its share of the\n"
      "                  slices at the predicted time, the inputs broadcast and\n"
      "                  the partials reduced in trees over the link\n"
      "  --link-gbps G   that link's bandwidth in GB/s (default 12.5: a 100\n"
      "                  Gbit/s network; an NVLink GPU link is ~450)\n"
      "  --resources     with --backend cuda or emu: each generated kernel\n"
      "                  compiled with NVRTC for sm_80, sm_89, sm_90 (and\n"
      "                  sm_100 where NVRTC has it; no GPU needed): its\n"
      "                  registers, spill stores and loads, local and shared\n"
      "                  memory as ptxas reports them, resident blocks and\n"
      "                  warps per SM with the limit that binds, and the\n"
      "                  grid's waves (one compile per kernel and\n"
      "                  architecture: about 0.1 s each); with --json, a\n"
      "                  \"kernel_resources\" member\n"
      "  --kernel-model  with --backend cuda or emu: each generated kernel's\n"
      "                  time by the per-kernel model beside the roofline:\n"
      "                  its memory traffic counted by running it once on the\n"
      "                  emulated device (sizes as given: large tensors take\n"
      "                  long), its occupancy from NVRTC's compile for the\n"
      "                  device model's architecture, launch + the longest of\n"
      "                  DRAM, L2, shared memory, instruction issue and\n"
      "                  arithmetic, derated by warps per SM and waves\n"
      "                  (EINC_EMU_SAMPLE_BLOCKS=N: about N blocks a launch\n"
      "                  counted, scaled); cuBLAS steps at the roofline's\n"
      "                  price; then the plan's total both ways; with --json,\n"
      "                  a \"kernel_model\" member\n"
      "  --grad          also the backward: for each input, the steps of its\n"
      "                  gradient (einc expressions with their paths and\n"
      "                  FLOPs, and elementwise steps), then the forward,\n"
      "                  backward and total FLOPs and total / forward, and\n"
      "                  their least bytes. A\n"
      "                  linear layer's is 3 (backward = 2 x forward): the\n"
      "                  '6 x parameters x tokens' rule of training cost.\n"
      "                  With --json: a \"grad\" member\n"
      "  --backend B     cpu (default), cuda or emu: plan for the CUDA\n"
      "                  backend (or the emulated device, which runs the\n"
      "                  same) and name each step's cuBLAS call or\n"
      "                  generated kernel (needs no GPU)\n"
      CLI_HELP_TAIL
      "  einc plan 'b h i d, b h j d -> b h i j' 8x16x2048x128 "
      "8x16x2048x128 --dtype bf16");
}

typedef struct plan_opts {
  const char *model;
  const char *input; /* --input: FILE or "-" */
  bool retype;     /* --dtype given */
  ein_dtype dtype; /* its value */
  bool json;
  bool grad; /* --grad */
  bool resources; /* --resources */
  bool kernel_model; /* --kernel-model */
  double peak, bandwidth; /* --peak, --bandwidth; 0: the model's */
  int workers;        /* --workers: the spread cost's (0: none) */
  double link_gbps;   /* --link-gbps: its bandwidth, GB/s */
  cli_common *common;
} plan_opts;

/* --workers N or --link-gbps G; 0 when arg is neither. */
static int spread_option(plan_opts *po, const char *arg, const char *v) {
  char *end;
  double x = strtod(v, &end);
  bool workers = cli_is_option(arg, "--workers");
  if (*end || end == v || !(x > 0) || (workers && (x != floor(x) || x > 1e6))) {
    cli_errorf("%s takes a %s, not '%.40s'", workers ? "--workers" : "--link-gbps",
               workers ? "count from 1" : "bandwidth in GB/s above 0", v);
    return -1;
  }
  if (workers) po->workers = (int)x;
  else po->link_gbps = x;
  return 1;
}

/* plan's own options: --dtype, --json, --device, --peak, --bandwidth,
 * --input, --backend, --workers, --link-gbps. */
static int plan_option(int argc, char **argv, int *i, void *state) {
  plan_opts *po = state;
  const char *arg = argv[*i];
  if (strcmp(arg, "--json") == 0 || strcmp(arg, "--grad") == 0) {
    *(arg[2] == 'j' ? &po->json : &po->grad) = true;
    return 1;
  }
  if (strcmp(arg, "--resources") == 0 ||
      strcmp(arg, "--kernel-model") == 0) {
    *(arg[2] == 'r' ? &po->resources : &po->kernel_model) = true;
    return 1;
  }
  bool backend = cli_is_option(arg, "--backend");
  bool dtype = cli_is_option(arg, "--dtype");
  bool device = cli_is_option(arg, "--device");
  bool input = cli_is_option(arg, "--input");
  bool peak = cli_is_option(arg, "--peak");
  bool bandwidth = cli_is_option(arg, "--bandwidth");
  bool spread = cli_is_option(arg, "--workers") ||
                cli_is_option(arg, "--link-gbps");
  if (!backend && !dtype && !device && !input && !peak && !bandwidth &&
      !spread)
    return 0;
  const char *v = cli_option_value(argc, argv, i);
  if (!v) return -1;
  if (spread) return spread_option(po, arg, v);
  if (input) {
    po->input = v;
    return 1;
  }
  if (backend)
    return cli_parse_backend(v, &po->common->options.backend) ? 1 : -1;
  if (dtype) {
    if (!cli_parse_dtype(v, &po->dtype)) return -1;
    po->retype = true;
  } else if (device) {
    po->model = v;
  } else if (peak || bandwidth) {
    char *end;
    double x = strtod(v, &end);
    if (*end || !(x > 0) || !isfinite(x)) {
      cli_errorf("%s takes a positive rate (%s), not '%.40s'", arg,
                 peak ? "FLOP/s: 989.5e12" : "bytes/s: 3.35e12", v);
      return -1;
    }
    *(peak ? &po->peak : &po->bandwidth) = x;
  }
  return 1;
}

/* The model of --device, else of the device the backend targets; an
 * assumed one (a GPU einc has no model of) is said on stderr. A named
 * device with no --backend plans for the backend it runs (a GPU: cuda,
 * which needs no GPU to plan for); a --backend it does not run is an
 * error. */
static int resolve_model(const char *named, ein_backend_kind *backend,
                         ein_device_model *m) {
  bool gpu_plan = *backend == EIN_BACKEND_CUDA || *backend == EIN_BACKEND_EMU;
  const char *name = named ? named : gpu_plan ? "cuda" : "cpu";
  ein_status st = ein_device_model_get(name, m);
  if (st == EIN_ERR_INVALID_ARGUMENT) {
    cli_errorf("unknown device model '%.40s' (%s)", name,
               ein_device_model_names());
    return EXIT_INVALID;
  }
  if (st) {
    cli_errorf("the device model '%s' could not be made: %s", name,
               ein_status_name(st));
    return cli_exit_status(st);
  }
  if (*backend == EIN_BACKEND_AUTO)
    *backend = (ein_backend_kind)m->backend;
  else if ((m->backend == EIN_BACKEND_CUDA) != gpu_plan) {
    cli_errorf("the device model '%s' prices %s plans, not --backend %s's",
               name, ein_backend_name(m->backend),
               ein_backend_name(*backend));
    return EXIT_INVALID;
  }
  if (m->source && strcmp(m->source, "assumed") == 0)
    fprintf(stderr, "einc: note: predicted times are for %s: %s\n", m->name,
            m->description);
  return EXIT_OK;
}

/* --peak (for the plan's arithmetic) and --bandwidth over the model's. */
static void override_model(const plan_opts *po, const ein_plan *plan,
                           ein_device_model *m) {
  if (po->peak > 0)
    (void)ein_device_model_set_peak(m, ein_plan_peak_kind(plan), po->peak);
  if (po->bandwidth > 0)
    (void)ein_device_model_set_bandwidth(m, po->bandwidth);
}

/* Prints the plan's report on the model; with `open_json`, the JSON
 * object without its closing brace (members follow). */
static int print_report(const ein_plan *plan, bool json, bool open_json,
                        const ein_device_model *m) {
  ein_describe_format fmt = json ? EIN_DESCRIBE_JSON : EIN_DESCRIBE_TEXT;
  size_t len = ein_plan_describe_model(plan, fmt, m, NULL, 0);
  char *text = malloc(len + 1);
  int rc = EXIT_OK;
  if (!text || len == 0) {
    cli_errorf("out of memory");
    rc = EXIT_INTERNAL;
  } else {
    ein_plan_describe_model(plan, fmt, m, text, len + 1);
    while (open_json && len > 0 && text[len - 1] != '}') len--;
    if (open_json && len > 0) text[len - 1] = 0;
    fputs(text, stdout);
  }
  free(text);
  return rc;
}

/* A gradient's report (text or JSON), printed. */
static void print_grad(const ein_grad *g, ein_describe_format fmt) {
  size_t len = ein_grad_describe(g, fmt, NULL, 0);
  char *text = malloc(len + 1);
  if (text) {
    ein_grad_describe(g, fmt, text, len + 1);
    fputs(text, stdout);
  }
  free(text);
}

/* Why an input has no gradient, as a JSON string's contents or a line. */
static void print_no_grad(ein_ctx *ctx, int i, bool json) {
  const char *msg = ein_last_error(ctx)->message;
  if (!json) {
    printf("  input %d: no gradient: %s\n", i, msg ? msg : "");
    return;
  }
  printf("{\"wrt\":%d,\"error\":\"", i);
  for (const char *c = msg ? msg : ""; *c; c++)
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if ((unsigned char)*c >= 0x20) putchar(*c);
  printf("\"}");
}

/* Each input's gradient program, printed; adds their FLOPs to *backward.
 * An input without a gradient says why; only running out of memory stops. */
static int print_grad_inputs(ein_ctx *ctx, const char *expr,
                             const DLTensor *const *ins, int n,
                             const ein_options *o, bool json,
                             double *backward, double *backward_bytes) {
  printf(json ? ",\"grad\":{\"inputs\":[" : "\nbackward\n");
  for (int i = 0; i < n; i++) {
    ein_grad *g = NULL;
    ein_status st = ein_grad_create(ctx, expr, ins, n, o, i, &g);
    if (json && i) putchar(',');
    if (st == EIN_ERR_NO_MEMORY) return cli_exit_status(st);
    if (st) {
      print_no_grad(ctx, i, json);
      continue;
    }
    print_grad(g, json ? EIN_DESCRIBE_JSON : EIN_DESCRIBE_TEXT);
    *backward += ein_grad_flops(g);
    *backward_bytes += ein_grad_bytes(g);
    ein_grad_destroy(g);
  }
  return EXIT_OK;
}

/* --grad: each input's gradient program, then the totals. */
static int print_grads(ein_ctx *ctx, const char *expr, const cli_shape *shapes,
                       int n, const ein_options *o, const ein_plan *plan,
                       bool json) {
  DLTensor *tensors = malloc((size_t)(n ? n : 1) * sizeof *tensors);
  const DLTensor **ins = malloc((size_t)(n ? n : 1) * sizeof *ins);
  int rc = tensors && ins ? EXIT_OK : EXIT_INTERNAL;
  double forward = ein_plan_flops(plan), backward = 0;
  double fbytes = ein_plan_min_bytes(plan), bbytes = 0;
  if (rc == EXIT_OK) {
    cli_shape_tensors(shapes, n,
                      ein_backend_dl_device(o->backend, 0).device_type,
                      tensors, ins);
    rc = print_grad_inputs(ctx, expr, ins, n, o, json, &backward, &bbytes);
  } else {
    cli_errorf("out of memory");
  }
  free(tensors);
  free(ins);
  if (rc != EXIT_OK) return rc;
  double total = forward + backward, ratio = forward > 0 ? total / forward : 0;
  if (json) {
    printf("],\"forward_flops\":%.17g,\"backward_flops\":%.17g,"
           "\"total_flops\":%.17g,\"total_over_forward\":%.17g,"
           "\"forward_bytes\":%.17g,\"backward_bytes\":%.17g,"
           "\"total_bytes\":%.17g}}\n",
           forward, backward, total, ratio, fbytes, bbytes, fbytes + bbytes);
    return EXIT_OK;
  }
  printf("bytes           forward %.4g + backward %.4g = %.4g (least "
         "traffic: inputs read once, outputs written once)\n",
         fbytes, bbytes, fbytes + bbytes);
  printf("forward FLOPs   %.4g\nbackward FLOPs  %.4g\n"
         "total FLOPs     %.4g   %.3g x forward (a linear layer: 3, the "
         "'6 x parameters x tokens' rule)\n",
         forward, backward, total, ratio);
  return EXIT_OK;
}

/* The expression and shapes: from the arguments, or from --input (then
 * no argument may name them). *pos and *owned are the caller's to free. */
static int plan_operands(const plan_opts *po, const char **args, int nargs,
                         const char ***pos, int *npos, char **owned) {
  *owned = NULL;
  *pos = args; /* the caller frees *pos only when it is not args */
  *npos = nargs;
  if (!po->input) return EXIT_OK;
  if (nargs > 0) {
    cli_errorf("--input gives the expression and the shapes; '%.40s' "
               "cannot come beside it",
               args[0]);
    return EXIT_INVALID;
  }
  return cli_read_input(po->input, owned, pos, npos);
}

/* Plans the expression for the shapes and prints the report. */
/* --workers: the cost of spreading the units (ein_plan_spread_cost), as
 * text lines or, with json, a "spread" member (the object is open). */
static int print_spread(const ein_plan *plan, const plan_opts *po,
                        const ein_device_model *m) {
  ein_spread_cost c;
  double gbps = po->link_gbps > 0 ? po->link_gbps : 12.5;
  if (ein_plan_spread_cost(plan, m, po->workers, gbps * 1e9, &c) != EIN_OK) {
    cli_errorf("the spread cost could not be computed");
    return EXIT_INTERNAL;
  }
  if (po->json) {
    printf(",\"spread\":{\"workers\":%d,\"link_gbps\":%.6g,\"units\":%.17g,"
           "\"units_per_worker\":%.17g,\"one_seconds\":%.6g,"
           "\"compute_seconds\":%.6g,\"input_seconds\":%.6g,"
           "\"partial_seconds\":%.6g,\"seconds\":%.6g,\"speedup\":%.6g,"
           "\"efficiency\":%.6g}",
           c.workers, gbps, c.units, c.units_per_worker, c.one_seconds,
           c.compute_seconds, c.input_seconds, c.partial_seconds, c.seconds,
           c.speedup, c.efficiency);
    return EXIT_OK;
  }
  printf("\nspread over %d workers (link %.4g GB/s; docs/design.md, \"Cost of "
         "spreading units\")\n"
         "  units       %.6g, %.6g per worker\n"
         "  time        %.4g s: compute %.4g s + inputs %.4g s + partials "
         "%.4g s (one worker: %.4g s)\n"
         "  speed-up    %.3gx   efficiency %.0f%%\n",
         c.workers, gbps, c.units, c.units_per_worker, c.seconds,
         c.compute_seconds, c.input_seconds, c.partial_seconds,
         c.one_seconds, c.speedup, 100 * c.efficiency);
  return EXIT_OK;
}

/* --resources: each generated kernel's registers, spills, shared memory
 * and occupancy per architecture (kernel_resources.h), as text lines or,
 * with json, a "kernel_resources" member (the object is open). */
static int print_resources(const ein_plan *plan, bool json) {
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  if (!prog) {
    cli_errorf("--resources describes the CUDA kernels of a plan: give "
               "--backend cuda or emu");
    return EXIT_INVALID;
  }
  ein_strbuf sb = {0};
  ein_error_rec err;
  ein_error_init(&err);
  ein_status st = ein_kernel_resources_report(prog, json, &sb, &err);
  if (!st && sb.failed)
    st = ein_fail_memory(&err, "out of memory writing the kernel resources");
  if (!st)
    printf(json ? ",\"kernel_resources\":%s" : "\n%s", sb.data);
  else
    cli_errorf("%s", err.message);
  ein_strbuf_free(&sb);
  ein_error_clear(&err);
  return st ? cli_exit_status(st) : EXIT_OK;
}

/* --kernel-model: each kernel's time by the per-kernel model beside the
 * roofline's (ein_kernel_model_report), as text or, with json, a
 * "kernel_model" member (the object is open). */
static int print_kernel_model(const ein_plan *plan, const ein_device_model *m,
                              bool json) {
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  if (!prog) {
    cli_errorf("--kernel-model models the CUDA kernels of a plan: give "
               "--backend cuda or emu");
    return EXIT_INVALID;
  }
  ein_strbuf sb = {0};
  ein_error_rec err;
  ein_error_init(&err);
  ein_status st =
      ein_kernel_model_report(ein_plan_ir_of(plan), prog, m, json, &sb, &err);
  if (!st && sb.failed)
    st = ein_fail_memory(&err, "out of memory writing the kernel model");
  if (!st)
    printf(json ? ",\"kernel_model\":%s" : "\n%s", sb.data);
  else
    cli_errorf("%s", err.message);
  ein_strbuf_free(&sb);
  ein_error_clear(&err);
  return st ? cli_exit_status(st) : EXIT_OK;
}

static int plan_and_print(const plan_opts *po, const char *const *pos,
                          int npos) {
  cli_common *common = po->common;
  cli_shape *shapes = malloc((size_t)(npos ? npos : 1) * sizeof *shapes);
  if (!shapes) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  int nshapes;
  int rc = cli_expr_and_shapes("plan", pos, npos, shapes, &nshapes);
  if (rc == EXIT_OK && po->retype)
    cli_shapes_set_dtype(shapes, nshapes, po->dtype);
  ein_ctx *ctx = NULL;
  ein_plan *plan = NULL;
  ein_device_model m;
  if (rc == EXIT_OK)
    rc = resolve_model(po->model, &common->options.backend, &m);
  if (rc == EXIT_OK)
    rc = cli_plan_shapes(
        pos[0], shapes, nshapes,
        ein_backend_dl_device(common->options.backend, 0).device_type,
        &common->options, &ctx, &plan);
  if (rc == EXIT_OK) override_model(po, plan, &m);
  bool open_json =
      po->grad || po->workers || po->resources || po->kernel_model;
  if (rc == EXIT_OK) rc = print_report(plan, po->json, open_json, &m);
  if (rc == EXIT_OK && po->workers) rc = print_spread(plan, po, &m);
  if (rc == EXIT_OK && po->resources) rc = print_resources(plan, po->json);
  if (rc == EXIT_OK && po->kernel_model)
    rc = print_kernel_model(plan, &m, po->json);
  if (rc == EXIT_OK && po->grad)
    rc = print_grads(ctx, pos[0], shapes, nshapes, &common->options, plan,
                     po->json);
  else if (rc == EXIT_OK && open_json && po->json)
    printf("}\n");
  free(shapes);
  ein_plan_destroy(plan);
  ein_ctx_destroy(ctx);
  return rc;
}

int cmd_plan(int argc, char **argv) {
  static cli_common common;
  memset(&common, 0, sizeof common);
  common.takes_path = true;
  plan_opts po = {.dtype = EIN_DT_F32, .common = &common};
  const char **args = malloc((size_t)(argc + 1) * sizeof *args);
  if (!args) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  int nargs;
  int r = cli_parse_args(argc, argv, "plan", cmd_plan_help, &common,
                         plan_option, &po, args, argc + 1, &nargs);
  if (r != CLI_ARGS_OK) {
    free(args);
    return r == CLI_ARGS_HELP ? EXIT_OK : EXIT_INVALID;
  }
  const char **pos;
  int npos;
  char *owned;
  int rc = plan_operands(&po, args, nargs, &pos, &npos, &owned);
  if (rc == EXIT_OK) rc = plan_and_print(&po, pos, npos);
  if (pos != args) free(pos);
  free(args);
  free(owned);
  return rc;
}
