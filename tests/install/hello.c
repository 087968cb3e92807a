/*
 * hello.c - a program that knows only the installed libein: <ein.h> and the
 * library that pkg-config or CMake names (tests/install_test.sh builds it
 * both ways). Prints the version of the library it loaded, evaluates row
 * sums of a 2x3 matrix, and renders one error, so a wrong header, a
 * missing symbol or a library that does not run all show.
 */
#include <ein.h>
#include <stdio.h>

static int report(ein_ctx *ctx) {
  char text[512];
  ein_error_format(ein_last_error(ctx), text, sizeof text);
  fputs(text, stdout);
  return 1;
}

int main(void) {
  printf("ein %s (header %d.%d.%d)\n", ein_version(), EIN_VERSION_MAJOR,
         EIN_VERSION_MINOR, EIN_VERSION_PATCH);
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) return 1;
  float a[6] = {0, 1, 2, 3, 4, 5}, sums[2] = {0, 0};
  int64_t a_shape[2] = {2, 3}, sums_shape[1] = {2};
  DLTensor in = {.data = a, .device = {kDLCPU, 0}, .ndim = 2,
                 .dtype = {kDLFloat, 32, 1}, .shape = a_shape};
  DLTensor out = {.data = sums, .device = {kDLCPU, 0}, .ndim = 1,
                  .dtype = {kDLFloat, 32, 1}, .shape = sums_shape};
  const DLTensor *ins[1] = {&in};
  if (ein_eval(ctx, "i j -> i", ins, 1, &out, NULL) != EIN_OK)
    return report(ctx);
  printf("row sums %g %g\n", sums[0], sums[1]);
  /* an error is a status with a caret message, not a crash */
  if (ein_eval(ctx, "i j -> i k", ins, 1, &out, NULL) == EIN_OK) return 1;
  printf("%s: ", ein_status_name(ein_last_error(ctx)->status));
  report(ctx);
  ein_ctx_destroy(ctx);
  return 0;
}
