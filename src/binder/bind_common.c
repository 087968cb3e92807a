/*
 * bind_common.c - what every step of the binder uses (bind_internal.h):
 * spans, failing with a message and carets, an axis's and an operand's
 * name for messages, and the table of axes by name.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bind_internal.h"
#include "checked.h"
#include "shape_text.h"

ein_span span_of(size_t offset, size_t length) {
  return (ein_span){offset, length};
}

ein_status bind_fail(binder *b, ein_status status, const ein_span *spans,
                     int nspans, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ein_error_vset(b->err, status, b->ast->src, b->ast->len, spans, nspans, fmt,
                 ap);
  va_end(ap);
  return status;
}

ein_status bind_no_memory(binder *b) {
  return ein_fail_memory(b->err, "out of memory while binding shapes");
}

/* The axis's name for messages: 'h', '3' or "dim 0 of '...'". */
void axis_name(const binder *b, int a, char *buf, size_t cap) {
  const axis_work *w = &b->ax[a];
  switch (w->origin) {
  case AXIS_NAMED: ein_quote_name(buf, cap, w->name, w->name_len); break;
  case AXIS_ANON: snprintf(buf, cap, "'%lld'", (long long)w->size); break;
  case AXIS_ELLIPSIS:
    snprintf(buf, cap, "dim %d of '...'", w->ellipsis_pos);
    break;
  }
}

/* "operand 2" or "the output". */
void operand_name(int operand, char *buf, size_t cap) {
  if (operand < 0)
    snprintf(buf, cap, "the output");
  else
    snprintf(buf, cap, "operand %d", operand + 1);
}

/* ------------------------------------------------------------ step 2 */

static size_t name_hash(const char *name, size_t len) {
  size_t h = 1469598103934665603u;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)name[i]) * 1099511628211u;
  return h;
}

/* The by_name slot of a name: its axis, or the empty slot it would take. */
size_t name_slot(const binder *b, const char *name, size_t len) {
  size_t mask = 2 * (size_t)b->cap_axes - 1;
  for (size_t i = name_hash(name, len) & mask;; i = (i + 1) & mask) {
    int a = b->by_name[i];
    if (a < 0 || (b->ax[a].name_len == len &&
                  memcmp(b->ax[a].name, name, len) == 0))
      return i;
  }
}

int find_named(const binder *b, const char *name, size_t len) {
  return b->cap_axes ? b->by_name[name_slot(b, name, len)] : -1;
}
