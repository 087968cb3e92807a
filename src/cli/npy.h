/*
 * npy.h - NumPy .npy files for `einc eval`: read (format versions 1, 2 and
 * 3; C and Fortran order; little-endian f2/f4/f8, c8/c16 (complex64 and
 * complex128), i1-i8, u1-u8, b1, and
 * the 2-byte void '<V2' or '|V2' as bf16, the way ml_dtypes' bfloat16 is
 * saved) and write (version 1, C order; bf16 as '<V2') atomically, through
 * a temporary file in the same directory that is renamed into place only
 * when complete.
 */
#ifndef EINC_NPY_H
#define EINC_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "dtype.h"
#include "ein.h"

typedef struct npy_array {
  DLTensor t; /* points into the fields below */
  int64_t shape[EIN_MAX_DIMS];
  int64_t strides[EIN_MAX_DIMS];
  void *data; /* owned */
} npy_array;

/* Reads path into *out. On failure writes a message to msg and returns
 * false; *out then owns nothing. The data must be exactly what the header
 * promises: fewer bytes are a truncated file, more are an error too. */
bool npy_read(const char *path, npy_array *out, char *msg, size_t cap);

/* The same from an open stream positioned at the file's start (the fuzz
 * target reads from memory); `path` names it in messages. A stream that
 * cannot seek skips the size check before allocating. */
bool npy_read_stream(FILE *f, const char *path, npy_array *out, char *msg,
                     size_t cap);

/* Reads only the header of the .npy file open at f (`einc plan` and
 * `check` take files in place of shapes): its dtype and shape, checked as
 * npy_read_stream checks them, the data's size included, without reading
 * the data. False with the message in msg. */
bool npy_read_header(FILE *f, const char *path, ein_dtype *dt, int *ndim,
                     int64_t *shape, char *msg, size_t cap);

/* Writes a C-contiguous tensor to path atomically: on failure no file is
 * left (an older file at path stays as it was). */
bool npy_write(const char *path, const DLTensor *t, char *msg, size_t cap);

/* Writes t as a .npy file to an open stream (`einc eval -o -` to stdout),
 * flushed; `name` names it in messages. False, with the message, when a
 * write fails. */
bool npy_write_stream(FILE *f, const DLTensor *t, const char *name,
                      char *msg, size_t cap);

void npy_free(npy_array *a);

#endif
