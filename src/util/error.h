/*
 * error.h - recording errors with their place in the expression.
 *
 * A failing stage fills an ein_error_rec: the status, a message that says
 * what was expected and what was found, and up to two spans (the culprit and
 * the place it disagrees with). The record keeps its own copy of the text so
 * the public ein_error stays valid after the caller's string is gone.
 */
#ifndef EIN_UTIL_ERROR_H
#define EIN_UTIL_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "ein.h"

enum { EIN_MESSAGE_BYTES = 4096 };

typedef struct ein_error_rec {
  ein_error pub;                    /* what ein_last_error() hands out */
  char message[EIN_MESSAGE_BYTES];  /* pub.message points here */
  char *expr_copy;                  /* pub.expr points here, owned */
} ein_error_rec;

/* An empty record (status EIN_OK). */
void ein_error_init(ein_error_rec *err);

/* Back to EIN_OK, releasing the text copy. */
void ein_error_clear(ein_error_rec *err);

/* Records an error and returns `status`. `expr` (may be NULL) is the text the
 * spans point into; spans may be NULL when nspans is 0. If copying the text
 * fails, the error keeps its message and loses only the caret display. */
ein_status ein_error_set(ein_error_rec *err, ein_status status,
                         const char *expr, size_t expr_len,
                         const ein_span *spans, int nspans, const char *fmt,
                         ...) __attribute__((format(printf, 7, 8)));

ein_status ein_error_vset(ein_error_rec *err, ein_status status,
                          const char *expr, size_t expr_len,
                          const ein_span *spans, int nspans, const char *fmt,
                          va_list ap);

/* Writes a name for a message: quoted, and shortened with "..." when longer
 * than 40 bytes, so that huge identifiers cannot crowd out the message. */
void ein_quote_name(char *buf, size_t cap, const char *name, size_t len);

#endif
