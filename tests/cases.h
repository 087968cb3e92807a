/*
 * cases.h - helpers shared by the table-driven binding tests: shapes and
 * options written as short strings, bound through the public API.
 *   shapes: "2x3 4x5", "scalar", "" (no inputs), "-3" (a negative size)
 *   opts:   "numpy", "reduce=mean", "h=8", comma-separated
 */
#ifndef EIN_TEST_CASES_H
#define EIN_TEST_CASES_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ein.h"
#include "test_limits.h"

/* One entry of error_cases.inc (test_errors and test_bad_inputs): the
 * inputs, the status, the culprit's span, the other span (-1: none), and
 * the exact message. */
typedef struct err_case {
  const char *expr, *shapes, *opts;
  ein_status status;
  int off, len;   /* spans[0]; -1: no span */
  int off2, len2; /* spans[1]; -1: none */
  const char *message;
} err_case;

#define SYN EIN_ERR_SYNTAX /* shorthand used by error_cases.inc */

typedef struct case_input {
  int n;
  int ndims[TEST_MAX_OPERANDS];
  int64_t dims[TEST_MAX_OPERANDS][EIN_MAX_DIMS];
  const int64_t *shapes[TEST_MAX_OPERANDS];
  ein_options options;
  ein_length lengths[32];
  char names[32][32];
} case_input;

static inline void parse_case_shapes(const char *text, case_input *in) {
  in->n = 0;
  const char *p = text;
  while (*p) {
    while (*p == ' ') p++;
    if (!*p) break;
    int i = in->n++;
    in->ndims[i] = 0;
    in->shapes[i] = in->dims[i];
    if (strncmp(p, "scalar", 6) == 0) {
      p += 6;
      continue;
    }
    for (;;) {
      char *end;
      in->dims[i][in->ndims[i]++] = strtoll(p, &end, 10);
      p = end;
      if (*p != 'x') break;
      p++;
    }
  }
}

static inline void parse_case_opts(const char *text, case_input *in) {
  memset(&in->options, 0, sizeof in->options);
  in->options.lengths = in->lengths;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text ? text : "");
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (strcmp(tok, "numpy") == 0) {
      in->options.dialect = EIN_DIALECT_NUMPY;
    } else if (strncmp(tok, "reduce=", 7) == 0) {
      if (ein_reduction_parse(tok + 7, &in->options.reduction) != EIN_OK) {
        fprintf(stderr, "bad reduction in a case table: %s\n", tok + 7);
        abort();
      }
    } else {
      char *eq = strchr(tok, '=');
      int k = in->options.nlengths++;
      snprintf(in->names[k], sizeof in->names[k], "%.*s", (int)(eq - tok),
               tok);
      in->lengths[k].name = in->names[k];
      in->lengths[k].size = strtoll(eq + 1, NULL, 10);
    }
  }
}

/* Binds expr to the case's shapes; *out is the binding or NULL. */
static inline ein_status bind_case(ein_ctx *ctx, const char *expr,
                                   const char *shapes, const char *opts,
                                   ein_binding **out) {
  static case_input in;
  memset(&in, 0, sizeof in);
  parse_case_shapes(shapes, &in);
  parse_case_opts(opts, &in);
  return ein_bind_shapes(ctx, expr, in.shapes, in.ndims, in.n, &in.options,
                         out);
}

#endif
