/*
 * operand.h - a test input over a buffer of its own, for the CPU kernel
 * tests that call a step directly: compact, or as a strided, offset view
 * (each axis but the last padded by one, the first element 3 elements
 * into the buffer), so kernels meet the layouts users hand them.
 */
#ifndef EIN_TESTS_OPERAND_H
#define EIN_TESTS_OPERAND_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "dtype.h"

typedef struct operand {
  DLTensor t;
  int64_t shape[8], strides[8];
  char *buf;
} operand;

/* Lays out x (nd axes of lengths sh) over a new zeroed buffer; returns
 * the number of elements from the view's first element to the end of
 * the buffer, which the caller fills. */
static inline int64_t operand_layout(operand *x, ein_dtype dt, int nd,
                                     const int64_t *sh, bool padded) {
  int64_t st = 1, pad = padded ? 1 : 0;
  for (int d = nd - 1; d >= 0; d--) {
    x->shape[d] = sh[d];
    x->strides[d] = st;
    st *= sh[d] + (d < nd - 1 ? pad : 0);
  }
  int64_t off = padded ? 3 : 0;
  size_t esz = ein_dtype_size(dt);
  x->buf = calloc((size_t)(st + off), esz);
  x->t = (DLTensor){.data = x->buf + off * (int64_t)esz,
                    .ndim = nd,
                    .shape = x->shape,
                    .strides = x->strides,
                    .dtype = ein_dtype_to_dl(dt),
                    .device = {kDLCPU, 0}};
  return st;
}

#endif
