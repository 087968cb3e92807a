/*
 * error.c - error records and their caret rendering.
 *
 * Rendering shows the expression one character at a time and draws each
 * caret under the columns its character takes (utf8.h): 'α' is two bytes
 * and one column, '形' two columns. Whitespace becomes ' ', and what should
 * not reach a terminal as is (control and format characters, bytes that
 * are not UTF-8) becomes one '?', so carets line up for any text.
 */
#include "error.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "utf8.h"

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
  if (len > MAX_SHOWN) /* cut between characters, never inside one */
    snprintf(buf, cap, "'%.*s...'",
             (int)ein_utf8_floor(name, MAX_SHOWN - 3), name);
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

enum { WINDOW = 76, ELIDE = 3 };

/* The character at s: its length in bytes in *len and its columns, with
 * what is shown as '?' (see put_char) taking one. */
static size_t char_columns(const char *s, size_t *len) {
  int width = ein_utf8_char(s, len);
  return width < 0 ? 1 : (size_t)width;
}

/* Shows the character at s as a terminal should see it; returns its
 * length in bytes. */
static size_t put_char(writer *w, const char *s) {
  unsigned char c = (unsigned char)*s;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
      c == '\f') {
    put(w, ' ');
    return 1;
  }
  size_t len;
  if (ein_utf8_char(s, &len) < 0)
    put(w, '?');
  else
    puts_n(w, s, len);
  return len;
}

/* The mark under byte offset i: '^' where a span starts, '~' inside one,
 * ' ' elsewhere; spans[0] wins where two overlap. */
static char mark_at(const ein_error *e, size_t i) {
  for (int s = 0; s < e->nspans; s++) {
    size_t off = e->spans[s].offset, len = e->spans[s].length;
    if (i == off) return '^';
    if (i > off && i < off + len) return '~';
  }
  return ' ';
}

/* The caret line under expr[start, end] (end itself for a span at EOF):
 * each character's mark fills the columns it takes ('^~' under a wide
 * one). A column is never wider than its bytes, so the window fits. */
static void put_carets(writer *w, const ein_error *e, size_t start,
                       size_t end) {
  char marks[WINDOW + 8];
  size_t cols = 0, last = 0, len = 1;
  for (size_t i = start; i <= end && cols < sizeof marks; i += len) {
    size_t width = i < end ? char_columns(e->expr + i, &len) : 1;
    char m = mark_at(e, i);
    for (size_t k = 0; k < width && cols < sizeof marks; k++) {
      marks[cols++] = k > 0 && m == '^' ? '~' : m;
      if (m != ' ') last = cols;
    }
  }
  put_str(w, "  ");
  if (start > 0) put_str(w, "   ");
  puts_n(w, marks, last);
  put(w, '\n');
}

/* Shows expr[start, end) and the caret line under it. */
static void put_excerpt(writer *w, const ein_error *e, size_t start,
                        size_t end) {
  put_str(w, "  ");
  if (start > 0) put_str(w, "...");
  for (size_t i = start; i < end;) i += put_char(w, e->expr + i);
  if (end < e->expr_len) put_str(w, "...");
  put(w, '\n');
  put_carets(w, e, start, end);
}

static bool is_continuation(const ein_error *e, size_t i) {
  return ((unsigned char)e->expr[i] & 0xC0) == 0x80;
}

/* A window of about WINDOW bytes around the span at `off`. */
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
  /* never cut a character in two: widen over continuation bytes (10xxxxxx)
   * to its first and last byte, at most 3 of them as UTF-8 has */
  for (int k = 0; k < 3 && *start > 0 && is_continuation(e, *start); k++)
    --*start;
  for (int k = 0; k < 3 && *end < e->expr_len && is_continuation(e, *end); k++)
    ++*end;
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
