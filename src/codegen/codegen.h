/*
 * codegen.h - CUDA C for the LOOP and FILL steps of a plan.
 *
 * Takes: one plan step (plan.h). Gives: the source of a kernel that runs
 * it, with every size, stride, dtype and constant baked in, and the launch
 * geometry. Pure C with no CUDA dependency: the CUDA backend compiles the
 * source with NVRTC, `einc cuda-src` prints it, and the CI tests compile it
 * for sm_80 and sm_90 on machines without a GPU.
 *
 * A kernel's source starts with a comment line and assumes a prelude
 * (ein_codegen_prelude) before it: the f16/bf16 conversions ein_h2f,
 * ein_f2h, ein_b2f, ein_f2b and the ein_u64 type, in one flavour for NVRTC
 * (inline PTX) and one for the emulated device's host compiler, which
 * also defines the CUDA built-ins the kernels use; each flavour is
 * followed by the kernel templates (src/codegen/kernels/FAMILY.cuh) that a
 * step's source instantiates.
 *
 * Every kernel takes three pointers (dst, src0, src1; unused ones are NULL)
 * already offset to the step's first element, and is launched as
 * ein_main<<<grid, block>>>. A kernel that can move 16 bytes per access
 * also has ein_vec<<<grid_vec, block>>>, valid when all its pointers are
 * 16-byte aligned (checked at launch).
 *
 * Kernel kinds:
 *   fill          dst = constant (reductions over empty axes)
 *   map           one thread per output element: copies, permutes with a
 *                 contiguous side, repeats, conversions, elementwise and
 *                 outer products; 16-byte variant for plain copies whose
 *                 innermost axis is contiguous on both sides, and for
 *                 2-byte maps (outer products, repeats) whose innermost
 *                 axis is contiguous in dst and contiguous or broadcast
 *                 in each source (8 elements a thread)
 *                 and, for plain copies whose source's contiguous axis
 *                 lies inside dst's contiguous run but is not its
 *                 innermost axis (patchify), a staged variant: whole
 *                 runs through shared memory, 16-, 8- or 4-byte vectors
 *                 on both sides
 *   transpose     permuting copy through a 32x33 shared-memory tile when
 *                 dst's and the source's contiguous axes differ; 2-byte
 *                 plain copies also get a 64x65 tile moved in pairs
 *                 (4-byte accesses on both sides)
 *   reduce_thread a thread per output element with the reduction (fewer
 *                 than 8 terms) unrolled: pooling, tiny contractions;
 *                 vector variant (one source): a thread takes 1-8
 *                 adjacent outputs whose terms along the source's
 *                 contiguous axis form aligned 16-, 8- or 4-byte runs
 *                 (2x2 pooling in bf16: 4 outputs, 16-byte loads)
 *   reduce_inner  a warp (or 256 threads) per output element, lanes along
 *                 the reduced axes: reductions of the innermost axis, dots
 *   reduce_outer  a thread per output element (coalesced writes), 8 lanes
 *                 per element along the reduced axes, combined in shared
 *                 memory: column sums, small contractions
 *   reduce_split  pass 1 of a reduction whose outputs are too few to fill
 *                 the machine: the inner or outer layout above with the
 *                 reduced range cut into chunks along gridDim.y, each
 *                 block writing one partial per output (in the
 *                 accumulator type) to a scratch buffer
 *   reduce_finish pass 2: a thread per output combines its partials in
 *                 chunk order (deterministic, no atomics), then applies
 *                 the scale and the dtype conversion
 * Which reduction kernel runs is decided here, once, from the sizes
 * (choose_reduction in codegen.c).
 * Accumulation is in f32 for f16/bf16/f32, f64 for f64 and int64 for
 * integers and bool, exactly as the CPU backend does; the mean's scale and
 * the dtype conversion happen in the kernel that touches the data.
 */
#ifndef EIN_CODEGEN_H
#define EIN_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "plan.h"

typedef enum ein_kernel_kind {
  EIN_KERNEL_NONE, /* nothing to do (an empty iteration space) */
  EIN_KERNEL_FILL,
  EIN_KERNEL_MAP,
  EIN_KERNEL_TRANSPOSE,
  EIN_KERNEL_REDUCE_INNER,
  EIN_KERNEL_REDUCE_OUTER,
  EIN_KERNEL_REDUCE_THREAD,
  EIN_KERNEL_REDUCE_SPLIT, /* pass 1; its pass 2 is a REDUCE_FINISH */
  EIN_KERNEL_REDUCE_FINISH
} ein_kernel_kind;

enum { EIN_KERNEL_KINDS = EIN_KERNEL_REDUCE_FINISH + 1 };

typedef struct ein_kernel_src {
  ein_kernel_kind kind;
  char *source;  /* NUL-terminated CUDA C; NULL for EIN_KERNEL_NONE */
  size_t len;
  uint64_t hash; /* of the source, for in-memory caches */
  bool has_vec;  /* ein_vec exists */
  /* ein_vec's accesses: bytes of each vector load or store, and how many
   * elements (outputs, for reduce_thread) a thread takes per item. */
  unsigned vec_bytes, vec_items;
  bool vec_staged; /* ein_vec moves tiles through shared memory */
  unsigned grid[3], block[3], grid_vec[3];
  /* Dynamic shared memory per block, in bytes, both entry points are
   * launched with: 0 today (every kernel's shared memory is static), kept
   * here so the launch and the occupancy report read one figure. */
  unsigned dynamic_smem;
  /* reduce_outer (outer_layout.h): the source (1 or 2; 0 none) each block
   * copies into shared memory, its bytes, and whether the lanes run along
   * a kept axis other than dst's contiguous one */
  unsigned staged_src, staged_bytes;
  bool lanes_moved;
} ein_kernel_src;

/* What runs one step: a kernel, or a split reduction's two passes with
 * the scratch buffer of partials between them (pass 1 writes it as its
 * `d`, pass 2 reads it as its `s0`). */
typedef struct ein_step_kernels {
  ein_kernel_src main;   /* the kernel, or pass 1 */
  ein_kernel_src finish; /* pass 2; kind EIN_KERNEL_NONE when none */
  int64_t scratch_bytes; /* device scratch the two passes share */
} ein_step_kernels;

/* Generates the kernels of a LOOP or FILL step. On success *out owns heap
 * sources (free with ein_step_kernels_free). EIN_ERR_NO_MEMORY or
 * EIN_ERR_LIMIT (more axes than a kernel takes) on failure. */
ein_status ein_codegen_step(const ein_step *step, ein_step_kernels *out);

void ein_step_kernels_free(ein_step_kernels *k);

void ein_kernel_src_free(ein_kernel_src *k);

/* The text to put before every kernel source: for NVRTC
 * (src/codegen/prelude_nvrtc.cuh) or, when host, for the emulated device
 * (src/codegen/prelude_host.h), each followed by the kernel templates
 * (src/codegen/kernels/). Static storage. */
const char *ein_codegen_prelude(bool host);

/* "map", "transpose", ...; "none" for EIN_KERNEL_NONE. */
const char *ein_kernel_kind_name(ein_kernel_kind kind);

/* A GEMM step as the equivalent LOOP step (a direct contraction kernel),
 * for GEMMs no BLAS call can express. `axes` needs room for
 * gemm.nbatch + 3 entries and backs loop->axes. */
void ein_gemm_as_loop(const ein_step *gemm, ein_step *loop,
                      ein_loop_axis *axes);

/* What the CUDA backend offers the planner: GEMMs read and write f16 and
 * bf16 (cuBLAS), and contractions below gemm_min_flops run as a direct
 * kernel. Static, so CUDA plans can be made and shown without a GPU. */
const ein_backend_caps *ein_cuda_caps(void);

#endif
