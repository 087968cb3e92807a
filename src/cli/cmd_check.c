/*
 * cmd_check.c - `einc check EXPR SHAPE...`: binds an expression to shapes
 * and prints the output shape, or the caret error and exit status 2.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "shape_text.h"
#include "utf8.h"

void cmd_check_help(void) {
  puts(
      "usage: einc check EXPR SHAPE|FILE.npy... [-D NAME=SIZE]... [--reduce R] "
      "[--numpy] [-v]\n"
      "\n"
      "Checks that EXPR applies to inputs of the given shapes and prints the\n"
      "output shape in the same form. Nothing is computed.\n"
      "\n"
      "  EXPR            an expression, e.g. 'b h i d, b h j d -> b h i j'\n"
      "  SHAPE           one per input operand: sizes joined by 'x', like\n"
      "                  8x16x2048, or 'scalar' for a 0-d tensor\n"
      "  FILE.npy        in place of a shape: the shape in a .npy file's\n"
      "                  header (its data is not read)\n"
      "  -D NAME=SIZE    a length binding: the size of an output-only axis\n"
      "                  (a repeat), or a check of an axis the shapes define\n"
      "  --reduce R      how axes missing from the output are reduced: sum\n"
      "                  (default), mean, max, min, prod, any, all\n"
      "  --numpy         numpy.einsum subscripts: one letter per axis; the\n"
      "                  output may be omitted (implicit output)\n"
      "  -v, --verbose   also print every axis with its size and role\n"
      CLI_HELP_OPERANDS
      "\n"
      CLI_HELP_EXIT
      "\n"
      "examples:\n"
      "  einc check 'b h i d, b h j d -> b h i j' 8x16x2048x128 "
      "8x16x2048x128\n"
      "  einc check 'b c (h 2) (w 2) -> b c h w' 8x3x64x64 --reduce mean\n"
      "  einc check 'h w -> h w r' 4x5 -D r=3\n"
      "  einc check --numpy 'ij,jk' 3x4 4x5\n"
      "  einc check 'i j, j k -> i k' a.npy b.npy");
}

static void print_shape(int ndim, const int64_t *shape) {
  char text[EIN_SHAPE_TEXT_CAP];
  puts(ein_format_shape(text, sizeof text, shape, ndim));
}

/* Names are padded by the columns they take, not their bytes ('α'). */
static void print_axes(const ein_binding *b) {
  static const char *const roles[] = {"kept", "reduced", "repeated"};
  size_t width = 4;
  for (int i = 0; i < ein_binding_naxes(b); i++) {
    const char *name = ein_binding_axis(b, i).name;
    size_t cols = ein_utf8_columns(name, strlen(name));
    if (cols > width) width = cols;
  }
  printf("  %-*s  %-20s  %s\n", (int)width, "axis", "size", "role");
  for (int i = 0; i < ein_binding_naxes(b); i++) {
    ein_axis_info a = ein_binding_axis(b, i);
    size_t pad = width - ein_utf8_columns(a.name, strlen(a.name));
    printf("  %s%*s  %-20lld  %s\n", a.name, (int)pad, "", (long long)a.size,
           roles[a.role]);
  }
}

int cmd_check(int argc, char **argv) {
  static cli_common common; /* large: keep it off the stack */
  static cli_shape shapes[CLI_MAX_OPERANDS];
  memset(&common, 0, sizeof common);
  const char *pos[CLI_MAX_OPERANDS + 1];
  int npos;
  int r = cli_parse_args(argc, argv, "check", cmd_check_help, &common, NULL,
                         NULL, pos, CLI_MAX_OPERANDS + 1, &npos);
  if (r != CLI_ARGS_OK) return r == CLI_ARGS_HELP ? EXIT_OK : EXIT_INVALID;
  int nshapes;
  r = cli_expr_and_shapes("check", pos, npos, shapes, &nshapes);
  if (r != EXIT_OK) return r;
  const char *expr = pos[0];

  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) {
    cli_errorf("out of memory");
    return EXIT_INTERNAL;
  }
  const int64_t *dims[CLI_MAX_OPERANDS];
  int ndims[CLI_MAX_OPERANDS];
  for (int i = 0; i < nshapes; i++) {
    dims[i] = shapes[i].dims;
    ndims[i] = shapes[i].ndim;
  }
  ein_binding *b;
  ein_status st = ein_bind_shapes(ctx, expr, dims, ndims, nshapes,
                                  &common.options, &b);
  if (st) {
    cli_print_error(ein_last_error(ctx));
    DLTensor tensors[CLI_MAX_OPERANDS];
    const DLTensor *ins[CLI_MAX_OPERANDS];
    cli_shape_tensors(shapes, nshapes, kDLCPU, tensors, ins);
    cli_numpy_hint(st, expr, ins, nshapes, &common.options);
    ein_ctx_destroy(ctx);
    return cli_exit_status(st);
  }
  print_shape(ein_binding_output_ndim(b), ein_binding_output_shape(b));
  if (common.verbose) print_axes(b);
  ein_binding_destroy(b);
  ein_ctx_destroy(ctx);
  return EXIT_OK;
}
