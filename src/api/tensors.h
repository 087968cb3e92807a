/*
 * tensors.h - what the API asks of the tensors a call passes, before any
 * plan is looked at: each tensor well formed (dims, sizes, dtype, data
 * pointer, a byte reach that int64 and the address space hold), an output
 * of the expression's shape that writes each element once and shares no
 * byte with an input, and the one backend and device the tensors live on,
 * with the options' backend and EIN_MEMORY_FREE resolved against it.
 * Takes DLPack tensors and options; gives a status, with the message on
 * the calling thread's record (ctx_internal.h). Owns nothing.
 */
#ifndef EIN_TENSORS_H
#define EIN_TENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctx_internal.h"
#include "dtype.h"
#include "plan_key.h" /* ein_tensor_stride */

/* "input 2" or "the output" (index -1), into buf (32 bytes hold any). */
const char *ein_tensor_name(int index, char *buf, size_t cap);

/* The bytes a non-empty tensor of esz-byte elements touches, as [lo, hi)
 * around the start of its first element (lo <= 0 < hi). False when they
 * pass int64, with *dim the dim whose stride did it (-1: the last
 * element's own size). */
bool ein_tensor_reach(const DLTensor *t, int64_t esz, int64_t *lo,
                      int64_t *hi, int *dim);

/* What every tensor must satisfy (index -1 is the output); *dt its
 * dtype. needs_data: a non-empty tensor must have a data pointer. */
ein_status ein_check_tensor(ein_thread_rec *me, const DLTensor *t, int index,
                            bool needs_data, ein_dtype *dt);

/* The operand count, the array and each input. */
ein_status ein_check_inputs(ein_thread_rec *me, const DLTensor *const *inputs,
                            int n, bool needs_data);

/* The backend (and device) of the call, from the options' backend and
 * where the tensors live; the options the cache key reads are checked
 * here too. */
ein_status ein_resolve_backend(ein_thread_rec *me, const ein_options *o,
                               const DLTensor *const *inputs, int n,
                               const DLTensor *output,
                               const ein_backend_entry **out, int *device);

/* *use: o itself, or *local with EIN_MEMORY_FREE resolved into bytes on
 * the device the call runs on (opened for it). */
ein_status ein_resolve_memory_limit(ein_thread_rec *me, const ein_options *o,
                                    const ein_backend_entry *kind, int device,
                                    ein_options *local,
                                    const ein_options **use);

/* A given output tensor has the expression's shape and strides that give
 * each element its own address. */
ein_status ein_check_output_shape(ein_thread_rec *me, const DLTensor *output,
                                  int ndim, const int64_t *shape);

/* Whether two elements of t share an address (writes would collide), and
 * whether the bytes two tensors touch overlap (for outputs: einc does not
 * compute in place). Sizes and strides must have passed the checks. */
bool ein_tensor_self_overlapping(const DLTensor *t);
bool ein_tensors_overlap(const DLTensor *a, const DLTensor *b);

/* The byte range [lo, hi) a checked tensor touches (lo == hi: none). */
void ein_tensor_byte_range(const DLTensor *t, uintptr_t *lo, uintptr_t *hi);

#endif
