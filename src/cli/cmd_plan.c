/*
 * cmd_plan.c - `einc plan EXPR SHAPE...`: plans an expression for inputs
 * of the given shapes and dtype and prints the plan (text or JSON): axes,
 * naive and optimised FLOPs, the largest intermediate, every step with
 * its GEMM groups, FLOPs, bytes and intensity, and a predicted time on a
 * device model. Nothing is computed and no memory for data is allocated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dtype.h"

void cmd_plan_help(void) {
  puts(
      "usage: einc plan EXPR SHAPE... [--dtype T] [--json] [--device M]\n"
      "                 [--backend auto|cpu|cuda] [-D NAME=SIZE]... "
      "[--reduce R] [--numpy]\n"
      "\n"
      "Plans EXPR for inputs of the given shapes and prints the plan: every\n"
      "axis, naive and optimised FLOPs (opt_einsum's count: a multiply-add\n"
      "is 2), the largest intermediate, then one line per step (GEMM with\n"
      "its batch/M/N/K groups and transposes, copies, reductions) with\n"
      "FLOPs, bytes, arithmetic intensity and a roofline time.\n"
      "\n"
      "  --dtype T       f32 (default), f64, f16, bf16, or an integer type\n"
      "  --json          print one JSON object instead of the table\n"
      "  --device M      device model for predicted times: h100 (default:\n"
      "                  780 TFLOP/s bf16, 51 TFLOP/s f32, 2.96 TB/s,\n"
      "                  measured on our H100) or h200\n"
      "  --memory-limit B  largest intermediate allowed, in bytes\n"
      "  (see einc check --help for -D, --reduce, --numpy)\n"
      "\n"
      "example:\n"
      "  einc plan 'b h i d, b h j d -> b h i j' 8x16x2048x128 "
      "8x16x2048x128 --dtype bf16");
}

int cmd_plan(int argc, char **argv) {
  static cli_common common;
  static cli_shape shapes[EIN_MAX_OPERANDS];
  memset(&common, 0, sizeof common);
  const char *expr = NULL, *model = "h100";
  ein_dtype dt = EIN_DT_F32;
  bool json = false, options_done = false;
  int nshapes = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (!options_done && arg[0] == '-' && arg[1] != '\0') {
      if (strcmp(arg, "--") == 0) {
        options_done = true;
        continue;
      }
      if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
        cmd_plan_help();
        return EXIT_OK;
      }
      if (strcmp(arg, "--json") == 0) {
        json = true;
        continue;
      }
      if ((strcmp(arg, "--dtype") == 0 || strcmp(arg, "--device") == 0 ||
           strcmp(arg, "--memory-limit") == 0) &&
          i + 1 >= argc) {
        cli_errorf("%s needs a value", arg);
        return EXIT_INVALID;
      }
      if (strcmp(arg, "--dtype") == 0) {
        if (!ein_dtype_parse(argv[++i], &dt)) {
          cli_errorf("unknown dtype '%.40s' (f32, f64, f16, bf16, i8..i64, "
                     "u8..u64, bool)",
                     argv[i]);
          return EXIT_INVALID;
        }
        continue;
      }
      if (strcmp(arg, "--device") == 0) {
        model = argv[++i];
        if (strcmp(model, "h100") != 0 && strcmp(model, "h200") != 0) {
          cli_errorf("unknown device model '%.40s' (h100, h200)", model);
          return EXIT_INVALID;
        }
        continue;
      }
      if (strcmp(arg, "--memory-limit") == 0) {
        char *end;
        long long v = strtoll(argv[++i], &end, 10);
        if (*end || v < 0) {
          cli_errorf("--memory-limit takes a byte count, not '%.40s'", argv[i]);
          return EXIT_INVALID;
        }
        common.options.memory_limit = v;
        continue;
      }
      int r = cli_common_option(argc, argv, &i, &common);
      if (r < 0) return EXIT_INVALID;
      if (r > 0) continue;
      cli_errorf("unknown option '%.80s' for plan (see einc plan --help)",
                 arg);
      return EXIT_INVALID;
    }
    if (!expr) {
      expr = arg;
      continue;
    }
    if (nshapes == EIN_MAX_OPERANDS) {
      cli_errorf("more than %d shapes", EIN_MAX_OPERANDS);
      return EXIT_INVALID;
    }
    if (!cli_parse_shape(arg, &shapes[nshapes])) return EXIT_INVALID;
    nshapes++;
  }
  if (!expr) {
    cli_errorf("plan needs an expression (see einc plan --help)");
    return EXIT_INVALID;
  }
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  DLTensor tensors[EIN_MAX_OPERANDS];
  const DLTensor *ins[EIN_MAX_OPERANDS];
  for (int i = 0; i < nshapes; i++) {
    memset(&tensors[i], 0, sizeof tensors[i]);
    tensors[i].device = (DLDevice){kDLCPU, 0};
    tensors[i].ndim = shapes[i].ndim;
    tensors[i].shape = shapes[i].dims;
    tensors[i].dtype = ein_dtype_to_dl(dt);
    ins[i] = &tensors[i];
  }
  ein_plan *plan;
  ein_status st = ein_plan_create(ctx, expr, ins, nshapes, NULL,
                                  &common.options, &plan);
  if (st) {
    cli_print_error(ein_last_error(ctx));
    ein_ctx_destroy(ctx);
    return cli_exit_status(st);
  }
  ein_describe_format fmt = json ? EIN_DESCRIBE_JSON : EIN_DESCRIBE_TEXT;
  size_t len = ein_plan_describe(plan, fmt, model, NULL, 0);
  char *text = malloc(len + 1);
  int rc = EXIT_OK;
  if (!text || len == 0) {
    cli_errorf("out of memory");
    rc = EXIT_INTERNAL;
  } else {
    ein_plan_describe(plan, fmt, model, text, len + 1);
    fputs(text, stdout);
  }
  free(text);
  ein_plan_destroy(plan);
  ein_ctx_destroy(ctx);
  return rc;
}
