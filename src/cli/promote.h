/*
 * promote.h - numpy's promotion of mixed input dtypes for `einc eval`.
 *
 * Takes: the inputs read from .npy files. Gives: every input in the one
 * dtype numpy.result_type would give them (bool < integers < floats <
 * complex; an unsigned and a signed integer meet in a signed type twice
 * as wide, or f64 past 64 bits; an integer meets a float in the smallest
 * float holding it: 8 bits in f16, 16 in f32, wider in f64; bf16 meets
 * f16 in f32). The C API keeps one dtype per plan, so the CLI converts:
 * an input of another dtype is replaced by a converted copy (same shape
 * and strides). Conversions only widen, so every value is kept as numpy
 * keeps it.
 */
#ifndef EIN_CLI_PROMOTE_H
#define EIN_CLI_PROMOTE_H

#include <stdbool.h>

#include "npy.h"

/* The dtype numpy promotes a and b to. */
ein_dtype cli_promote_pair(ein_dtype a, ein_dtype b);

/* Converts inputs[0..n) to their common dtype in place (new buffers);
 * false when memory runs out (the inputs are then freed as usual by
 * npy_free, some converted, some not). */
bool cli_promote_inputs(npy_array *inputs, int n);

#endif
