/*
 * error.c - error records and their caret rendering.
 *
 * Rendering maps each byte of the expression to one display column
 * (whitespace becomes ' ', other unprintable bytes '?'), so byte offsets are
 * columns and carets line up even for tabs, newlines and UTF-8.
 */
#include "error.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"

void ein_error_init(ein_error_rec *err) {
  memset(err, 0, sizeof *err);
  err->pub.status = EIN_OK;
  err->pub.message = err->message;
}

void ein_error_clear(ein_error_rec *err) {
  ein_free(err->expr_copy);
  ein_error_init(err);
}

ein_status ein_error_vset(ein_error_rec *err, ein_status status,
                          const char *expr, size_t expr_len,
                          const ein_span *spans, int nspans, const char *fmt,
                          va_list ap) {
  ein_error_clear(err);
  err->pub.status = status;
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  if (expr) {
    err->expr_copy = ein_strndup(expr, expr_len);
    if (err->expr_copy) {
      err->pub.expr = err->expr_copy;
      err->pub.expr_len = expr_len;
      for (int i = 0; i < nspans && i < 2; i++) {
        ein_span s = spans[i];
        if (s.offset > expr_len) s.offset = expr_len;
        if (s.length > expr_len - s.offset) s.length = expr_len - s.offset;
        err->pub.spans[err->pub.nspans++] = s;
      }
    }
  }
  return status;
}

ein_status ein_error_set(ein_error_rec *err, ein_status status,
                         const char *expr, size_t expr_len,
                         const ein_span *spans, int nspans, const char *fmt,
                         ...) {
  va_list ap;
  va_start(ap, fmt);
  ein_status s =
      ein_error_vset(err, status, expr, expr_len, spans, nspans, fmt, ap);
  va_end(ap);
  return s;
}

ein_status ein_fail(ein_error_rec *err, ein_status status, const char *fmt,
                    ...) {
  va_list ap;
  va_start(ap, fmt);
  ein_error_vset(err, status, NULL, 0, NULL, 0, fmt, ap);
  va_end(ap);
  return status;
}

/* The per-class recorders differ only in their status. */
#define DEFINE_FAIL(NAME, STATUS)                                              \
  ein_status NAME(ein_error_rec *err, const char *fmt, ...) {                  \
    va_list ap;                                                                \
    va_start(ap, fmt);                                                         \
    ein_error_vset(err, STATUS, NULL, 0, NULL, 0, fmt, ap);                    \
    va_end(ap);                                                                \
    return STATUS;                                                             \
  }

DEFINE_FAIL(ein_fail_memory, EIN_ERR_NO_MEMORY)
DEFINE_FAIL(ein_fail_device_memory, EIN_ERR_DEVICE_MEMORY)
DEFINE_FAIL(ein_fail_device, EIN_ERR_DEVICE)
DEFINE_FAIL(ein_fail_backend, EIN_ERR_BACKEND)
DEFINE_FAIL(ein_fail_internal, EIN_ERR_INTERNAL)
DEFINE_FAIL(ein_fail_argument, EIN_ERR_INVALID_ARGUMENT)
DEFINE_FAIL(ein_fail_limit, EIN_ERR_LIMIT)
DEFINE_FAIL(ein_fail_dtype, EIN_ERR_DTYPE)
DEFINE_FAIL(ein_fail_shape, EIN_ERR_BAD_SHAPE)

void ein_quote_name(char *buf, size_t cap, const char *name, size_t len) {
  enum { MAX_SHOWN = 40 };
  if (len > MAX_SHOWN)
    snprintf(buf, cap, "'%.*s...'", MAX_SHOWN - 3, name);
  else
    snprintf(buf, cap, "'%.*s'", (int)len, name);
}

/* ---------------------------------------------------------- rendering */

/* A bounded writer that still counts what it could not store. */
typedef struct writer {
  char *buf;
  size_t cap, len;
} writer;

static void put(writer *w, char c) {
  if (w->len + 1 < w->cap) w->buf[w->len] = c;
  w->len++;
}

static void puts_n(writer *w, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) put(w, s[i]);
}

static void put_str(writer *w, const char *s) { puts_n(w, s, strlen(s)); }

static char display_byte(unsigned char c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
      c == '\f')
    return ' ';
  if (c < 0x20 || c >= 0x7f) return '?';
  return (char)c;
}

enum { WINDOW = 76, ELIDE = 3 };

/* Shows expr[start, end) and a caret line marking the spans inside it. */
static void put_excerpt(writer *w, const ein_error *e, size_t start,
                        size_t end) {
  put_str(w, "  ");
  if (start > 0) put_str(w, "...");
  for (size_t i = start; i < end; i++)
    put(w, display_byte((unsigned char)e->expr[i]));
  if (end < e->expr_len) put_str(w, "...");
  put(w, '\n');

  /* The caret line covers [start, end] (end itself for a span at EOF). */
  size_t width = end - start + 1;
  char marks[WINDOW + 2];
  memset(marks, ' ', sizeof marks);
  size_t last = 0;
  for (int s = e->nspans - 1; s >= 0; s--) { /* spans[0] drawn last, wins */
    size_t off = e->spans[s].offset, len = e->spans[s].length;
    if (off < start || off > end) continue;
    if (len == 0) len = 1;
    for (size_t i = 0; i < len && off - start + i < width; i++) {
      marks[off - start + i] = i == 0 ? '^' : '~';
      if (off - start + i + 1 > last) last = off - start + i + 1;
    }
  }
  put_str(w, "  ");
  if (start > 0) put_str(w, "   ");
  puts_n(w, marks, last);
  put(w, '\n');
}

/* A window of at most WINDOW bytes around the span at `off`. */
static void window_around(const ein_error *e, size_t off, size_t len,
                          size_t *start, size_t *end) {
  if (e->expr_len <= WINDOW) {
    *start = 0;
    *end = e->expr_len;
    return;
  }
  size_t lead = WINDOW / 3;
  *start = off > lead ? off - lead : 0;
  /* keep a long span's start visible and as much of it as fits */
  if (len > WINDOW - lead && off > ELIDE) *start = off - ELIDE;
  *end = *start + WINDOW;
  if (*end > e->expr_len) {
    *end = e->expr_len;
    *start = *end - WINDOW;
  }
}

size_t ein_error_format(const ein_error *e, char *buf, size_t cap) {
  writer w = {buf, cap, 0};
  if (!e) {
    put_str(&w, "error: (no error record)\n");
  } else {
    put_str(&w, e->status == EIN_OK ? "ok: " : "error: ");
    put_str(&w, e->message ? e->message : "");
    put(&w, '\n');
    if (e->expr && e->nspans > 0) {
      size_t start, end;
      window_around(e, e->spans[0].offset, e->spans[0].length, &start, &end);
      put_excerpt(&w, e, start, end);
      if (e->nspans > 1) {
        size_t off1 = e->spans[1].offset;
        if (off1 < start || off1 > end) {
          window_around(e, off1, e->spans[1].length, &start, &end);
          put_excerpt(&w, e, start, end);
        }
      }
    }
  }
  if (cap > 0) buf[w.len < cap ? w.len : cap - 1] = '\0';
  return w.len;
}
