/*
 * outer_layout.h - how the warps of a reduce_outer kernel meet their
 * operands (docs/design.md, "Small contractions: reduce_outer's layout").
 *
 * reduce_outer runs a block's 32 x-lanes along consecutive outputs: the
 * innermost kept axis of the step's normal form (loop_axes.h), which is
 * dst's contiguous axis. An operand strided along it (tn5's 16x16
 * factors, 64 bytes a lane apart) costs up to a sector a lane. The
 * remedies, chosen here from the sizes and strides alone:
 *   - a small source (its whole extent at most EIN_OUTER_STAGE_BYTES,
 *     strides non-negative) that the warps would read wastefully is
 *     staged: each block copies it into shared memory with coalesced
 *     loads once, then reads it there (padded one word every 128 bytes,
 *     so that lanes a power of two apart hit different banks);
 *   - the lanes run along the kept axis, and a warp holds 32 or 16
 *     outputs (the rest of its lanes on consecutive terms), whose
 *     requests come closest to the ideal sectors for their bytes,
 *     counting each source's load once per row of terms and dst's store
 *     once (a strided store costs less than a strided load repeated for
 *     every term).
 * Takes the step's kept and reduced axes in normal form, its number of
 * sources and its element sizes (dst, src0, src1). Gives the kept axis to
 * make innermost and the source to stage. Pure arithmetic; codegen.c
 * applies it, and the CUDA program records it (ein_kernel_src).
 */
#ifndef EIN_OUTER_LAYOUT_H
#define EIN_OUTER_LAYOUT_H

#include <stdint.h>

#include "loop_axes.h"

enum { EIN_OUTER_STAGE_BYTES = 4096 };

typedef struct ein_outer_layout {
  int lane_axis;   /* index in kept of the axis to make innermost */
  int per_block;   /* outputs along a block's x (32 or 16), its 8 rows
                      along the terms (a warp: 32 / per_block rows) */
  int stage;       /* 0: none; 1: src0; 2: src1 staged in shared memory */
  int64_t stage_n; /* elements of the staged source's extent */
} ein_outer_layout;

ein_outer_layout ein_outer_layout_choose(const ein_loop_axes *kept,
                                         const ein_loop_axes *red, int nsrc,
                                         const int esize[3]);

#endif
