/* strbuf.c - growable strings (see strbuf.h). */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

static bool reserve(ein_strbuf *sb, size_t extra) {
  if (sb->failed) return false;
  if (sb->len + extra + 1 <= sb->cap) return true;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char *d = ein_realloc(sb->data, cap);
  if (!d) {
    sb->failed = true;
    return false;
  }
  sb->data = d;
  sb->cap = cap;
  return true;
}

void ein_strbuf_printf(ein_strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !reserve(sb, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

void ein_strbuf_append(ein_strbuf *sb, const void *data, size_t len) {
  if (!reserve(sb, len)) return;
  memcpy(sb->data + sb->len, data, len);
  sb->len += len;
  sb->data[sb->len] = 0;
}

void ein_strbuf_json_string(ein_strbuf *sb, const char *s) {
  ein_strbuf_printf(sb, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      ein_strbuf_printf(sb, "\\%c", c);
    else if (c < 0x20)
      ein_strbuf_printf(sb, "\\u%04x", c);
    else
      ein_strbuf_printf(sb, "%c", c);
  }
  ein_strbuf_printf(sb, "\"");
}

void ein_strbuf_free(ein_strbuf *sb) {
  ein_free(sb->data);
  sb->data = NULL;
  sb->len = sb->cap = 0;
}

size_t ein_strbuf_deliver(ein_strbuf *sb, char *buf, size_t cap) {
  size_t len = sb->failed ? 0 : sb->len;
  if (buf && cap > 0) {
    size_t n = len < cap - 1 ? len : cap - 1;
    if (n) memcpy(buf, sb->data, n);
    buf[n] = 0;
  }
  ein_strbuf_free(sb);
  return len;
}
