/*
 * plan_key.h - a tensor's part of a plan-cache key, laid out in this one
 * place: its dtype and rank (a byte each), then each dim's size and
 * stride as plans see them (two int64s a dim; ein_tensor_stride: compact
 * for NULL strides, 0 for a size-1 dim), so two tensors one plan serves
 * give the same bytes. plain_eval.c writes it into a call's key and a
 * plan's layouts; plan_object.c reads the output's part back
 * (ein_key_tensor_compact); ein.h's ein_cache_key_tensor hands it to
 * callers that key plans their own way. Takes a well-formed tensor
 * (tensors.h); owns nothing.
 */
#ifndef EIN_PLAN_KEY_H
#define EIN_PLAN_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "ein.h"
#include "strbuf.h"

/* The stride of dim d in elements as plans see it (and keys hold it):
 * compact when strides is NULL, 0 for a size-1 dim, whose stride never
 * matters. */
int64_t ein_tensor_stride(const DLTensor *t, int d);

/* Bytes of the part of a tensor of rank ndim. */
static inline size_t ein_key_tensor_size(int ndim) {
  return 2 + (size_t)ndim * 2 * sizeof(int64_t);
}

/* Writes t's part (dtype dt, rank at most EIN_MAX_DIMS) into
 * v[0 .. ein_key_tensor_size(t->ndim)). */
void ein_key_tensor_write(unsigned char *v, const DLTensor *t, ein_dtype dt);

/* Appends t's part to a key in one append. */
void ein_key_tensor(ein_strbuf *k, const DLTensor *t, ein_dtype dt);

/* Whether a part (len bytes, as written above) describes a C-contiguous
 * tensor, size-1 dims aside; an empty part (no tensor) counts as one. */
bool ein_key_tensor_compact(const char *part, size_t len);

#endif
