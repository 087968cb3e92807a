/*
 * fuzz_bind.c - libFuzzer target for shape binding with random shapes,
 * and for planning and evaluation wherever a binding succeeds.
 *
 * Input layout: byte 0 picks the number of operands (1-3), the dialect and
 * the reduction; byte 1 a length binding; then, per operand, a rank byte
 * and one byte per dim indexing a table of sizes that includes 0, 1, small
 * sizes, negatives and values near the int64 limits. The rest is the
 * expression text.
 *
 * When the binding succeeds and the problem is small, the target also
 * evaluates it on the CPU with random f64 inputs and compares with the
 * naive reference of tests/reference.h: a wrong answer aborts, so the
 * fuzzer reports it like a crash. Build with -Dfuzz=true (clang), run e.g.
 *   build-fuzz/fuzz/fuzz_bind fuzz/corpus-bind -max_total_time=600
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx_internal.h"
#include "reference.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const int64_t sizes[16] = {
    0, 1, 2, 3, 4, 5, 6, 8, 12, 16, 7, -1, INT64_MAX, (int64_t)1 << 32,
    (int64_t)1 << 62, 9};

/* Evaluates a bound problem and compares with the reference; aborts on a
 * wrong answer. Problems with many index combinations are skipped so that
 * one input stays fast. */
static void check_eval(ein_ctx *ctx, const char *text, int n,
                       const int *ndims, int64_t (*dims)[4],
                       const ein_options *opt, const ein_binding *b) {
  const ein_problem *p = ein_binding_problem(b);
  double combos = 1;
  for (int a = 0; a < p->naxes; a++) combos *= (double)p->axes[a].size;
  if (combos > 4096) return;
  double in[3][4096];
  DLTensor x[3];
  const DLTensor *xs[3];
  unsigned seed = 1;
  for (int i = 0; i < n; i++) {
    /* Sizes other than 0 too: the reference's strides multiply them. */
    double numel = 1, span = 1;
    for (int d = 0; d < ndims[i]; d++) {
      numel *= (double)dims[i][d];
      span *= dims[i][d] ? (double)dims[i][d] : 1;
    }
    if (span > 4096) return;
    for (int64_t e = 0; e < (int64_t)numel; e++) {
      seed = seed * 1103515245u + 12345u;
      in[i][e] = (double)(seed >> 8 & 0xFFFF) / 32768.0 - 1.0;
    }
    x[i] = (DLTensor){.data = in[i], .device = {kDLCPU, 0},
                      .ndim = ndims[i], .dtype = {kDLFloat, 64, 1},
                      .shape = dims[i]};
    xs[i] = &x[i];
  }
  int ondim = ein_binding_output_ndim(b);
  int64_t oshape[EIN_MAX_DIMS], onumel = 1;
  memcpy(oshape, ein_binding_output_shape(b), sizeof(int64_t) * (size_t)ondim);
  double ospan = 1;
  for (int d = 0; d < ondim; d++) {
    onumel *= oshape[d];
    ospan *= oshape[d] ? (double)oshape[d] : 1;
  }
  if (ospan > 4096) return;
  static double out[4096], want[4096];
  DLTensor o = {.data = out, .device = {kDLCPU, 0}, .ndim = ondim,
                .dtype = {kDLFloat, 64, 1}, .shape = oshape};
  int ref = ref_eval(p, xs, want, onumel);
  ein_status st = ein_eval(ctx, text, xs, n, &o, opt);
  if (ref < 0) { /* max/min over an empty axis: einc must refuse */
    if (st != EIN_ERR_BAD_REDUCTION) abort();
    return;
  }
  /* Sizes that multiply past int64 somewhere in the plan are refused. */
  if (st == EIN_ERR_OVERFLOW) return;
  if (st != EIN_OK) {
    fprintf(stderr, "bound but failed to evaluate: %s\n",
            ein_last_error(ctx)->message);
    abort();
  }
  double err = 0, norm = 0;
  for (int64_t e = 0; e < onumel; e++) {
    if (isnan(want[e]) != isnan(out[e])) abort();
    if (isnan(want[e])) continue;
    err += (out[e] - want[e]) * (out[e] - want[e]);
    norm += want[e] * want[e];
  }
  if (sqrt(err) > 1e-9 * (sqrt(norm) > 1 ? sqrt(norm) : 1)) {
    fprintf(stderr, "wrong answer: error %g, norm %g\n", sqrt(err),
            sqrt(norm));
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint8_t ctl = data[0], len_ctl = data[1];
  size_t pos = 2;
  int n = 1 + ctl % 3;
  int ndims[3] = {0, 0, 0};
  int64_t dims[3][4];
  for (int i = 0; i < n; i++) {
    if (pos >= size) return 0;
    ndims[i] = data[pos++] % 5;
    for (int d = 0; d < ndims[i]; d++) {
      if (pos >= size) return 0;
      dims[i][d] = sizes[data[pos++] % 16];
    }
  }
  char *text = malloc(size - pos + 1);
  if (!text) return 0;
  memcpy(text, data + pos, size - pos);
  text[size - pos] = 0;

  ein_length lengths[1] = {{len_ctl & 0x80 ? "h" : "b", sizes[len_ctl % 16]}};
  ein_options opt = {
      .dialect = (ctl >> 2) & 1 ? EIN_DIALECT_NUMPY : EIN_DIALECT_EINOPS,
      .reduction = (ein_reduction)((ctl >> 3) % 7),
      .lengths = lengths,
      .nlengths = (len_ctl & 0x40) ? 1 : 0,
      .backend = EIN_BACKEND_CPU};
  const int64_t *shapes[3] = {dims[0], dims[1], dims[2]};
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) == EIN_OK) {
    ein_binding *b = NULL;
    if (ein_bind_shapes(ctx, text, shapes, ndims, n, &opt, &b) == EIN_OK) {
      for (int a = 0; a < ein_binding_naxes(b); a++)
        if (ein_binding_axis(b, a).size < 0) abort(); /* never negative */
      check_eval(ctx, text, n, ndims, dims, &opt, b);
      ein_binding_destroy(b);
    }
    char msg[512];
    ein_error_format(ein_last_error(ctx), msg, sizeof msg);
    ein_ctx_destroy(ctx);
  }
  free(text);
  return 0;
}
