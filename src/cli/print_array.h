/*
 * print_array.h - `einc eval --print`: a host tensor as text, the way
 * numpy's repr shows it: "array([[1., 2.],\n       [3., 4.]],
 * dtype=float32)", floats with the fewest digits (at most 8 after the
 * point) that read back as the same value, scientific notation where numpy
 * takes it. Past CLI_PRINT_MAX elements only the first and last 3 of each
 * axis are shown around "...", with the shape, as numpy summarises.
 */
#ifndef EINC_PRINT_ARRAY_H
#define EINC_PRINT_ARRAY_H

#include <stdio.h>

#include "ein.h"

enum { CLI_PRINT_MAX = 1000 };

/* Prints t (C-contiguous, in host memory, a dtype einc knows) to f. */
void cli_print_array(FILE *f, const DLTensor *t);

#endif
