/*
 * cmd_eval.c - `einc eval EXPR IN.npy... -o OUT.npy`: evaluates an
 * expression on .npy files. The output is written only after the whole
 * evaluation succeeded, and atomically (npy.h): on any error no new file
 * appears and an existing one is left untouched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dtype.h"
#include "npy.h"

void cmd_eval_help(void) {
  puts(
      "usage: einc eval EXPR IN.npy... -o OUT.npy [--backend auto|cpu|cuda]\n"
      "                 [-D NAME=SIZE]... [--reduce R] [--numpy]\n"
      "\n"
      "Evaluates EXPR on NumPy .npy files (format 1-3, C or Fortran order,\n"
      "little-endian f2/f4/f8, integers, bool) and writes the result as a\n"
      "C-order .npy file of the inputs' dtype. The output file is replaced\n"
      "atomically, and only when the evaluation succeeded.\n"
      "\n"
      "  -o, --output F  the file to write (required)\n"
      "  --backend B     auto (default), cpu or cuda\n"
      "  -v, --verbose   print the output file's shape and dtype\n"
      "  (see einc check --help for -D, --reduce, --numpy)\n"
      "\n"
      "example:\n"
      "  einc eval 'i j, j k -> i k' a.npy b.npy -o c.npy");
}

typedef struct eval_opts {
  const char *out_path;
  cli_common *common;
} eval_opts;

/* eval's own options: -o/--output and --backend. */
static int eval_option(int argc, char **argv, int *i, void *state) {
  eval_opts *eo = state;
  const char *arg = argv[*i];
  bool out = strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0;
  if (!out && strcmp(arg, "--backend") != 0) return 0;
  if (*i + 1 >= argc) {
    cli_errorf("%s needs a value", arg);
    return -1;
  }
  const char *v = argv[++*i];
  if (out) {
    eo->out_path = v;
    return 1;
  }
  ein_options *o = &eo->common->options;
  if (strcmp(v, "auto") == 0)
    o->backend = EIN_BACKEND_AUTO;
  else if (strcmp(v, "cpu") == 0)
    o->backend = EIN_BACKEND_CPU;
  else if (strcmp(v, "cuda") == 0)
    o->backend = EIN_BACKEND_CUDA;
  else {
    cli_errorf("unknown backend '%.40s' (auto, cpu, cuda)", v);
    return -1;
  }
  return 1;
}

int cmd_eval(int argc, char **argv) {
  static cli_common common;
  static npy_array inputs[EIN_MAX_OPERANDS];
  memset(&common, 0, sizeof common);
  eval_opts eo = {NULL, &common};
  const char *pos[EIN_MAX_OPERANDS + 1];
  int npos;
  int r = cli_parse_args(argc, argv, "eval", cmd_eval_help, &common,
                         eval_option, &eo, pos, EIN_MAX_OPERANDS + 1, &npos);
  if (r != CLI_ARGS_OK) return r == CLI_ARGS_HELP ? EXIT_OK : EXIT_INVALID;
  const char *expr = npos ? pos[0] : NULL, *out_path = eo.out_path;
  const char **paths = pos + 1;
  int n = npos ? npos - 1 : 0;
  if (!expr || !out_path) {
    cli_errorf("eval needs an expression, input files and -o OUT.npy (see "
               "einc eval --help)");
    return EXIT_INVALID;
  }
  char msg[1024];
  int loaded = 0, rc = EXIT_OK;
  ein_ctx *ctx = NULL;
  void *out_data = NULL;
  for (; loaded < n; loaded++)
    if (!npy_read(paths[loaded], &inputs[loaded], msg, sizeof msg)) {
      cli_errorf("%s", msg);
      rc = EXIT_INVALID;
      goto done;
    }
  if (ein_ctx_create(&ctx) != EIN_OK) {
    cli_errorf("out of memory");
    rc = EXIT_INTERNAL;
    goto done;
  }
  const DLTensor *ins[EIN_MAX_OPERANDS];
  for (int i = 0; i < n; i++) ins[i] = &inputs[i].t;
  int64_t shape[EIN_MAX_DIMS];
  int ndim;
  ein_status st =
      ein_output_shape(ctx, expr, ins, n, &common.options, shape, &ndim);
  if (st) goto failed;
  DLTensor out = {0};
  out.device = (DLDevice){kDLCPU, 0};
  out.ndim = ndim;
  out.shape = shape;
  out.dtype = n ? inputs[0].t.dtype : ein_dtype_to_dl(EIN_DT_F32);
  ein_dtype dt;
  if (!ein_dtype_from_dl(out.dtype, &dt)) dt = EIN_DT_F32;
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= shape[d];
  out_data = malloc((size_t)(numel ? numel : 1) * ein_dtype_size(dt));
  if (!out_data) {
    cli_errorf("out of memory for the %lld-element output", (long long)numel);
    rc = EXIT_INTERNAL;
    goto done;
  }
  out.data = out_data;
  st = ein_eval(ctx, expr, ins, n, &out, &common.options);
  if (st) goto failed;
  if (!npy_write(out_path, &out, msg, sizeof msg)) {
    cli_errorf("%s", msg);
    rc = EXIT_INTERNAL;
  } else if (common.verbose) {
    printf("wrote %s: ", out_path);
    if (ndim == 0) printf("scalar");
    for (int d = 0; d < ndim; d++)
      printf("%s%lld", d ? "x" : "", (long long)shape[d]);
    printf(" %s\n", ein_dtype_name(dt));
  }
  goto done;
failed:
  cli_print_error(ein_last_error(ctx));
  rc = cli_exit_status(st);
done:
  free(out_data);
  for (int i = 0; i < loaded; i++) npy_free(&inputs[i]);
  ein_ctx_destroy(ctx);
  return rc;
}
