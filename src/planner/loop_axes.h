/*
 * loop_axes.h - a LOOP step's iteration space in the form backends execute:
 * kept axes (written to dst) and reduced axes (dst stride 0), size-1 axes
 * dropped, sorted outermost first and fused where every operand is
 * contiguous across the pair.
 *
 * Takes a plan step (plan.h); gives plain arrays. Shared by the CPU loops
 * and the CUDA code generator so both see the same normal form.
 */
#ifndef EIN_LOOP_AXES_H
#define EIN_LOOP_AXES_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"

enum { EIN_LOOP_MAXAX = 64 };

typedef struct ein_loop_axes {
  int n;
  int64_t size[EIN_LOOP_MAXAX];
  int64_t st[EIN_LOOP_MAXAX][3]; /* element strides: dst, src0, src1 */
} ein_loop_axes;

/* Splits a LOOP or FILL step's axes into kept (sorted by dst stride) and
 * reduced (sorted by src0 stride), both fused. *empty is set when an axis
 * has size 0 (nothing to do). False when there are more axes than
 * EIN_LOOP_MAXAX. */
bool ein_loop_axes_split(const ein_step *s, ein_loop_axes *kept,
                         ein_loop_axes *red, bool *empty);

/* Fuses axis i+1 into axis i where all three strides are contiguous. */
void ein_loop_axes_fuse(ein_loop_axes *la);

/* Sorts axes outermost first by |stride| of operand `key` (stable). */
void ein_loop_axes_sort(ein_loop_axes *la, int key);

/* Removes axis `at`, returning its size and strides. */
void ein_loop_axes_take(ein_loop_axes *la, int at, int64_t *size,
                        int64_t st[3]);

/* Product of the sizes (1 for no axes). */
int64_t ein_loop_axes_volume(const ein_loop_axes *la);

/* Element offsets (per operand) of flat index idx, last axis fastest. */
void ein_loop_axes_offsets(const ein_loop_axes *la, int64_t idx,
                           int64_t off[3]);

/* A position in a loop_axes iteration, advanced one index at a time with
 * carries, so inner loops never divide: the per-operand offsets of the
 * current index are in off[]. */
typedef struct ein_loop_cursor {
  int64_t idx[EIN_LOOP_MAXAX];
  int64_t off[3];
} ein_loop_cursor;

/* Places the cursor at flat index `flat` (last axis fastest). */
void ein_loop_cursor_start(const ein_loop_axes *la, int64_t flat,
                           ein_loop_cursor *c);

/* Moves to the next flat index (wrapping to 0 after the last). */
static inline void ein_loop_cursor_next(const ein_loop_axes *la,
                                        ein_loop_cursor *c) {
  for (int a = la->n - 1; a >= 0; a--) {
    for (int k = 0; k < 3; k++) c->off[k] += la->st[a][k];
    if (++c->idx[a] < la->size[a]) return;
    c->idx[a] = 0;
    for (int k = 0; k < 3; k++) c->off[k] -= la->size[a] * la->st[a][k];
  }
}

#endif
