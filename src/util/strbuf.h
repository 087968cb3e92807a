/*
 * strbuf.h - a growable string for reports. Appends after an allocation
 * failure are ignored and the buffer remembers the failure (sb->failed).
 */
#ifndef EIN_UTIL_STRBUF_H
#define EIN_UTIL_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ein_strbuf {
  char *data; /* NUL-terminated once anything was appended */
  size_t len, cap;
  bool failed;
} ein_strbuf;

void ein_strbuf_printf(ein_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends len raw bytes (keys may hold NULs). */
void ein_strbuf_append(ein_strbuf *sb, const void *data, size_t len);
/* Appends s as a JSON string literal, quotes included. */
void ein_strbuf_json_string(ein_strbuf *sb, const char *s);
void ein_strbuf_free(ein_strbuf *sb);

/* Hands the text to a caller's buffer as snprintf does (at most cap bytes
 * with the NUL; buf may be NULL when cap is 0), frees sb, and returns the
 * full length (0 when the text could not be built). */
size_t ein_strbuf_deliver(ein_strbuf *sb, char *buf, size_t cap);

#endif
