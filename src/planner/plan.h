/*
 * plan.h - the plan IR: what the planner gives and every backend executes.
 *
 * Takes (ein_plan_build): a bound problem (bind.h), the dtype, shape and
 * strides of every input and of the output, and what the backend can do.
 * Gives: an ein_plan_ir, self-contained (it never points back into the
 * problem or the syntax tree):
 *
 *   buffers  inputs (one per operand), the output, and temporaries. A
 *            temporary lives at a byte offset in one workspace the backend
 *            allocates per run (workspace_bytes).
 *   steps    run in order; each reads buffers written by inputs or earlier
 *            steps and writes one buffer:
 *     GEMM   C[b.., m, n] = alpha * sum_k A[b.., m, k] * B[b.., k, n]
 *            m, n, k are single (size, stride) pairs per operand; the batch
 *            is a list of axes with a stride per operand (stride 0 in A or B
 *            broadcasts). Strides are in elements; row-major or transposed
 *            layouts follow from them (ein_matrix_layout below). A and B
 *            share one dtype (the compute dtype, or f16/bf16 itself where
 *            caps.gemm_half); C is theirs or the compute dtype. Products
 *            accumulate in the compute dtype.
 *     LOOP   dst[..] = alpha * OP over reduced axes of (src0 [* src1])
 *            over an iteration space of axes, each with a stride per operand.
 *            An axis whose dst stride is 0 is reduced with `op`; an axis
 *            whose src stride is 0 is broadcast. Accumulation happens in
 *            the compute dtype (f32 for f16/bf16) and the result is rounded
 *            once into dst's dtype. Copies, permutes, repeats, dtype
 *            conversions, reductions, outer and elementwise products and
 *            small contractions are all LOOP steps.
 *     FILL   every element of dst's view set to `fill` (reductions over
 *            empty axes).
 *   costs    per step FLOPs (opt_einsum's convention) and bytes read and
 *            written; per plan the naive and optimised FLOPs, the largest
 *            intermediate and the workspace.
 *
 * Axis ids in steps index plan->axis_labels/axis_sizes (the problem's axes),
 * for reports only; execution needs only sizes and strides.
 */
#ifndef EIN_PLAN_H
#define EIN_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "bind.h"
#include "dtype.h"
#include "error.h"

typedef enum ein_buffer_kind {
  EIN_BUF_INPUT,  /* the caller's input tensor `input` */
  EIN_BUF_OUTPUT, /* the caller's output tensor */
  EIN_BUF_TEMP    /* workspace + offset */
} ein_buffer_kind;

typedef struct ein_plan_buffer {
  ein_buffer_kind kind;
  int input;       /* EIN_BUF_INPUT: operand index */
  ein_dtype dtype;
  int64_t elems;   /* EIN_BUF_TEMP: elements it holds */
  int64_t offset;  /* EIN_BUF_TEMP: byte offset in the workspace */
} ein_plan_buffer;

/* A reference to data: a buffer and an element offset into it. */
typedef struct ein_ref {
  int buffer;
  int64_t offset;
} ein_ref;

/* One axis of a LOOP iteration space or a GEMM batch: its size and its
 * stride (elements) in dst/C [0], src0/A [1] and src1/B [2]. */
typedef struct ein_loop_axis {
  int axis; /* problem axis id (for reports), or -1 for a fused axis */
  int64_t size;
  int64_t stride[3];
} ein_loop_axis;

/* What a LOOP step computes per element besides the product of its
 * sources. Every step the contraction planner makes is EIN_MAP_PRODUCT;
 * the others come only from a gradient program's elementwise steps
 * (grad_steps.c: ein_plan_grad_map), reduce nothing and carry no scale
 * except EIN_MAP_PRODUCT's alpha. Values are compared and divided as the
 * acc_dtype (complex: both parts). */
typedef enum ein_map_op {
  EIN_MAP_PRODUCT = 0,  /* alpha * src0 [* src1] (the plain LOOP) */
  EIN_MAP_EQUAL,        /* src0 == src1 ? 1 : 0 */
  EIN_MAP_DIV,          /* src0 / src1 */
  EIN_MAP_IS_ZERO,      /* src0 == 0 ? 1 : 0 */
  EIN_MAP_ZERO_TO_ONE,  /* src0 == 0 ? 1 : src0 */
  EIN_MAP_DIV_NONZERO,  /* src1 == 0 ? src0 : src0 / src1 */
  EIN_MAP_PROD_MASK,    /* (z, x): z == 0 || (z == 1 && x == 0) ? 1 : 0, z
                           a count of zeros (its real part is read) */
  EIN_MAP_CONJ          /* conj(src0) (complex; a copy for real dtypes) */
} ein_map_op;

typedef enum ein_step_kind {
  EIN_STEP_GEMM,
  EIN_STEP_LOOP,
  EIN_STEP_FILL
} ein_step_kind;

/* Why a step exists; reports and tests read it, execution does not. */
typedef enum ein_step_role {
  EIN_ROLE_CONTRACT, /* a pairwise contraction of the path */
  EIN_ROLE_REDUCE,   /* axes of one operand summed before contracting */
  EIN_ROLE_SINGLE,   /* the whole expression of a one-operand expression */
  EIN_ROLE_LAYOUT,   /* a permuting copy so a GEMM operand fits */
  EIN_ROLE_CONVERT,  /* a dtype conversion (f16/bf16 <-> f32) */
  EIN_ROLE_STORE,    /* the result copied into the caller's output layout */
  EIN_ROLE_REPEAT,   /* the result broadcast over output-only axes */
  EIN_ROLE_EMPTY,    /* the output filled because a reduced axis is empty */
  EIN_ROLE_GRAD      /* an elementwise step of a gradient program */
} ein_step_role;

/* An axis group of a GEMM (batch, M, N or K): the problem axes it merges,
 * outermost first. For reports. */
typedef struct ein_axis_group {
  int n;
  int *axes;
  int64_t size;
} ein_axis_group;

typedef struct ein_gemm {
  int64_t m, n, k;
  int64_t a_ms, a_ks; /* A's strides along m and k */
  int64_t b_ks, b_ns; /* B's strides along k and n */
  int64_t c_ms, c_ns; /* C's strides along m and n */
  int nbatch;
  ein_loop_axis *batch; /* stride[0] C, [1] A, [2] B */
  ein_axis_group groups[4]; /* EIN_GROUP_* */
  /* An FP8 GEMM (fp8_gemm.h makes it; no other plan has one): A and B are
   * fp8 (A's real values are its elements x the f32 at input
   * scale_input[0], B's x scale_input[1]: one-element buffers the caller
   * gives per run), products accumulate in f32 and C is f32, bf16 or f16. */
  bool scaled;
  int scale_input[2];
} ein_gemm;

enum { EIN_GROUP_BATCH, EIN_GROUP_M, EIN_GROUP_N, EIN_GROUP_K };

typedef struct ein_step {
  ein_step_kind kind;
  ein_step_role role;
  int nsrc;          /* 0 (FILL), 1 or 2 */
  ein_ref dst, src[2];
  ein_dtype dst_dtype, src_dtype[2];
  double alpha;      /* scale of the result (1/count for mean) */
  ein_reduction op;  /* LOOP: how reduced axes combine */
  ein_map_op map;    /* LOOP: the elementwise operation (ein_map_op) */
  double fill;       /* FILL: the value */
  int naxes;         /* LOOP and FILL: the iteration space */
  ein_loop_axis *axes;
  ein_gemm gemm;     /* GEMM */
  int operand[2];    /* for reports: path operand numbers read (-1: none) */
  int result;        /* path operand number written, or -1 */
  double flops;      /* opt_einsum's count: 0 for pure data movement */
  double bytes_read, bytes_written;
  /* The same bytes as a GPU's memory moves them: each operand's innermost
   * contiguous run in whole 32-byte sectors (cost.c,
   * ein_cost_record_sectors; equal to bytes_read + bytes_written when
   * every operand is contiguous; for a view step, the copy's that runs
   * where a caller asks for a separate output). A CUDA model's roofline
   * prices these. */
  double sector_bytes;
  /* Numerics, decided once here for every backend: values are combined
   * in acc_dtype (f32 for f16/bf16/f32, f64 when f64 is read or written,
   * i64 for integers and bool, c64 or c128 for complex: c128 when c128 is
   * read or written); a plain copy moves bytes unchanged (one
   * source of dst's dtype, no scale, no 0/1 normalisation, nothing
   * reduced). */
  ein_dtype acc_dtype;
  bool plain_copy;
  /* The plan's output is a view of its input (ein_plan_ir.view): this
   * plain copy runs only where a caller asks for a separate output, so it
   * counts 0 FLOPs and 0 bytes and is reported as "view". */
  bool view;
} ein_step;

/* What a backend can do; the planner shapes the plan to it. */
typedef struct ein_backend_caps {
  const char *device;     /* "cpu", "cuda:0", part of the plan cache key */
  bool gemm_half;         /* GEMM reads f16/bf16 natively (A and B in the
                             half dtype, C half or f32): intermediates a
                             GEMM reads are then stored in the half dtype */
  /* The same asked per half dtype at planning, where it depends on the
   * machine (the CPU: its units and a library loaded at run time, asked
   * only when a half plan is made); NULL: gemm_half says for both. */
  bool (*gemm_half_dtype)(ein_dtype dt);
  /* A batch of matrix-vector products in a half dtype is a LOOP even where
   * the GEMM reads the half dtype (the CPU's oneDNN: a batch of thin
   * products ran slower than the LOOP that reads each matrix once). */
  bool half_vector_batch_loop;
  bool gemm_int;          /* GEMM on integer types (no backend yet) */
  int64_t gemm_min_flops; /* below this a contraction is a LOOP step */
  /* Below this many FLOPs per matrix (2 m n k, the batch left out) a
   * contraction is a LOOP step too: a backend that makes one library call
   * per batch element (the CPU) pays a call's overhead for each, so
   * 262144 compositions of 3x3 matrices are one fused pass, not 262144
   * GEMMs. 0 for a backend whose batch is one call (cuBLAS). */
  int64_t gemm_min_call_flops;
  /* Store every intermediate in the inputs' dtype, as torch.einsum does
   * with f16/bf16 (accumulation stays f32). No backend sets it: tests plan
   * with it to measure torch's rounding model against einc's. */
  bool round_intermediates;
} ein_backend_caps;

/* A tensor as the planner sees it: no data, just type and layout. */
typedef struct ein_tensor_desc {
  ein_dtype dtype;
  int ndim;
  const int64_t *shape;
  const int64_t *strides; /* elements; NULL means C-contiguous */
} ein_tensor_desc;

/* A plan that runs slice by slice (docs/design.md, "Sliced plans"): the
 * steps of the plan are those of one slice, planned with
 * each sliced axis of the size of its chunk (a contiguous run of indices
 * that divides the axis; 1 unless chunked), and run once per chunk of
 * each sliced axis with the inputs (and the output, for sliced output axes) moved by the
 * strides here. When a summed axis is sliced the slices' results add up
 * in three buffers of one output slice, `acc_elems` elements each of the
 * plan's dtype, one allocation: R0 at 0, P at acc_elems, R1 at 2
 * acc_elems. The first slice of a piece writes R0; each next one writes P
 * and `add` sums the two rows starting at min(R, P) (R0 and P, or P and
 * R1: acc_elems apart either way) into the other R; `store` copies the
 * last R into the output. */
typedef struct ein_slicing {
  int n;                /* sliced axes; 0: the plan runs once */
  int *axes;            /* problem axis ids, output axes first */
  int64_t *sizes;       /* their slices: full size / chunk */
  int64_t *chunk;       /* indices of the axis in one slice (planned size) */
  int64_t *in_stride;   /* [i * n + k]: input i's elements per slice of k */
  int64_t *out_stride;  /* [k]: the output's; 0 for a summed axis */
  int nkept;            /* axes[0 .. nkept) are in the output */
  double count;         /* slices: the product of sizes (units of work) */
  double slice_flops;   /* FLOPs of one slice's steps */
  double unsliced_flops; /* the expression planned without slicing */
  double unsliced_largest; /* its largest intermediate, elements (the
                              search's figure; 0 when not known) */
  int64_t acc_elems;    /* accumulate: elements of one output slice */
  struct ein_plan_ir *add, *store; /* accumulate: one LOOP step each */
  /* nkept > 0: one FILL of 0 over one output piece (the output pointer
   * moved as for a slice), for the pieces a range of units leaves */
  struct ein_plan_ir *zero;
} ein_slicing;

/* Whether the plan's (C-contiguous) output is only a new way of reading
 * one input (a transpose, a split or merge of adjacent axes, a diagonal):
 * decided once, by ein_plan_find_view; the report, ein_plan_is_view,
 * ein_plan_output_view and the Python package read it. */
typedef struct ein_plan_view {
  bool is_view;
  int input;        /* which input */
  int64_t offset;   /* elements from that input's first element */
  int64_t *strides; /* out_ndim, elements of the input, in the arena */
} ein_plan_view;

typedef struct ein_plan_ir {
  ein_arena arena; /* owns everything below */
  ein_dtype dtype;
  ein_reduction reduction;
  int naxes;
  const char **axis_labels;
  int64_t *axis_sizes;
  ein_axis_role *axis_roles;
  int ninputs;
  int out_ndim;
  int64_t *out_shape;
  int nbuffers;
  ein_plan_buffer *buffers;
  int nsteps;
  ein_step *steps;
  int npath;          /* contractions of the path: pairs of operand numbers */
  int (*path)[2];     /* operands 0..n-1 are inputs, n+i the i-th result */
  /* The same in opt_einsum's linear form: positions in a list from which
   * each contraction removes its two (keeping the order of the rest) and
   * appends its result. */
  int (*path_linear)[2];
  const char *path_method; /* "single", "given", or path.h's method */
  double naive_flops, flops;
  int64_t largest_intermediate; /* elements */
  int64_t workspace_bytes;
  int64_t peak_temp_bytes; /* the most bytes of temporaries alive at one
                              step (written already, read at or after it) */
  int64_t input_bytes, output_bytes; /* whole: numel x element size */
  double bytes_moved; /* sum of the steps' bytes */
  /* Compulsory traffic: every input element the expression reads, once
   * (a diagonal reads only its diagonal; a broadcast dim reads one
   * element), plus every output element written once. The memory floor of
   * a benchmark. */
  double min_bytes;
  bool allow_tf32;    /* the caller lets f32 GEMMs use TF32 (CUDA) */
  ein_slicing slicing;
  ein_plan_view view;
  /* > 0: the order needs an intermediate past what int64 counts (these
   * elements, the search's figure), and no memory limit was given. The
   * plan is made sliced at EIN_PLAN_COUNTABLE_BYTES per intermediate so
   * that its path and costs can be reported; running it is refused
   * (EIN_ERR_LIMIT) until a memory limit slices it to what the device
   * holds (ein_plan_build). */
  double needs_limit_elems;
  /* Under a memory limit (past the DP's operands): the unlimited path
   * searches the planning call ran, and those its memo (path.h,
   * ein_path_memo) answered; retries under a tighter search limit reuse
   * the first one's tree. 0 and 0 without a limit. */
  int path_free_searches, path_free_reused;
} ein_plan_ir;

/* The per-intermediate bound a plan past int64 is reported under. */
#define EIN_PLAN_COUNTABLE_BYTES ((int64_t)1 << 60)

/* Options of the planner beyond ein_options. */
typedef struct ein_plan_limits {
  int64_t memory_limit; /* bytes for one intermediate; 0: none */
  const char *path;     /* the contraction order in opt_einsum's linear
                           form (path_given.h); NULL or "": searched */
  const char *slice_axes; /* ein_options.slice_axes */
  /* Set by the planner itself when the path search fits the limit only
   * sliced: the plan is made again over the slices it chose (with the
   * caller's), on the per-slice path it found. */
  const int *slice_ids;
  const int64_t *slice_chunks; /* [k]: slice_ids[k]'s indices per slice */
  int nslice_ids;
  const int (*ssa_path)[2];
  const char *path_method;
  double unsliced_flops; /* the search's unlimited best, for the report */
  double unsliced_largest; /* and its largest intermediate, elements */
  /* The path search's limit in elements when below memory_limit's: a plan
   * whose layout copies or sums exceed the limit is made again with the
   * search held tighter (ein_plan_build). 0: memory_limit's. */
  double search_limit;
  struct ein_path_memo *path_memo; /* set by ein_plan_build, which owns it */
  /* ein_path_query.limited: 0 both limited searches; a plan past int64
   * (refused at execution, planned for its report) runs the plain one. */
  int path_limited;
  /* The path search's options (ein_options' fields of the same names). */
  double plan_time;
  uint64_t seed;
  int objective; /* ein_objective */
} ein_plan_limits;

/* Bytes one slice needs beside the inputs and output (ein.h's
 * ein_plan_slice_bytes): the workspace, and the accumulation buffers. */
int64_t ein_plan_slice_bytes_ir(const ein_plan_ir *plan);

/* Builds a plan. `inputs` has problem->ninputs entries; `output` gives the
 * output's dtype and strides (NULL strides: C-contiguous). On failure the
 * error is on err and *out is untouched; on success the caller destroys it
 * with ein_plan_ir_destroy. */
ein_status ein_plan_build(const ein_problem *problem,
                          const ein_tensor_desc *inputs,
                          const ein_tensor_desc *output,
                          const ein_backend_caps *caps,
                          const ein_plan_limits *limits, ein_error_rec *err,
                          ein_plan_ir **out);

/* An empty plan in an arena of its own (zeroed), with room for nbuffers
 * buffers, nsteps steps and an out_ndim-dim output shape; for plans built
 * by hand (gradient steps, FP8 GEMMs). NULL when out of memory. */
ein_plan_ir *ein_plan_ir_alloc(int nbuffers, int nsteps, int out_ndim);
void ein_plan_ir_destroy(ein_plan_ir *plan);

/* Where temporaries start in a plan's workspace. 64 bytes is a cache line
 * and the widest CPU vector, so no temporary shares a line with another;
 * a temporary a cuBLASLt call reads (FP8 GEMMs) needs 256, cuBLASLt's
 * pointer alignment. workspace.c packs the planner's own temporaries at
 * EIN_TEMP_ALIGN; plans built by hand append with ein_plan_ir_append_temp. */
enum { EIN_TEMP_ALIGN = 64, EIN_TEMP_ALIGN_CUBLASLT = 256 };

/* Appends `elems` elements of dt after the workspace's end at the next
 * multiple of align, grows workspace_bytes and peak_temp_bytes to cover it
 * and gives the offset. The caller records the buffer. */
int64_t ein_plan_ir_append_temp(ein_plan_ir *ir, ein_dtype dt, int64_t elems,
                                int64_t align);

/* How a row-major BLAS call sees an r x c matrix with strides (rs, cs):
 * *trans false means rows are rs apart with unit column stride; true means
 * the matrix is stored transposed (unit row stride, columns cs apart).
 * *ld is the leading dimension. False when neither fits. Size-1 dims take
 * whatever stride suits. */
bool ein_matrix_layout(int64_t r, int64_t c, int64_t rs, int64_t cs,
                       bool *trans, int64_t *ld);

/* One row-major BLAS call for a GEMM step's matrices:
 * C[m,n] = alpha * op(A)[m,k] op(B)[k,n] with leading dims ld*, where ta/tb
 * mean op is a transpose. When the step's C is stored transposed the call
 * computes C^T = B^T A^T instead: `swap` is set, m and n are exchanged, and
 * the call's A is the step's B. A column-major library (cuBLAS) makes the
 * same call with the operands exchanged once more. False when a matrix has
 * no BLAS layout. */
typedef struct ein_gemm_call {
  bool swap, ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
} ein_gemm_call;

bool ein_gemm_rowmajor(const ein_gemm *g, ein_gemm_call *call);

/* Name of a step for reports: "gemm", "copy", "reduce", "outer",
 * "product", "contract", "fill". */
/* Sets ir->view (view.c): a one-step plan that is a plain copy from one
 * input into a C-contiguous output whose every dim walks the input with one
 * stride is a view; its step is then marked and costs nothing. Only
 * EIN_ERR_NO_MEMORY fails. */
ein_status ein_plan_find_view(ein_plan_ir *ir, const ein_tensor_desc *output);

const char *ein_step_name(const ein_step *step);
const char *ein_step_role_name(ein_step_role role);

#endif
