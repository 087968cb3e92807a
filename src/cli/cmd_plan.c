/*
 * cmd_plan.c - `einc plan EXPR SHAPE...`: plans an expression for inputs
 * of the given shapes and dtype and prints the plan (text or JSON): axes,
 * naive and optimised FLOPs, the largest intermediate, every step with
 * its GEMM groups, FLOPs, bytes and intensity, and a predicted time on a
 * device model: the device the plan targets (this CPU's measured rates,
 * or the GPU present) unless --device names one. Nothing is computed and
 * no memory for data is allocated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dtype.h"

void cmd_plan_help(void) {
  puts(
      "usage: einc plan EXPR SHAPE|FILE.npy... [--dtype T] [--json] [--device M]\n"
      "                 [--memory-limit B] [--path P] [--slice A,B]\n"
      "                 [-D NAME=SIZE]... [--reduce R] [--numpy]\n"
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
      "  --device M      device model for predicted times: cpu (this host's\n"
      "                  GEMM rate and copy bandwidth, measured once, about\n"
      "                  0.1 s, and cached in $EINC_CACHE_DIR or\n"
      "                  ~/.cache/einc), h100 (780 TFLOP/s bf16, 51 TFLOP/s\n"
      "                  f32, 2.96 TB/s, measured on our H100) or h200.\n"
      "                  Default: the device the plan targets, cpu for the\n"
      "                  CPU backend, the GPU present for cuda and emu (an\n"
      "                  unknown GPU, or none, gets h100's rates, with a\n"
      "                  note)\n"
      "  --memory-limit B  largest buffer allowed, in bytes (intermediates,\n"
      "                  layout copies): the path keeps within it, slicing\n"
      "                  axes where no order does, or the plan fails (exit 2)\n"

      CLI_HELP_PATH
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
  cli_common *common;
} plan_opts;

/* plan's own options: --dtype, --json, --device, --memory-limit. */
static int plan_option(int argc, char **argv, int *i, void *state) {
  plan_opts *po = state;
  const char *arg = argv[*i];
  if (strcmp(arg, "--json") == 0) {
    po->json = true;
    return 1;
  }
  bool backend = cli_is_option(arg, "--backend");
  bool dtype = cli_is_option(arg, "--dtype");
  bool device = cli_is_option(arg, "--device");
  bool input = cli_is_option(arg, "--input");
  if (!backend && !dtype && !device && !input &&
      !cli_is_option(arg, "--memory-limit"))
    return 0;
  const char *v = cli_option_value(argc, argv, i);
  if (!v) return -1;
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
    if (strcmp(v, "cpu") != 0 && strcmp(v, "h100") != 0 &&
        strcmp(v, "h200") != 0) {
      cli_errorf("unknown device model '%.40s' (cpu, h100, h200)", v);
      return -1;
    }
    po->model = v;
  } else {
    char *end;
    long long b = strtoll(v, &end, 10);
    if (*end || b < 0) {
      cli_errorf("--memory-limit takes a byte count, not '%.40s'", v);
      return -1;
    }
    po->common->options.memory_limit = b;
  }
  return 1;
}

/* The model of --device, else of the device the backend targets; an
 * assumed one (a GPU einc has no rates for) is said on stderr. */
static int resolve_model(const char *named, ein_backend_kind backend,
                         ein_device_model *m) {
  const char *name = named                        ? named
                     : backend == EIN_BACKEND_CUDA ||
                             backend == EIN_BACKEND_EMU
                         ? "cuda"
                         : "cpu";
  ein_status st = ein_device_model_get(name, m);
  if (st) {
    cli_errorf("the device model '%s' could not be made: %s", name,
               ein_status_name(st));
    return cli_exit_status(st);
  }
  if (m->source && strcmp(m->source, "assumed") == 0)
    fprintf(stderr, "einc: note: predicted times are for %s: %s\n", m->name,
            m->description);
  return EXIT_OK;
}

/* Prints the plan's report on the model. */
static int print_report(const ein_plan *plan, bool json,
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
    fputs(text, stdout);
  }
  free(text);
  return rc;
}

/* The expression and shapes: from the arguments, or from --input (then
 * no argument may name them). *pos and *owned are the caller's to free. */
static int plan_operands(const plan_opts *po, const char **args, int nargs,
                         const char ***pos, int *npos, char **owned) {
  *owned = NULL;
  if (!po->input) {
    *pos = args;
    *npos = nargs;
    return EXIT_OK;
  }
  if (nargs > 0) {
    cli_errorf("--input gives the expression and the shapes; '%.40s' "
               "cannot come beside it",
               args[0]);
    return EXIT_INVALID;
  }
  return cli_read_input(po->input, owned, pos, npos);
}

/* Plans the expression for the shapes and prints the report. */
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
  if (rc == EXIT_OK)
    rc = cli_plan_shapes(
        pos[0], shapes, nshapes,
        ein_backend_dl_device(common->options.backend, 0).device_type,
        &common->options, &ctx, &plan);
  free(shapes);
  if (rc != EXIT_OK) return rc;
  ein_device_model m;
  rc = resolve_model(po->model, common->options.backend, &m);
  if (rc == EXIT_OK) rc = print_report(plan, po->json, &m);
  ein_plan_destroy(plan);
  ein_ctx_destroy(ctx);
  return rc;
}

int cmd_plan(int argc, char **argv) {
  static cli_common common;
  memset(&common, 0, sizeof common);
  common.takes_path = true;
  plan_opts po = {NULL, NULL, false, EIN_DT_F32, false, &common};
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
