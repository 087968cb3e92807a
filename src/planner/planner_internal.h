/*
 * planner_internal.h - what the planner's files share: from a bound
 * problem and tensor layouts to a plan (plan.h).
 *
 * 1. Every operand becomes a strided view over problem axes: splits get
 *    derived strides, a repeated name (diagonal) one axis with the summed
 *    stride, size-1 axes vanish, a broadcast dim has stride 0. No copies.
 * 2. One operand: a single LOOP step (copy, permute, repeat or reduce).
 * 3. Several: axes private to one operand are summed first; path/path.c picks
 *    the order; each pair becomes a GEMM when its batch/M/N/K groups fit
 *    (else a permuting copy of the operand that does not fit), or a LOOP
 *    when it is degenerate (no K, a dot, tiny, integer). Layouts of
 *    intermediates are chosen by their consumer, top-down, so that the
 *    producing GEMM writes them in the layout the next one wants; the root
 *    writes straight into the caller's output whenever strides allow.
 * 4. Intermediates are stored in the compute dtype (f32 for f16/bf16),
 *    except that on backends whose GEMM reads f16/bf16 those a GEMM reads
 *    are stored in the half dtype, since A and B must share one type
 *    (gemm_ab_dtype; docs/design.md, "Half precision on cuBLAS").
 *
 * planner.c holds the building blocks; contract.c, gemm_steps.c, slice.c,
 * workspace.c and build.c the stages. Nothing outside src/planner
 * includes this header.
 */
#ifndef EIN_PLANNER_INTERNAL_H
#define EIN_PLANNER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "path.h"
#include "plan.h"

/* A set of problem axes: ids ascending, in the plan's arena. Sized by
 * what it holds, never by the number of axes in the problem, so a network
 * of 100,000 axes costs what its operands hold. */
typedef struct axset {
  int n;
  int *ax;
} axset;

/* A strided view of problem axes on a buffer. */
typedef struct pview {
  int buf;
  int64_t off;
  int n;
  int *ax;     /* problem axis ids, in the order the planner keeps them */
  int64_t *st; /* their strides, elements */
} pview;

/* A node of the contraction tree. */
typedef struct node {
  int left, right; /* children, or -1 for a leaf */
  axset set;       /* axes of the node's result */
  int parent;      /* the node that reads this one, or -1 (the root) */
  pview view;      /* leaf: its data */
  ein_dtype dt;    /* leaf: its dtype */
  int opnum;       /* operand number in the path (SSA) */
} node;

typedef struct planner {
  const ein_problem *p;
  const ein_backend_caps *caps;
  ein_plan_ir *ir;
  ein_arena *arena;
  ein_error_rec *err;
  int64_t *size;  /* axis sizes as planned: a sliced axis has its chunk's */
  int64_t *full;  /* the problem's sizes (strides derive from these) */
  /* Slicing: slice_pos[a] is axis a's place among the sliced axes, or -1
   * (NULL: nothing sliced); operand_view adds a sliced axis's stride
   * times its chunk to slice_acc[place] (the step from one slice to the
   * next), and keeps the axis only when its chunk is over one index. */
  int *slice_pos;
  int64_t *slice_acc;
  ein_dtype dtype, cdtype;
  int cap_steps, cap_bufs;
  double memory_limit; /* elements of one intermediate; 0: none */
  int64_t memory_limit_bytes; /* the same as the caller gave it */
  const ein_plan_limits *limits; /* the caller's (search options); NULL */
  int (*given)[2]; /* the caller's order as SSA pairs; NULL: search */
  const char *given_method; /* the search's name for a given order */
  /* The search found the path only sliced: the plan is made again over
   * these slices (ein_plan_build). */
  ein_path_result *reslice;
  bool oom;        /* a set operation ran out of memory */
  node *nodes;
  int nnodes;
} planner;

/* planner.c */
ein_status planner_no_memory(planner *pl);
ein_status planner_internal(planner *pl, const char *what);
axset set_new(planner *pl, int cap);
bool set_has(const axset *s, int a);
axset set_or(planner *pl, axset a, axset b);
axset set_and(planner *pl, axset a, axset b);
axset set_minus(planner *pl, axset a, axset b);
bool set_empty(axset s);
double set_volume(const planner *pl, axset s);
double flop_count(planner *pl, axset touched, axset kept, int nterms);
int view_find(const pview *v, int axis);
int64_t view_stride(const pview *v, int axis);
axset view_set(planner *pl, const pview *v);
double view_touched(const planner *pl, const pview *v);
void view_sort(pview *v);
int add_buffer(planner *pl, ein_buffer_kind kind, int input,
               ein_dtype dt, int64_t elems);
ein_status temp_view(planner *pl, const int *axes, int n,
                     ein_dtype dt, pview *v);
ein_step *add_step(planner *pl);
ein_dtype buffer_dtype(const planner *pl, int buf);
ein_status emit_loop(planner *pl, ein_step_role role, const pview *dst,
                     int nsrc, const pview *const *src,
                     ein_reduction op, double alpha);
void decide_numerics(ein_step *s);
ein_status alloc_plan_arrays(planner *pl);
ein_status record_axes(planner *pl, bool *empty);
void record_baselines(planner *pl, const ein_tensor_desc *inputs,
                      const ein_tensor_desc *output);
ein_status operand_views(planner *pl, const ein_tensor_desc *inputs,
                         const ein_tensor_desc *output, bool empty,
                         pview **inv, pview *outv);

/* gemm_steps.c */
int group_order(planner *pl, const pview *v, axset g, int *out);
ein_dtype gemm_ab_dtype(const planner *pl);
bool node_gemm(planner *pl, int idx);
ein_status emit_node(planner *pl, int idx, const pview *want,
                     pview *out);

/* contract.c */
ein_status check_dtypes(planner *pl, const ein_tensor_desc *inputs,
                        const ein_tensor_desc *output);
ein_status plan_empty(planner *pl, const pview *outv);
double reduced_count(const planner *pl);
ein_status plan_contraction(planner *pl, pview *inv,
                            const pview *outv);

/* slice.c */
ein_status slice_ids(planner *pl, const ein_plan_limits *limits,
                     int *ids, int64_t *size, int *n);
ein_status setup_slicing(planner *pl, const ein_plan_limits *limits,
                         bool empty);
ein_status plan_zero(planner *pl, const pview *outv);
ein_status slice_output(planner *pl, pview *outv);

/* workspace.c */
ein_status pack_workspace(planner *pl);
ein_status check_buffers(planner *pl);

#endif
