/*
 * fuzz_parser.c - libFuzzer target for the lexer, parser, binder and shape
 * checker. The first input byte picks the dialect and a few shapes; the
 * rest is the text. Build with -Dfuzz=true (clang), run e.g.
 *   build-fuzz/fuzz/fuzz_parser fuzz/corpus-parser -max_total_time=600
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ein.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  uint8_t ctl = data[0];
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0'; /* text stops at the first NUL, as C strings do */

  int64_t dims[3][4] = {{2, 3, 4, 1}, {3, 4, 2, 2}, {4, 1, 6, 3}};
  const int64_t *shapes[3] = {dims[0], dims[1], dims[2]};
  int ndims[3] = {ctl & 3, (ctl >> 2) & 3, (ctl >> 4) & 3};
  int n = (ctl >> 6) & 3;
  if (n > 3) n = 3;
  ein_length lengths[1] = {{"r", 2}};
  ein_options opt = {.dialect = (ctl & 0x20) ? EIN_DIALECT_NUMPY
                                             : EIN_DIALECT_EINOPS,
                     .lengths = lengths,
                     .nlengths = (ctl & 0x10) ? 1 : 0};
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) == EIN_OK) {
    ein_binding *b = NULL;
    if (ein_bind_shapes(ctx, text, shapes, ndims, n, &opt, &b) == EIN_OK)
      ein_binding_destroy(b);
    char out[256];
    ein_error_format(ein_last_error(ctx), out, sizeof out);
    ein_ctx_destroy(ctx);
  }
  ein_shape_memo *memo;
  if (ein_shape_memo_create(&memo) == EIN_OK) {
    /* a mismatch is an expected outcome: the fuzzer looks for crashes */
    (void)ein_shape_check_dims(memo, text, ndims[0], dims[0], "x", NULL, 0);
    (void)ein_shape_check_dims(memo, text, ndims[1], dims[1], "y", NULL, 0);
    ein_shape_memo_destroy(memo);
  }
  free(text);
  return 0;
}
