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

/* One-line recorders for errors that have no place in the expression:
 * each records its message as ein_error_set does (no text, no spans) and
 * returns its status, one function per class of error, so a call site is
 *   if (!p) return ein_fail_memory(err, "out of memory while planning");
 * The function names the status; the message stays the caller's words. */
ein_status ein_fail(ein_error_rec *err, ein_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* EIN_ERR_NO_MEMORY: a host allocation failed. */
ein_status ein_fail_memory(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* EIN_ERR_DEVICE_MEMORY: a device allocation failed. */
ein_status ein_fail_device_memory(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* EIN_ERR_DEVICE: no such device, or memory on the wrong side. */
ein_status ein_fail_device(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* EIN_ERR_BACKEND: a CUDA, cuBLAS, NVRTC or compiler call failed. */
ein_status ein_fail_backend(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* EIN_ERR_INTERNAL: einc broke its own rule (a bug). */
ein_status ein_fail_internal(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* EIN_ERR_INVALID_ARGUMENT: the caller passed NULL or a bad value. */
ein_status ein_fail_argument(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* EIN_ERR_LIMIT: past one of einc's fixed limits. */
ein_status ein_fail_limit(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* EIN_ERR_DTYPE: dtypes that do not go together. */
ein_status ein_fail_dtype(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* EIN_ERR_BAD_SHAPE: a tensor's shape or strides that cannot be used. */
ein_status ein_fail_shape(ein_error_rec *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes a name for a message: quoted, and shortened with "..." when longer
 * than 40 bytes, so that huge identifiers cannot crowd out the message. */
void ein_quote_name(char *buf, size_t cap, const char *name, size_t len);

#endif
