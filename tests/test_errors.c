/*
 * test_errors.c - the error catalogue: each case asserts the status, the
 * spans (offset and length of the culprit, and of the other place where
 * two disagree) and the exact message. Also the caret rendering, the limits
 * and invalid arguments.
 *
 * Run with EIN_DUMP=1 to print what the library says for every case.
 */
#include <stdlib.h>

#include "cases.h"
#include "error.h" /* ein_quote_name */
#include "harness.h"

static const err_case cases[] = {
#include "error_cases.inc"
};

static void run_case(ein_ctx *ctx, const err_case *c, bool dump) {
  ein_binding *b = NULL;
  ein_status st = bind_case(ctx, c->expr, c->shapes, c->opts, &b);
  const ein_error *e = ein_last_error(ctx);
  int off = e->nspans > 0 ? (int)e->spans[0].offset : -1;
  int len = e->nspans > 0 ? (int)e->spans[0].length : -1;
  int off2 = e->nspans > 1 ? (int)e->spans[1].offset : -1;
  int len2 = e->nspans > 1 ? (int)e->spans[1].length : -1;
  if (dump) {
    printf("{\"%s\", \"%s\", \"%s\", %d, %d, %d, %d, %d,\n \"%s\"},\n",
           c->expr, c->shapes, c->opts, st, off, len, off2, len2,
           e->message);
  }
  CHECK(st == c->status && b == NULL, "'%s' %s: status %d (%s), want %d",
        c->expr, c->shapes, st, ein_status_name(st), c->status);
  CHECK(e->status == st, "'%s': recorded status %d", c->expr, e->status);
  CHECK(off == c->off && len == c->len && off2 == c->off2 && len2 == c->len2,
        "'%s': spans %d+%d, %d+%d; want %d+%d, %d+%d", c->expr, off, len,
        off2, len2, c->off, c->len, c->off2, c->len2);
  CHECK_STR(e->message, c->message, "'%s' %s %s", c->expr, c->shapes,
            c->opts);
  ein_binding_destroy(b);
}

static void check_format(ein_ctx *ctx) {
  ein_binding *b;
  bind_case(ctx, "b h i d, b h j d -> b h i j", "8x16x32x4 8x8x32x4", "", &b);
  char out[1024];
  size_t n = ein_error_format(ein_last_error(ctx), out, sizeof out);
  CHECK_STR(out,
            "error: axis 'h' is 8 in operand 2 but 16 in operand 1\n"
            "  b h i d, b h j d -> b h i j\n"
            "    ^        ^\n",
            "caret rendering of two spans");
  CHECK(n == strlen(out), "format length %zu", n);
  /* truncation reports the full length, like snprintf */
  char tiny[8];
  size_t need = ein_error_format(ein_last_error(ctx), tiny, sizeof tiny);
  CHECK(need == n && strcmp(tiny, "error: ") == 0, "truncated: %zu '%s'",
        need, tiny);

  /* tabs and newlines are columns of their own */
  bind_case(ctx, "a\tb,\n\tc -> a x", "2x3 4", "", &b);
  ein_error_format(ein_last_error(ctx), out, sizeof out);
  CHECK_STR(out,
            "error: axis 'x' is in the output but in no input, so its size "
            "is unknown; give it with a length binding (x=N) or write a "
            "number\n"
            "  a b,  c -> a x\n"
            "               ^\n",
            "whitespace display");

  /* UTF-8: carets count characters, not bytes ('β' is two bytes and one
   * column), and a wide character takes two columns ('^~' under '形') */
  bind_case(ctx, "\xce\xb1 \xce\xb2, \xce\xb2 \xce\xb3 -> \xce\xb1 \xce\xb3",
            "2x3 4x5", "", &b);
  ein_error_format(ein_last_error(ctx), out, sizeof out);
  CHECK_STR(out,
            "error: axis '\xce\xb2' is 4 in operand 2 but 3 in operand 1\n"
            "  \xce\xb1 \xce\xb2, \xce\xb2 \xce\xb3 -> \xce\xb1 \xce\xb3\n"
            "    ^  ^\n",
            "carets under two-byte names");
  bind_case(ctx, "\xe5\xbd\xa2\xe7\x8a\xb6 b, \xe5\xbd\xa2\xe7\x8a\xb6 c -> b c",
            "2x3 4x5", "", &b);
  ein_error_format(ein_last_error(ctx), out, sizeof out);
  CHECK_STR(out,
            "error: axis '\xe5\xbd\xa2\xe7\x8a\xb6' is 4 in operand 2 but 2 in "
            "operand 1\n"
            "  \xe5\xbd\xa2\xe7\x8a\xb6 b, \xe5\xbd\xa2\xe7\x8a\xb6 c -> b c\n"
            "  ^~~~    ^~~~\n",
            "carets under wide names");
  /* what a terminal must not get as is shows as one '?' per character */
  bind_case(ctx, "a \xe2\x80\xae\xff -> a", "2", "", &b);
  ein_error_format(ein_last_error(ctx), out, sizeof out);
  CHECK(strstr(out, "\n  a ?? -> a\n    ^\n") != NULL,
        "invisible and invalid shown as '?':\n%s", out);
  /* a long name is shortened between characters, never inside one */
  char name[64], quoted[96], want[96] = "'";
  for (int i = 0; i < 30; i++) memcpy(name + 2 * i, "\xce\xb1", 2);
  for (int i = 0; i < 18; i++) strcat(want, "\xce\xb1");
  strcat(want, "...'");
  ein_quote_name(quoted, sizeof quoted, name, 60);
  CHECK_STR(quoted, want, "a long UTF-8 name quoted");

  /* a long expression is shown as a window around the culprit */
  char expr[4096];
  size_t len = 0;
  for (int i = 0; i < 60; i++)
    len += (size_t)snprintf(expr + len, sizeof expr - len, "a%d ", i);
  snprintf(expr + len, sizeof expr - len, "-> a0 zz");
  char ones[256];
  size_t olen = 0;
  for (int i = 0; i < 60; i++)
    olen += (size_t)snprintf(ones + olen, sizeof ones - olen, "%s1",
                             i ? "x" : "");
  bind_case(ctx, expr, ones, "", &b);
  ein_error_format(ein_last_error(ctx), out, sizeof out);
  const char *line2 = strchr(out, '\n') + 1;
  CHECK(strncmp(line2, "  ...", 5) == 0, "window starts with ...: %s", out);
  const char *caret = strchr(strchr(line2, '\n') + 1, '^');
  const char *zz = strstr(line2, "zz");
  CHECK(caret && zz &&
            caret - (strchr(line2, '\n') + 1) == zz - line2,
        "caret under zz in the window:\n%s", out);
  CHECK(strlen(line2) < 200, "window is short: %zu", strlen(line2));

  /* two spans far apart: two excerpts */
  len = 0;
  len += (size_t)snprintf(expr + len, sizeof expr - len, "q ");
  for (int i = 0; i < 60; i++)
    len += (size_t)snprintf(expr + len, sizeof expr - len, "a%d ", i);
  snprintf(expr + len, sizeof expr - len, "q -> a0");
  bind_case(ctx, expr,
            "2x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1"
            "x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x3",
            "", &b);
  n = ein_error_format(ein_last_error(ctx), out, sizeof out);
  int carets = 0;
  for (const char *p = out; *p; p++) carets += *p == '^';
  int lines = 0;
  for (const char *p = out; *p; p++) lines += *p == '\n';
  CHECK(carets == 2 && lines == 5, "two excerpts (%d carets, %d lines):\n%s",
        carets, lines, out);

  /* no text: just the message */
  ein_error none = {.status = EIN_ERR_INVALID_ARGUMENT, .message = "m"};
  ein_error_format(&none, out, sizeof out);
  CHECK_STR(out, "error: m\n", "format without text");
}

/* Expressions and shapes generated by code: the limits. */
/* EIN_MAX_AXES + 1 distinct axes: operands of 64 dims of size 1, each
 * axis its own name. */
static void check_axis_limit(ein_ctx *ctx, char *expr) {
  int nops = EIN_MAX_AXES / 64 + 1;
  size_t len = 0;
  for (int op = 0; op < nops; op++) {
    for (int i = 0; i < 64; i++)
      len += (size_t)sprintf(expr + len, "x%d ", op * 64 + i);
    len += (size_t)sprintf(expr + len, op < nops - 1 ? "," : "->");
  }
  static const int64_t ones[64] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const int64_t **shapes = malloc(sizeof *shapes * (size_t)nops);
  int *ndims = malloc(sizeof *ndims * (size_t)nops);
  for (int op = 0; op < nops; op++) shapes[op] = ones, ndims[op] = 64;
  ein_binding *b = NULL;
  ein_status st = ein_bind_shapes(ctx, expr, shapes, ndims, nops, NULL, &b);
  char want[96];
  snprintf(want, sizeof want, "more than %d distinct axes; einc takes at most %d",
           EIN_MAX_AXES, EIN_MAX_AXES);
  CHECK(st == EIN_ERR_LIMIT && strcmp(ein_last_error(ctx)->message, want) == 0,
        "%d axes: %d %s", EIN_MAX_AXES + 1, st, ein_last_error(ctx)->message);
  ein_binding_destroy(b);
  free(shapes);
  free(ndims);
}

static void check_limits(ein_ctx *ctx) {
  char *expr = malloc((size_t)EIN_MAX_EXPR_BYTES + 64);
  ein_binding *b;
  /* EIN_MAX_OPERANDS + 1 operands: the comma after the last one allowed */
  size_t len = 0;
  for (int i = 0; i < EIN_MAX_OPERANDS + 1; i++)
    len += (size_t)snprintf(expr + len, 16, "%sa", i ? "," : "");
  snprintf(expr + len, 16, "->a");
  ein_status st = bind_case(ctx, expr, "", "", &b);
  size_t comma = 2 * (size_t)(EIN_MAX_OPERANDS - 1) + 1;
  CHECK(st == EIN_ERR_LIMIT && ein_last_error(ctx)->spans[0].offset == comma,
        "%d operands: %d at %zu", EIN_MAX_OPERANDS + 1, st,
        ein_last_error(ctx)->spans[0].offset);
  /* 64 operands are fine */
  len = 0;
  static char shapes[4096];
  size_t slen = 0;
  for (int i = 0; i < 64; i++) {
    len += (size_t)snprintf(expr + len, 16, "%sa", i ? "," : "");
    slen += (size_t)snprintf(shapes + slen, 8, "3 ");
  }
  snprintf(expr + len, 16, "->a");
  st = bind_case(ctx, expr, shapes, "", &b);
  CHECK(st == EIN_OK, "64 operands: %s", ein_last_error(ctx)->message);
  ein_binding_destroy(b);

  /* 65 dims in an operand; 64 are fine */
  len = 0;
  for (int i = 0; i < 65; i++)
    len += (size_t)snprintf(expr + len, 16, "a%d ", i);
  snprintf(expr + len, 16, "-> a0");
  st = bind_case(ctx, expr, "", "", &b);
  CHECK(st == EIN_ERR_LIMIT &&
            strcmp(ein_last_error(ctx)->message,
                   "operand 1 has more than 64 dims") == 0,
        "65 dims: %d %s", st, ein_last_error(ctx)->message);
  /* the caret is on the 65th dim, "a64", the last term */
  const ein_error *e65 = ein_last_error(ctx);
  size_t at64 = (size_t)(strstr(expr, "a64") - expr);
  CHECK(e65->nspans >= 1 && e65->spans[0].offset == at64 &&
            e65->spans[0].length == 3,
        "65 dims: culprit at %zu+%zu, want %zu+3",
        (size_t)e65->spans[0].offset, (size_t)e65->spans[0].length, at64);
  len = 0;
  slen = 0;
  for (int i = 0; i < 64; i++) {
    len += (size_t)snprintf(expr + len, 16, "a%d ", i);
    slen += (size_t)snprintf(shapes + slen, 8, "%s%d", i ? "x" : "",
                             i % 3 ? 1 : 2);
  }
  snprintf(expr + len, 16, "-> a63 a0");
  st = bind_case(ctx, expr, shapes, "", &b);
  CHECK(st == EIN_OK && ein_binding_output_ndim(b) == 2, "64 dims: %s",
        ein_last_error(ctx)->message);
  ein_binding_destroy(b);

  check_axis_limit(ctx, expr);

  /* a 64 KiB expression works; EIN_MAX_EXPR_BYTES + 1 is refused */
  memset(expr, ' ', 65536);
  memcpy(expr + 65536, "a -> a", 7);
  st = bind_case(ctx, expr, "5", "", &b);
  CHECK(st == EIN_OK && ein_binding_output_shape(b)[0] == 5, "64 KiB: %s",
        ein_last_error(ctx)->message);
  ein_binding_destroy(b);
  memset(expr, ' ', (size_t)EIN_MAX_EXPR_BYTES + 1);
  expr[EIN_MAX_EXPR_BYTES + 1] = '\0';
  st = bind_case(ctx, expr, "", "", &b);
  CHECK(st == EIN_ERR_LIMIT, "EIN_MAX_EXPR_BYTES + 1: %d", st);
  memset(expr, ' ', EIN_MAX_EXPR_BYTES);
  expr[EIN_MAX_EXPR_BYTES] = '\0';
  st = bind_case(ctx, expr, "", "numpy", &b);
  CHECK(st == EIN_ERR_OPERAND_COUNT, "EIN_MAX_EXPR_BYTES of spaces: %d %s", st,
        ein_last_error(ctx)->message);

  /* a 65-dim tensor */
  slen = 0;
  for (int i = 0; i < 65; i++)
    slen += (size_t)snprintf(shapes + slen, 8, "%s1", i ? "x" : "");
  int64_t dims65[65];
  for (int i = 0; i < 65; i++) dims65[i] = 1;
  const int64_t *sh[1] = {dims65};
  int nd[1] = {65};
  st = ein_bind_shapes(ctx, "... -> ...", sh, nd, 1, NULL, &b);
  CHECK(st == EIN_ERR_LIMIT, "65-dim tensor: %d", st);
  /* 32 dims through '...' are fine */
  nd[0] = 32;
  st = ein_bind_shapes(ctx, "a ... -> ... a", sh, nd, 1, NULL, &b);
  CHECK(st == EIN_OK && ein_binding_output_ndim(b) == 32, "32 dims: %d", st);
  ein_binding_destroy(b);
  free(expr);
}

static void check_arguments(ein_ctx *ctx) {
  ein_binding *b = (ein_binding *)1;
  CHECK(ein_bind_shapes(NULL, "a->a", NULL, NULL, 0, NULL, &b) ==
            EIN_ERR_INVALID_ARGUMENT,
        "NULL ctx");
  CHECK(ein_bind_shapes(ctx, NULL, NULL, NULL, 0, NULL, &b) ==
            EIN_ERR_INVALID_ARGUMENT,
        "NULL expression");
  CHECK(strcmp(ein_last_error(ctx)->message,
               "ein_bind: the expression is NULL") == 0,
        "NULL expression message: %s", ein_last_error(ctx)->message);
  CHECK(ein_bind_shapes(ctx, "a->a", NULL, NULL, 1, NULL, &b) ==
            EIN_ERR_INVALID_ARGUMENT,
        "NULL shapes");
  CHECK(ein_bind(ctx, "a->a", NULL, 1, NULL, &b) == EIN_ERR_INVALID_ARGUMENT,
        "NULL tensors");
  const DLTensor *none[1] = {NULL};
  CHECK(ein_bind(ctx, "a->a", none, 1, NULL, &b) == EIN_ERR_INVALID_ARGUMENT,
        "NULL tensor");
  CHECK(ein_bind(ctx, "a->a", none, -1, NULL, &b) == EIN_ERR_INVALID_ARGUMENT,
        "negative count");
  ein_options bad = {.dialect = (ein_dialect)7};
  CHECK(ein_bind_shapes(ctx, "a->a", NULL, NULL, 0, &bad, &b) ==
            EIN_ERR_INVALID_ARGUMENT,
        "bad dialect");
  bad = (ein_options){.reduction = (ein_reduction)99};
  int64_t three = 3;
  const int64_t *sh[1] = {&three};
  int nd[1] = {1};
  CHECK(ein_bind_shapes(ctx, "a->", sh, nd, 1, &bad, &b) ==
            EIN_ERR_INVALID_ARGUMENT,
        "bad reduction");
  bad = (ein_options){.nlengths = 2};
  CHECK(ein_bind_shapes(ctx, "a->", sh, nd, 1, &bad, &b) ==
            EIN_ERR_INVALID_ARGUMENT,
        "lengths without an array");
  ein_length nameless = {NULL, 3};
  bad = (ein_options){.lengths = &nameless, .nlengths = 1};
  CHECK(ein_bind_shapes(ctx, "a->", sh, nd, 1, &bad, &b) ==
            EIN_ERR_INVALID_ARGUMENT,
        "nameless length");
  int64_t out[EIN_MAX_DIMS];
  int ndim;
  CHECK(ein_output_shape(ctx, "a->a", NULL, 0, NULL, NULL, &ndim) ==
            EIN_ERR_INVALID_ARGUMENT,
        "NULL out shape");
  CHECK(ein_output_shape(ctx, "a->a", NULL, 0, NULL, out, &ndim) ==
            EIN_ERR_OPERAND_COUNT,
        "no tensors for one operand");
  /* a success clears the error */
  CHECK(ein_bind_shapes(ctx, "a->a", sh, nd, 1, NULL, &b) == EIN_OK &&
            ein_last_error(ctx)->status == EIN_OK,
        "success clears the error");
  ein_binding_destroy(b);
  /* every status has a name */
  for (int s = 0; s >= EIN_ERR_INTERNAL; s--)
    CHECK(strcmp(ein_status_name((ein_status)s), "unknown status") != 0,
          "status %d has a name", s);
  CHECK(strcmp(ein_status_name((ein_status)-99), "unknown status") == 0,
        "unknown status");
}

int main(void) {
  bool dump = getenv("EIN_DUMP") != NULL;
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) return 1;
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) run_case(ctx, &cases[i], dump);
  CHECK(n >= 60, "the catalogue has %d cases", n);
  check_format(ctx);
  check_limits(ctx);
  check_arguments(ctx);
  ein_ctx_destroy(ctx);
  return test_summary("errors");
}
