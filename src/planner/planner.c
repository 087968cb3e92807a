/*
 * planner.c - from a bound problem and tensor layouts to a plan (plan.h).
 *
 * 1. Every operand becomes a strided view over problem axes: splits get
 *    derived strides, a repeated name (diagonal) one axis with the summed
 *    stride, size-1 axes vanish, a broadcast dim has stride 0. No copies.
 * 2. One operand: a single LOOP step (copy, permute, repeat or reduce).
 * 3. Several: axes private to one operand are summed first; path.c picks
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
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "path.h"
#include "path_given.h"
#include "plan.h"

/* ein_options.objective reaches the search as it is (plan.h, path.h). */
_Static_assert((int)EIN_PATH_FLOPS == (int)EIN_OBJECTIVE_FLOPS &&
                   (int)EIN_PATH_SIZE == (int)EIN_OBJECTIVE_SIZE &&
                   (int)EIN_PATH_COMBO == (int)EIN_OBJECTIVE_COMBO,
               "path.h's objectives are ein.h's");

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

static ein_status no_memory(planner *pl) {
  return ein_fail_memory(pl->err, "out of memory while planning");
}

static ein_status internal(planner *pl, const char *what) {
  return ein_fail_internal(pl->err, "planner: %s", what);
}

/* -------------------------------------------------------------- sets */

static axset set_new(planner *pl, int cap) {
  axset s = {0, ein_arena_alloc(pl->arena, (size_t)(cap ? cap : 1),
                                sizeof(int))};
  return s;
}

static bool set_has(const axset *s, int a) {
  int lo = 0, hi = s->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (s->ax[mid] == a) return true;
    if (s->ax[mid] < a) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

/* The merge of two sorted sets: which = 0 union, 1 intersection,
 * 2 difference (a minus b). An allocation failure leaves ax NULL, which
 * plan_build's arena check reports (pl->oom). */
static axset set_merge(planner *pl, axset a, axset b, int which) {
  axset r = set_new(pl, a.n + b.n);
  if (!r.ax) {
    pl->oom = true;
    return r;
  }
  int i = 0, j = 0;
  while (i < a.n || j < b.n) {
    int x = i < a.n ? a.ax[i] : INT32_MAX, y = j < b.n ? b.ax[j] : INT32_MAX;
    bool in_a = x <= y, in_b = y <= x;
    int v = in_a ? x : y;
    i += in_a;
    j += in_b;
    if (which == 0 || (which == 1 && in_a && in_b) ||
        (which == 2 && in_a && !in_b))
      r.ax[r.n++] = v;
  }
  return r;
}

static axset set_or(planner *pl, axset a, axset b) {
  return set_merge(pl, a, b, 0);
}
static axset set_and(planner *pl, axset a, axset b) {
  return set_merge(pl, a, b, 1);
}
static axset set_minus(planner *pl, axset a, axset b) {
  return set_merge(pl, a, b, 2);
}
static bool set_empty(axset s) { return s.n == 0; }

static double set_volume(const planner *pl, axset s) {
  double v = 1;
  for (int i = 0; i < s.n; i++) v *= (double)pl->size[s.ax[i]];
  return v;
}

/* opt_einsum's FLOP count of one step that touches `touched` and keeps
 * `kept`: volume(touched) * (max(1, nterms - 1) + (anything summed)). */
static double flop_count(planner *pl, axset touched, axset kept, int nterms) {
  bool summed = touched.n > kept.n;
  int factor = (nterms - 1 > 1 ? nterms - 1 : 1) + (summed ? 1 : 0);
  return set_volume(pl, touched) * factor;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* ------------------------------------------------------------- views */

static bool view_alloc(planner *pl, pview *v, int cap) {
  v->n = 0;
  v->off = 0;
  v->ax = ein_arena_alloc(pl->arena, (size_t)(cap ? cap : 1), sizeof *v->ax);
  v->st = ein_arena_alloc(pl->arena, (size_t)(cap ? cap : 1), sizeof *v->st);
  return v->ax && v->st;
}

static int view_find(const pview *v, int axis) {
  for (int i = 0; i < v->n; i++)
    if (v->ax[i] == axis) return i;
  return -1;
}

static int64_t view_stride(const pview *v, int axis) {
  int i = view_find(v, axis);
  return i < 0 ? 0 : v->st[i];
}

/* Adds an axis; size-1 axes vanish, a repeated axis sums its strides. */
static void view_add(planner *pl, pview *v, int axis, int64_t stride) {
  if (pl->slice_pos && pl->slice_pos[axis] >= 0 && pl->slice_acc)
    pl->slice_acc[pl->slice_pos[axis]] += stride * pl->size[axis];
  if (pl->size[axis] == 1) return;
  int i = view_find(v, axis);
  if (i >= 0) {
    v->st[i] += stride;
    return;
  }
  v->ax[v->n] = axis;
  v->st[v->n++] = stride;
}

static axset view_set(planner *pl, const pview *v) {
  axset s = set_new(pl, v->n);
  if (!s.ax) {
    pl->oom = true;
    return s;
  }
  for (int i = 0; i < v->n; i++) s.ax[s.n++] = v->ax[i];
  qsort(s.ax, (size_t)s.n, sizeof(int), cmp_int);
  return s;
}

/* Elements a view touches: stride-0 axes are read once. */
static double view_touched(const planner *pl, const pview *v) {
  double e = 1;
  for (int i = 0; i < v->n; i++)
    if (v->st[i] != 0) e *= (double)pl->size[v->ax[i]];
  return e;
}

static void compact_strides(int ndim, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    st[d] = s;
    s *= shape[d] > 0 ? shape[d] : 1;
  }
}

/* The view of a bound operand on a tensor. */
static ein_status operand_view(planner *pl, const ein_bound_operand *op,
                               const ein_tensor_desc *t, int buf, pview *v) {
  if (!view_alloc(pl, v, op->nfactors)) return no_memory(pl);
  v->buf = buf;
  int64_t strides[EIN_MAX_DIMS];
  if (t->strides)
    memcpy(strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
  else
    compact_strides(t->ndim, t->shape, strides);
  for (int d = 0; d < op->ndim; d++) {
    const ein_bound_dim *dim = &op->dims[d];
    if (dim->broadcast) {
      view_add(pl, v, op->factors[dim->first], 0);
      continue;
    }
    int64_t s = strides[d];
    for (int j = dim->count - 1; j >= 0; j--) {
      int a = op->factors[dim->first + j];
      view_add(pl, v, a, s);
      if (__builtin_mul_overflow(s, pl->full[a], &s))
        return ein_fail_shape(pl->err, "strides of dim %d overflow int64", d);
    }
  }
  return EIN_OK;
}

/* Sorts the axes outermost first (descending |stride|, stable), in place. */
static void view_sort(pview *v) {
  for (int i = 1; i < v->n; i++)
    for (int j = i; j > 0; j--) {
      int64_t a = llabs(v->st[j - 1]), b = llabs(v->st[j]);
      if (a >= b) break;
      int t = v->ax[j];
      v->ax[j] = v->ax[j - 1];
      v->ax[j - 1] = t;
      int64_t s = v->st[j];
      v->st[j] = v->st[j - 1];
      v->st[j - 1] = s;
    }
}

/* ----------------------------------------------------- buffers, steps */

static int add_buffer(planner *pl, ein_buffer_kind kind, int input,
                      ein_dtype dt, int64_t elems) {
  ein_plan_ir *ir = pl->ir;
  if (ir->nbuffers == pl->cap_bufs) return -1;
  ein_plan_buffer *b = &ir->buffers[ir->nbuffers];
  b->kind = kind;
  b->input = input;
  b->dtype = dt;
  b->elems = elems;
  if (kind == EIN_BUF_TEMP) {
    b->offset = (ir->workspace_bytes + 63) & ~(int64_t)63;
    ir->workspace_bytes = b->offset + elems * (int64_t)ein_dtype_size(dt);
    if (elems > ir->largest_intermediate) ir->largest_intermediate = elems;
  }
  return ir->nbuffers++;
}

/* A new compact temporary holding `axes` (outermost first). */
static ein_status temp_view(planner *pl, const int *axes, int n,
                            ein_dtype dt, pview *v) {
  if (!view_alloc(pl, v, n)) return no_memory(pl);
  /* Sizes other than 0 multiply into strides, so check those; the
   * workspace must stay countable in bytes too. */
  int64_t stride = 1, bytes, end;
  bool empty = false, overflow = false;
  for (int i = n - 1; i >= 0; i--) {
    int64_t size = pl->size[axes[i]];
    v->ax[i] = axes[i];
    v->st[i] = stride;
    empty |= size == 0;
    overflow |= __builtin_mul_overflow(stride, size ? size : 1, &stride);
  }
  int64_t elems = empty ? 0 : stride;
  overflow |= __builtin_mul_overflow(stride, (int64_t)ein_dtype_size(dt),
                                     &bytes) ||
              __builtin_add_overflow(pl->ir->workspace_bytes + 64, bytes, &end);
  if (overflow)
    return ein_fail(pl->err, EIN_ERR_OVERFLOW,
                    "an intermediate of this contraction order would "
                    "hold more bytes than int64 can count");
  v->n = n;
  v->buf = add_buffer(pl, EIN_BUF_TEMP, -1, dt, elems);
  return v->buf < 0 ? internal(pl, "too many buffers") : EIN_OK;
}

static ein_step *add_step(planner *pl) {
  ein_plan_ir *ir = pl->ir;
  if (ir->nsteps == pl->cap_steps) return NULL;
  ein_step *s = &ir->steps[ir->nsteps++];
  memset(s, 0, sizeof *s);
  s->alpha = 1;
  s->operand[0] = s->operand[1] = s->result = -1;
  return s;
}

static ein_dtype buffer_dtype(const planner *pl, int buf) {
  return pl->ir->buffers[buf].dtype;
}

/* dst = alpha * op over dst's missing axes of (src0 [* src1]). */
static ein_status emit_loop(planner *pl, ein_step_role role, const pview *dst,
                            int nsrc, const pview *const *src,
                            ein_reduction op, double alpha) {
  ein_step *s = add_step(pl);
  if (!s) return internal(pl, "too many steps");
  s->kind = EIN_STEP_LOOP;
  s->role = role;
  s->nsrc = nsrc;
  s->op = op;
  s->alpha = alpha;
  s->dst = (ein_ref){dst->buf, dst->off};
  s->dst_dtype = buffer_dtype(pl, dst->buf);
  axset all = view_set(pl, dst);
  for (int i = 0; i < nsrc; i++) {
    s->src[i] = (ein_ref){src[i]->buf, src[i]->off};
    s->src_dtype[i] = buffer_dtype(pl, src[i]->buf);
    all = set_or(pl, all, view_set(pl, src[i]));
  }
  int cap = dst->n;
  for (int i = 0; i < nsrc; i++) cap += src[i]->n;
  s->axes = ein_arena_alloc(pl->arena, (size_t)(cap ? cap : 1),
                            sizeof *s->axes);
  if (!s->axes) return no_memory(pl);
  /* dst's axes first (its order), then each source's others. */
  const pview *views[3] = {dst, nsrc > 0 ? src[0] : NULL,
                           nsrc > 1 ? src[1] : NULL};
  for (int w = 0; w < 1 + nsrc; w++)
    for (int i = 0; i < views[w]->n; i++) {
      int a = views[w]->ax[i];
      bool seen = false;
      for (int j = 0; j < s->naxes; j++) seen |= s->axes[j].axis == a;
      if (seen) continue;
      ein_loop_axis *la = &s->axes[s->naxes++];
      la->axis = a;
      la->size = pl->size[a];
      for (int k = 0; k < 3; k++)
        la->stride[k] = k <= nsrc ? view_stride(views[k], a) : 0;
    }
  bool counts = role == EIN_ROLE_CONTRACT || role == EIN_ROLE_REDUCE ||
                role == EIN_ROLE_SINGLE;
  s->flops = counts ? flop_count(pl, all, view_set(pl, dst),
                                  nsrc > 1 ? nsrc : 1)
                    : 0;
  for (int i = 0; i < nsrc; i++)
    s->bytes_read +=
        view_touched(pl, src[i]) * (double)ein_dtype_size(s->src_dtype[i]);
  s->bytes_written =
      view_touched(pl, dst) * (double)ein_dtype_size(s->dst_dtype);
  return EIN_OK;
}

/* ------------------------------------------------------- GEMM fitting */

bool ein_gemm_rowmajor(const ein_gemm *g, ein_gemm_call *call) {
  bool tc;
  if (!ein_matrix_layout(g->m, g->n, g->c_ms, g->c_ns, &tc, &call->ldc))
    return false;
  call->swap = tc;
  if (!tc) {
    call->m = g->m, call->n = g->n, call->k = g->k;
    return ein_matrix_layout(g->m, g->k, g->a_ms, g->a_ks, &call->ta,
                             &call->lda) &&
           ein_matrix_layout(g->k, g->n, g->b_ks, g->b_ns, &call->tb,
                             &call->ldb);
  }
  bool t2;
  if (!ein_matrix_layout(g->n, g->m, g->c_ns, g->c_ms, &t2, &call->ldc) || t2)
    return false;
  call->m = g->n, call->n = g->m, call->k = g->k;
  return ein_matrix_layout(g->n, g->k, g->b_ns, g->b_ks, &call->ta,
                           &call->lda) &&
         ein_matrix_layout(g->k, g->m, g->a_ks, g->a_ms, &call->tb,
                           &call->ldb);
}

bool ein_matrix_layout(int64_t r, int64_t c, int64_t rs, int64_t cs,
                       bool *trans, int64_t *ld) {
  if (c <= 1) {
    if (r <= 1) rs = 1;
    if (rs < 1) return false;
    *trans = false;
    *ld = rs;
    return true;
  }
  if (r <= 1) {
    if (cs == 1) {
      *trans = false;
      *ld = c;
      return true;
    }
    if (cs < 1) return false;
    *trans = true;
    *ld = cs;
    return true;
  }
  if (cs == 1 && rs >= c) {
    *trans = false;
    *ld = rs;
    return true;
  }
  if (rs == 1 && cs >= r) {
    *trans = true;
    *ld = cs;
    return true;
  }
  return false;
}

/* The axes of `g` in v's order (descending stride); n is the count. */
static int group_order(planner *pl, const pview *v, axset g, int *out) {
  pview tmp = *v;
  int64_t *st = ein_arena_alloc(pl->arena, (size_t)(v->n ? v->n : 1),
                                sizeof *st);
  if (!st) {
    pl->oom = true;
    return 0;
  }
  int n = 0;
  for (int i = 0; i < v->n; i++)
    if (set_has(&g, v->ax[i])) {
      out[n] = v->ax[i];
      st[n++] = v->st[i];
    }
  tmp.ax = out;
  tmp.st = st;
  tmp.n = n;
  view_sort(&tmp);
  return n;
}

/* Natural order of a group with no fixed holder: ascending axis id. */
static int group_natural(axset g, int *out) {
  memcpy(out, g.ax, sizeof(int) * (size_t)g.n);
  return g.n;
}

/* Collapses the ordered axes into one (size, stride) in v, or false. */
static bool collapse(const planner *pl, const pview *v, const int *order,
                     int n, int64_t *size, int64_t *stride) {
  *size = 1;
  *stride = 0;
  for (int i = 0; i < n; i++) {
    int at = view_find(v, order[i]);
    if (at < 0) return false;
    if (i > 0 && v->st[view_find(v, order[i - 1])] !=
                     v->st[at] * pl->size[order[i]])
      return false;
    *size *= pl->size[order[i]];
    *stride = v->st[at];
  }
  return true;
}

/* A group's axes in order; ax has room for the group (arena). */
typedef struct gorder {
  int n;
  int *ax;
} gorder;

/* Does v hold the matrix [rows, cols] (each group in the given order) in
 * a layout a GEMM can read? */
static bool fits_matrix(const planner *pl, const pview *v, const gorder *rg,
                        const gorder *cg, int64_t *rs, int64_t *cs) {
  int64_t r, c;
  bool trans;
  int64_t ld;
  if (!collapse(pl, v, rg->ax, rg->n, &r, rs)) return false;
  if (!collapse(pl, v, cg->ax, cg->n, &c, cs)) return false;
  if (r > INT32_MAX || c > INT32_MAX) return false;
  if (!ein_matrix_layout(r, c, *rs, *cs, &trans, &ld)) return false;
  return ld <= INT32_MAX;
}

static ein_status concat_temp(planner *pl, const gorder *a, const gorder *b,
                              const gorder *c, ein_dtype dt, pview *v) {
  int *axes = ein_arena_alloc(pl->arena, (size_t)(a->n + b->n + c->n + 1),
                              sizeof(int)),
      n = 0;
  if (!axes) return no_memory(pl);
  for (int i = 0; i < a->n; i++) axes[n++] = a->ax[i];
  for (int i = 0; i < b->n; i++) axes[n++] = b->ax[i];
  for (int i = 0; i < c->n; i++) axes[n++] = c->ax[i];
  return temp_view(pl, axes, n, dt, v);
}

/* Chooses a group's order: from the largest fixed holder, else natural. */
static void choose_order(planner *pl, axset g, const pview *const *fixed,
                         int nfixed, int room, gorder *o) {
  const pview *best = NULL;
  double best_vol = -1;
  for (int i = 0; i < nfixed; i++) {
    if (!fixed[i]) continue;
    double vol = view_touched(pl, fixed[i]);
    if (vol > best_vol) {
      best_vol = vol;
      best = fixed[i];
    }
  }
  o->ax = ein_arena_alloc(pl->arena, (size_t)(room > g.n ? room : g.n) + 1,
                          sizeof(int));
  if (!o->ax) {
    pl->oom = true;
    o->n = 0;
    return;
  }
  o->n = best ? group_order(pl, best, g, o->ax) : group_natural(g, o->ax);
}

/* Smallest GEMM dimension worth keeping when a group is split into batch
 * loops; below it a copy of the operand is the better deal. */
enum { SPLIT_MIN_INNER = 16 };

/* A GEMM dimension below SPLIT_THIN is thin; K from SPLIT_DEEP_K is deep
 * (see split_group). */
enum { SPLIT_THIN = 256, SPLIT_DEEP_K = 256 };

/* Moves the outer axes of group g into the batch order when only its inner
 * part collapses in every fixed holder (NULL entries are free layouts). */
static void split_group(const planner *pl, gorder *g,
                        const pview *const *fixed, gorder *batch,
                        double k_volume) {
  int64_t size, stride;
  /* Only the output blocks the group, and the GEMM is deep: one wide GEMM
   * into a temporary and a store cost less than many thin calls (a thin
   * GEMM runs well below the machine's rate; the store moves only the
   * result, K times fewer bytes than the GEMM's FLOPs). */
  bool input_ok = !fixed[0] || collapse(pl, fixed[0], g->ax, g->n, &size,
                                        &stride);
  int64_t whole = 1;
  for (int j = 0; j < g->n; j++) whole *= pl->size[g->ax[j]];
  for (int i = 0; i < g->n; i++) {
    bool ok = true;
    for (int h = 0; h < 2 && ok; h++)
      ok = !fixed[h] ||
           collapse(pl, fixed[h], g->ax + i, g->n - i, &size, &stride);
    if (!ok) continue;
    if (i == 0) return; /* the whole group collapses */
    int64_t inner = 1;
    for (int j = i; j < g->n; j++) inner *= pl->size[g->ax[j]];
    if (inner < SPLIT_MIN_INNER) return;
    if (input_ok && inner < SPLIT_THIN && whole >= SPLIT_THIN &&
        k_volume >= SPLIT_DEEP_K)
      return;
    for (int j = 0; j < i; j++) batch->ax[batch->n++] = g->ax[j];
    memmove(g->ax, g->ax + i, sizeof(int) * (size_t)(g->n - i));
    g->n -= i;
    return;
  }
}

/* ---------------------------------------------------------- the tree */

static ein_status emit_node(planner *pl, int idx, const pview *want,
                            pview *out);

static bool gemm_dtype_ok(const planner *pl, ein_dtype dt) {
  if (ein_dtype_is_float(dt) || ein_dtype_is_complex(dt)) return true;
  return pl->caps->gemm_int && dt != EIN_DT_BOOL;
}

/* Storage dtypes (docs/design.md, "Half precision on cuBLAS"). A GEMM's A
 * and B share one dtype: the half dtype itself on backends whose GEMM
 * reads it (cuBLAS takes no f32 operand beside a bf16 one, and an f32 GEMM
 * runs at a fifteenth of the half rate; the CPU where it has bf16 units
 * and oneDNN, about twice its f32 rate: issue 35), else the compute
 * dtype. So an
 * intermediate a GEMM reads is stored in gemm_ab_dtype; one only LOOP
 * steps read (a store, a permute, a reduction, a LOOP contraction) stays
 * in the compute dtype, f32 for f16/bf16. */
static ein_dtype gemm_ab_dtype(const planner *pl) {
  const ein_backend_caps *c = pl->caps;
  bool half = pl->dtype == EIN_DT_BF16 || pl->dtype == EIN_DT_F16;
  bool native = c->gemm_half_dtype ? half && c->gemm_half_dtype(pl->dtype)
                                   : c->gemm_half;
  return native ? pl->dtype : pl->cdtype;
}

static bool gemm_operand_dtype(const planner *pl, ein_dtype dt) {
  return dt == gemm_ab_dtype(pl);
}

/* C may be the operands' dtype or the compute dtype: a half GEMM writes
 * f32 (f32 accumulation either way) when a LOOP reads the result. */
static bool gemm_result_dtype(const planner *pl, ein_dtype dt) {
  return dt == gemm_ab_dtype(pl) || dt == pl->cdtype;
}

/* Is node idx (not a leaf) a GEMM? Degenerate pairs (no K, M = N = 1,
 * integers without integer GEMMs, too few FLOPs in all or per matrix, a
 * dim past int32) are LOOP steps. */
/* The batch, M, N and K groups of node nd's pair as sets. */
static void node_groups(planner *pl, const node *nd, axset *gb, axset *gm,
                        axset *gn, axset *gk) {
  axset sl = pl->nodes[nd->left].set, sr = pl->nodes[nd->right].set;
  axset both = set_and(pl, sl, sr);
  *gb = set_and(pl, both, nd->set);
  *gk = set_minus(pl, both, nd->set);
  *gm = set_and(pl, set_minus(pl, sl, sr), nd->set);
  *gn = set_and(pl, set_minus(pl, sr, sl), nd->set);
}

static bool node_gemm(planner *pl, int idx) {
  const node *nd = &pl->nodes[idx];
  axset gb, gm, gn, gk;
  node_groups(pl, nd, &gb, &gm, &gn, &gk);
  double vb = set_volume(pl, gb), vm = set_volume(pl, gm),
         vn = set_volume(pl, gn), vk = set_volume(pl, gk);
  /* A matrix-vector product whose operands a GEMM would read only after
   * a conversion (f16/bf16 on a backend without half GEMMs) is a LOOP:
   * it reads the half matrix once, where the conversion reads it, writes
   * it twice as wide and the GEMV reads that again (`b i j, b i -> b j`
   * f16 64x256x256 on the CPU: 11 ms through f32, against torch's 1.6). */
  bool vector = vm == 1 || vn == 1;
  if (vector && gemm_ab_dtype(pl) != pl->dtype) return false;
  /* oneDNN runs a batch of half matrix-vector products slower than that
   * LOOP (`b i j, b i -> b j` bf16 64x256x256: 0.73 ms against 0.40); one
   * alone is its GEMV (`i, i j -> j` 4096^2: 2.2 ms, the LOOP 132) */
  bool half = pl->dtype == EIN_DT_BF16 || pl->dtype == EIN_DT_F16;
  if (vector && half && vb > 1 && pl->caps->half_vector_batch_loop)
    return false;
  return gemm_dtype_ok(pl, pl->cdtype) && !set_empty(gk) &&
         !(vm == 1 && vn == 1) &&
         2 * vb * vm * vn * vk >= (double)pl->caps->gemm_min_flops &&
         2 * vm * vn * vk >= (double)pl->caps->gemm_min_call_flops &&
         vm <= INT32_MAX && vn <= INT32_MAX && vk <= INT32_MAX;
}

/* The natural layout of a LOOP result: axes in the order of the left
 * operand, then the right one's others. Only a LOOP reads it (a GEMM
 * parent asks for its own layout), so it is in the compute dtype. */
static ein_status natural_temp(planner *pl, axset set, const pview *l,
                               const pview *r, pview *v) {
  int *axes = ein_arena_alloc(pl->arena, (size_t)(set.n + 1), sizeof(int));
  if (!axes) return no_memory(pl);
  int n = group_order(pl, l, set, axes);
  n += group_order(pl, r, set_minus(pl, set, view_set(pl, l)), axes + n);
  return temp_view(pl, axes, n, pl->cdtype, v);
}

static ein_status emit_loop_node(planner *pl, const node *nd,
                                 const pview *want, pview *out) {
  pview lv, rv;
  ein_status st = emit_node(pl, nd->left, NULL, &lv);
  if (!st) st = emit_node(pl, nd->right, NULL, &rv);
  if (st) return st;
  if (want)
    *out = *want;
  else if ((st = natural_temp(pl, nd->set, &lv, &rv, out)))
    return st;
  const pview *src[2] = {&lv, &rv};
  st = emit_loop(pl, EIN_ROLE_CONTRACT, out, 2, src, EIN_REDUCE_SUM, 1);
  if (st) return st;
  ein_step *s = &pl->ir->steps[pl->ir->nsteps - 1];
  s->operand[0] = pl->nodes[nd->left].opnum;
  s->operand[1] = pl->nodes[nd->right].opnum;
  s->result = nd->opnum;
  return EIN_OK;
}

static ein_status fill_group(planner *pl, ein_gemm *g, int which,
                             const gorder *o) {
  ein_axis_group *grp = &g->groups[which];
  grp->n = o->n;
  grp->axes = ein_arena_alloc(pl->arena, (size_t)(o->n ? o->n : 1),
                              sizeof(int));
  if (!grp->axes) return no_memory(pl);
  memcpy(grp->axes, o->ax, sizeof(int) * (size_t)o->n);
  grp->size = 1;
  for (int i = 0; i < o->n; i++) grp->size *= pl->size[o->ax[i]];
  return EIN_OK;
}

/* Copies GEMM operand v into a new temp laid out as [a, b, c] in the
 * GEMM's operand dtype. */
static ein_status relayout(planner *pl, const pview *v, const gorder *a,
                           const gorder *b, const gorder *c, pview *out) {
  ein_status st = concat_temp(pl, a, b, c, gemm_ab_dtype(pl), out);
  if (st) return st;
  const pview *src[1] = {v};
  ein_step_role role = buffer_dtype(pl, v->buf) != gemm_ab_dtype(pl)
                           ? EIN_ROLE_CONVERT
                           : EIN_ROLE_LAYOUT;
  return emit_loop(pl, role, out, 1, src, EIN_REDUCE_SUM, 1);
}

/* The four axis groups of a GEMM node, each in the order its operands
 * want it. */
typedef struct gemm_groups {
  gorder b, m, n, k;
} gemm_groups;

/* Orders each group after the layouts already fixed (the wanted result,
 * leaf operands); an M or N group that does not collapse in a fixed
 * operand has its outer axes become batch loops (stride 0 in the operand
 * without them) rather than copying the operand, while the GEMMs left
 * stay worth a call. */
static void order_gemm_groups(planner *pl, const pview *want,
                              const pview *lfix, const pview *rfix,
                              axset gb, axset gm, axset gn, axset gk,
                              gemm_groups *G) {
  const pview *hb[3] = {want, lfix, rfix}, *hm[2] = {want, lfix},
              *hn[2] = {want, rfix}, *hk[2] = {lfix, rfix};
  double vk = set_volume(pl, gk);
  for (int pass = 0; pass < 2; pass++) {
    /* the batch has room for the M and N axes split_group moves in */
    choose_order(pl, gb, hb, 3, gb.n + gm.n + gn.n, &G->b);
    choose_order(pl, gm, hm, 2, 0, &G->m);
    choose_order(pl, gn, hn, 2, 0, &G->n);
    choose_order(pl, gk, hk, 2, 0, &G->k);
    const pview *fm[2] = {lfix, want}, *fn[2] = {rfix, want};
    split_group(pl, &G->m, fm, &G->b, vk);
    split_group(pl, &G->n, fn, &G->b, vk);
    /* When C cannot go into want even so (a store follows anyway), the
     * splits made for want's sake only cost wider calls: split again for
     * the inputs alone (qkv_split: M b*s whole, not two calls of s). */
    int64_t ms, ns;
    if (!want || (gemm_result_dtype(pl, buffer_dtype(pl, want->buf)) &&
                  fits_matrix(pl, want, &G->m, &G->n, &ms, &ns)))
      return;
    want = NULL;
  }
}

/* The batch axes of b that a child's result holds, in b's order. */
static ein_status own_batch(planner *pl, const gorder *b, const axset *held,
                            gorder *out) {
  out->n = 0;
  out->ax = ein_arena_alloc(pl->arena, (size_t)b->n + 1, sizeof(int));
  if (!out->ax) return no_memory(pl);
  for (int i = 0; i < b->n; i++)
    if (set_has(held, b->ax[i])) out->ax[out->n++] = b->ax[i];
  return EIN_OK;
}

/* Emits both children of a GEMM node; a child that is an intermediate
 * produces exactly the layout wanted, [b, m, k] for A and [b, k, n] for
 * B (both temps are made before either child is emitted). */
static ein_status emit_gemm_children(planner *pl, const node *nd,
                                     const pview *lfix, const pview *rfix,
                                     const gemm_groups *G, pview *lv,
                                     pview *rv) {
  pview lwant, rwant;
  const pview *lw = NULL, *rw = NULL;
  ein_status st;
  /* Each child holds only its own batch axes: an M or N axis that
   * split_group moved into the batch is absent from the other operand,
   * which reads it with stride 0 rather than being computed replicated
   * over it (issue 26: a step over an axis neither input has). */
  gorder lb, rb;
  if ((st = own_batch(pl, &G->b, &pl->nodes[nd->left].set, &lb)) ||
      (st = own_batch(pl, &G->b, &pl->nodes[nd->right].set, &rb)))
    return st;
  if (!lfix) {
    if ((st = concat_temp(pl, &lb, &G->m, &G->k, gemm_ab_dtype(pl), &lwant)))
      return st;
    lw = &lwant;
  }
  if (!rfix) {
    if ((st = concat_temp(pl, &rb, &G->k, &G->n, gemm_ab_dtype(pl), &rwant)))
      return st;
    rw = &rwant;
  }
  if ((st = emit_node(pl, nd->left, lw, lv))) return st;
  return emit_node(pl, nd->right, rw, rv);
}

/* Makes *v a matrix over rows r and columns c (batch b) in the GEMM's
 * operand dtype, copying it when its dtype or strides do not fit. */
static ein_status gemm_operand(planner *pl, pview *v, const gorder *b,
                               const gorder *r, const gorder *c,
                               int64_t *rs, int64_t *cs) {
  bool fits = fits_matrix(pl, v, r, c, rs, cs);
  if (fits && gemm_operand_dtype(pl, buffer_dtype(pl, v->buf)))
    return EIN_OK;
  /* A conversion alone keeps a column-major operand column-major: made
   * [b, r, c], `i j, i -> j`'s f16 matrix was converted transposed, a
   * strided pass (20 ms for 4096^2 on the CPU, where the contiguous
   * conversion and a transposed GEMM take 4). */
  bool column_major = fits && llabs(*rs) < llabs(*cs);
  pview t;
  ein_status st = column_major ? relayout(pl, v, b, c, r, &t)
                               : relayout(pl, v, b, r, c, &t);
  if (st) return st;
  *v = t;
  fits_matrix(pl, v, r, c, rs, cs);
  return EIN_OK;
}

/* Where the GEMM writes C: straight into want when its dtype and strides
 * fit, else a temp in the compute dtype (a LOOP reads it) and *store says
 * a STORE step must copy it into want. */
static ein_status gemm_result(planner *pl, const pview *want,
                              const gemm_groups *G, pview *cv, int64_t *ms,
                              int64_t *ns, bool *store) {
  *store = false;
  if (want && gemm_result_dtype(pl, buffer_dtype(pl, want->buf)) &&
      fits_matrix(pl, want, &G->m, &G->n, ms, ns)) {
    *cv = *want;
    return EIN_OK;
  }
  ein_status st = concat_temp(pl, &G->b, &G->m, &G->n, pl->cdtype, cv);
  if (st) return st;
  fits_matrix(pl, cv, &G->m, &G->n, ms, ns);
  *store = want != NULL;
  return EIN_OK;
}

static int64_t group_size(const planner *pl, const gorder *o) {
  int64_t s = 1;
  for (int i = 0; i < o->n; i++) s *= pl->size[o->ax[i]];
  return s;
}

/* Batch loops of the GEMM over C, A and B; batch axes merge where they
 * are contiguous in all three operands. */
static ein_status gemm_batch(planner *pl, ein_gemm *g, const gorder *ob,
                             const pview *ops[3]) {
  g->batch = ein_arena_alloc(pl->arena, (size_t)(ob->n ? ob->n : 1),
                             sizeof *g->batch);
  if (!g->batch) return no_memory(pl);
  for (int i = 0; i < ob->n; i++) {
    int a = ob->ax[i];
    int64_t str[3];
    for (int k = 0; k < 3; k++) str[k] = view_stride(ops[k], a);
    if (g->nbatch > 0) {
      ein_loop_axis *prev = &g->batch[g->nbatch - 1];
      bool merge = true;
      for (int k = 0; k < 3; k++)
        merge &= prev->stride[k] == str[k] * pl->size[a];
      if (merge) {
        prev->size *= pl->size[a];
        for (int k = 0; k < 3; k++) prev->stride[k] = str[k];
        prev->axis = -1;
        continue;
      }
    }
    ein_loop_axis *ba = &g->batch[g->nbatch++];
    ba->axis = a;
    ba->size = pl->size[a];
    for (int k = 0; k < 3; k++) ba->stride[k] = str[k];
  }
  return EIN_OK;
}

/* The GEMM step C = A B for node nd over the views chosen; st[] holds the
 * row and column strides of A, B and C. */
static ein_status add_gemm_step(planner *pl, const node *nd,
                                const gemm_groups *G, const pview *cv,
                                const pview *lv, const pview *rv,
                                const int64_t st[6]) {
  ein_step *s = add_step(pl);
  if (!s) return internal(pl, "too many steps");
  s->kind = EIN_STEP_GEMM;
  s->role = EIN_ROLE_CONTRACT;
  s->nsrc = 2;
  s->dst = (ein_ref){cv->buf, cv->off};
  s->src[0] = (ein_ref){lv->buf, lv->off};
  s->src[1] = (ein_ref){rv->buf, rv->off};
  s->dst_dtype = buffer_dtype(pl, cv->buf);
  s->src_dtype[0] = buffer_dtype(pl, lv->buf);
  s->src_dtype[1] = buffer_dtype(pl, rv->buf);
  s->operand[0] = pl->nodes[nd->left].opnum;
  s->operand[1] = pl->nodes[nd->right].opnum;
  s->result = nd->opnum;
  ein_gemm *g = &s->gemm;
  g->m = group_size(pl, &G->m);
  g->n = group_size(pl, &G->n);
  g->k = group_size(pl, &G->k);
  g->a_ms = st[0], g->a_ks = st[1], g->b_ks = st[2], g->b_ns = st[3];
  g->c_ms = st[4], g->c_ns = st[5];
  const pview *ops[3] = {cv, lv, rv};
  ein_status rc;
  if ((rc = gemm_batch(pl, g, &G->b, ops)) ||
      (rc = fill_group(pl, g, EIN_GROUP_BATCH, &G->b)) ||
      (rc = fill_group(pl, g, EIN_GROUP_M, &G->m)) ||
      (rc = fill_group(pl, g, EIN_GROUP_N, &G->n)) ||
      (rc = fill_group(pl, g, EIN_GROUP_K, &G->k)))
    return rc;
  axset touched = set_or(pl, pl->nodes[nd->left].set, pl->nodes[nd->right].set);
  s->flops = flop_count(pl, touched, nd->set, 2);
  s->bytes_read = view_touched(pl, lv) * (double)ein_dtype_size(s->src_dtype[0]) +
                  view_touched(pl, rv) * (double)ein_dtype_size(s->src_dtype[1]);
  s->bytes_written = view_touched(pl, cv) * (double)ein_dtype_size(s->dst_dtype);
  return EIN_OK;
}

/* A GEMM node: order its groups, emit the children in the layouts it
 * wants, fit (or copy) A and B, place C, add the step, and store C into
 * want when it could not be written there. */
static ein_status emit_gemm_node(planner *pl, const node *nd,
                                 const pview *want, pview *out,
                                 axset gb, axset gm, axset gn, axset gk) {
  const node *L = &pl->nodes[nd->left], *R = &pl->nodes[nd->right];
  const pview *lfix = L->left < 0 ? &L->view : NULL;
  const pview *rfix = R->left < 0 ? &R->view : NULL;
  gemm_groups G;
  order_gemm_groups(pl, want, lfix, rfix, gb, gm, gn, gk, &G);

  pview lv, rv, cv;
  int64_t str[6]; /* a_ms, a_ks, b_ks, b_ns, c_ms, c_ns */
  bool store;
  ein_status st;
  if ((st = emit_gemm_children(pl, nd, lfix, rfix, &G, &lv, &rv)) ||
      (st = gemm_operand(pl, &lv, &G.b, &G.m, &G.k, &str[0], &str[1])) ||
      (st = gemm_operand(pl, &rv, &G.b, &G.k, &G.n, &str[2], &str[3])) ||
      (st = gemm_result(pl, want, &G, &cv, &str[4], &str[5], &store)) ||
      (st = add_gemm_step(pl, nd, &G, &cv, &lv, &rv, str)))
    return st;

  if (!store) {
    *out = cv;
    return EIN_OK;
  }
  const pview *src[1] = {&cv};
  if ((st = emit_loop(pl, EIN_ROLE_STORE, want, 1, src, EIN_REDUCE_SUM, 1)))
    return st;
  *out = *want;
  return EIN_OK;
}

static ein_status emit_node(planner *pl, int idx, const pview *want,
                            pview *out) {
  const node *nd = &pl->nodes[idx];
  if (nd->left < 0) {
    *out = nd->view;
    return EIN_OK;
  }
  if (!node_gemm(pl, idx)) return emit_loop_node(pl, nd, want, out);
  axset gb, gm, gn, gk;
  node_groups(pl, nd, &gb, &gm, &gn, &gk);
  return emit_gemm_node(pl, nd, want, out, gb, gm, gn, gk);
}

/* ------------------------------------------------------------- plans */

static ein_status check_dtypes(planner *pl, const ein_tensor_desc *inputs,
                               const ein_tensor_desc *output) {
  const ein_problem *p = pl->p;
  for (int i = 1; i < p->ninputs; i++)
    if (inputs[i].dtype != inputs[0].dtype)
      return ein_fail_dtype(pl->err,
                            "operand %d is %s but operand 1 is %s; einc "
                            "needs one dtype for all operands",
                            i + 1, ein_dtype_name(inputs[i].dtype),
                            ein_dtype_name(inputs[0].dtype));
  ein_dtype dt = inputs[0].dtype;
  if (output->dtype != dt)
    return ein_fail_dtype(pl->err, "the output is %s but the operands are %s",
                          ein_dtype_name(output->dtype), ein_dtype_name(dt));
  bool reduces = false;
  for (int a = 0; a < p->naxes; a++)
    reduces |= ein_axis_reduced(p, a) && p->axes[a].size != 1;
  ein_reduction r = p->reduction;
  if (dt == EIN_DT_BOOL) {
    if (p->ninputs > 1)
      return ein_fail_dtype(pl->err,
                            "bool operands cannot be multiplied and summed; "
                            "contractions need a numeric dtype");
    if (reduces && (r == EIN_REDUCE_SUM || r == EIN_REDUCE_MEAN ||
                    r == EIN_REDUCE_PROD))
      return ein_fail_dtype(pl->err,
                            "the reduction '%s' needs a numeric dtype, not "
                            "bool; use any, all, max or min",
                            ein_reduction_name(r));
  }
  /* Refused even when nothing is reduced, so that whether a call works
   * never hangs on an axis being of size 1. */
  if (ein_dtype_is_complex(dt) && r != EIN_REDUCE_SUM &&
      r != EIN_REDUCE_MEAN && r != EIN_REDUCE_PROD)
    return ein_fail_dtype(pl->err,
                          "the reduction '%s' is not defined on %s: complex "
                          "numbers have no order (and no truth value); use "
                          "sum, mean or prod",
                          ein_reduction_name(r), ein_dtype_name(dt));
  if (r == EIN_REDUCE_MEAN && reduces && !ein_dtype_is_float(dt) &&
      !ein_dtype_is_complex(dt))
    return ein_fail_dtype(pl->err,
                          "the reduction 'mean' needs a floating-point "
                          "dtype, not %s",
                          ein_dtype_name(dt));
  return EIN_OK;
}

/* The value of a reduction over nothing. */
static ein_status empty_value(planner *pl, double *v) {
  switch (pl->p->reduction) {
  case EIN_REDUCE_SUM: case EIN_REDUCE_ANY: *v = 0; return EIN_OK;
  case EIN_REDUCE_PROD: case EIN_REDUCE_ALL: *v = 1; return EIN_OK;
  case EIN_REDUCE_MEAN: *v = NAN; return EIN_OK;
  case EIN_REDUCE_MAX: case EIN_REDUCE_MIN: break;
  }
  return ein_fail(pl->err, EIN_ERR_BAD_REDUCTION,
                  "the reduction '%s' over an empty axis has no "
                  "value (no identity); einc refuses, as numpy does",
                  ein_reduction_name(pl->p->reduction));
}

static ein_status plan_empty(planner *pl, const pview *outv) {
  double total = 1;
  for (int d = 0; d < pl->p->output.ndim; d++)
    total *= (double)pl->p->output.dims[d].size;
  if (total == 0) return EIN_OK; /* nothing to write */
  double v = 0;
  ein_status st = empty_value(pl, &v);
  if (st) return st;
  ein_step *s = add_step(pl);
  if (!s) return internal(pl, "too many steps");
  s->kind = EIN_STEP_FILL;
  s->role = EIN_ROLE_EMPTY;
  s->fill = v;
  s->dst = (ein_ref){outv->buf, outv->off};
  s->dst_dtype = buffer_dtype(pl, outv->buf);
  s->axes = ein_arena_alloc(pl->arena, (size_t)(outv->n ? outv->n : 1),
                            sizeof *s->axes);
  if (!s->axes) return no_memory(pl);
  for (int i = 0; i < outv->n; i++)
    s->axes[s->naxes++] = (ein_loop_axis){outv->ax[i], pl->size[outv->ax[i]],
                                          {outv->st[i], 0, 0}};
  s->bytes_written = total * (double)ein_dtype_size(s->dst_dtype);
  return EIN_OK;
}

static double reduced_count(const planner *pl) {
  double c = 1;
  for (int a = 0; a < pl->p->naxes; a++)
    if (ein_axis_reduced(pl->p, a)) c *= (double)pl->full[a];
  return c;
}

/* The leaves of the tree: each operand keeps the axes the output or
 * another operand has; the others are summed away by reduce_leaf.
 * count[a] says how many operands hold axis a (the output counting as
 * one), so each leaf is found in the time of its own axes. */
static ein_status make_leaves(planner *pl, const pview *inv, axset outset,
                              axset *sets, int *count) {
  int n = pl->p->ninputs;
  pl->nodes = ein_arena_alloc(pl->arena, (size_t)(2 * n), sizeof *pl->nodes);
  if (!pl->nodes) return no_memory(pl);
  for (int i = 0; i < outset.n; i++) count[outset.ax[i]]++;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < sets[i].n; k++) count[sets[i].ax[k]]++;
  for (int i = 0; i < n; i++) {
    node *nd = &pl->nodes[pl->nnodes++];
    nd->left = nd->right = nd->parent = -1;
    nd->opnum = i;
    nd->view = inv[i];
    nd->set = set_new(pl, sets[i].n);
    if (!nd->set.ax) return no_memory(pl);
    for (int k = 0; k < sets[i].n; k++) {
      int a = sets[i].ax[k];
      if (count[a] > 1) nd->set.ax[nd->set.n++] = a;
    }
  }
  /* From here count[a] is the number of live nodes holding a (plus the
   * output), as build_tree keeps it. */
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < sets[i].n; k++) count[sets[i].ax[k]]--;
    for (int k = 0; k < pl->nodes[i].set.n; k++)
      count[pl->nodes[i].set.ax[k]]++;
    sets[i] = pl->nodes[i].set;
  }
  return EIN_OK;
}

/* The largest intermediate of the tree (the root, the output, aside):
 * *at is its node, -1 when there is none. */
static double tree_largest(const planner *pl, int n, int *at) {
  double worst = 0;
  *at = -1;
  for (int k = n; k < pl->nnodes - 1; k++) {
    double v = set_volume(pl, pl->nodes[k].set);
    if (v > worst) worst = v, *at = k;
  }
  return worst;
}

/* A given path may need more than the limit: an EIN_ERR_LIMIT naming the
 * largest intermediate it needs. The root is the output, not an
 * intermediate. (A searched path is checked by search_path.) */
static ein_status check_memory_limit(planner *pl, int n) {
  if (pl->memory_limit <= 0 || !pl->given) return EIN_OK;
  int worst;
  double worst_elems = tree_largest(pl, n, &worst);
  if (worst < 0 || worst_elems <= pl->memory_limit) return EIN_OK;
  size_t es = ein_dtype_size(pl->cdtype);
  return ein_fail_limit(
      pl->err,
      "the given path needs %.0f bytes (%.0f elements of %s) for the result "
      "of its step %d, over the memory limit of %lld bytes; slice axes "
      "(slice_axes, --slice) to shrink it",
      worst_elems * (double)es, worst_elems, ein_dtype_name(pl->cdtype),
      worst - n + 1, (long long)pl->memory_limit_bytes);
}

/* The leaves' and the output's axis id lists as path.h takes them. */
static ein_status path_query_of(planner *pl, axset outset, const axset *sets,
                                ein_path_query *q) {
  int n = pl->p->ninputs;
  const int **axes = ein_arena_alloc(pl->arena, (size_t)n, sizeof *axes);
  int *naxes = ein_arena_alloc(pl->arena, (size_t)n, sizeof *naxes);
  if (!axes || !naxes) return no_memory(pl);
  for (int i = 0; i < n; i++) axes[i] = sets[i].ax, naxes[i] = sets[i].n;
  *q = (ein_path_query){.n = n, .axes = axes, .naxes = naxes,
                        .output_axes = outset.ax, .output_naxes = outset.n,
                        .total_axes = pl->p->naxes, .sizes = pl->size,
                        .memory_limit = pl->memory_limit};
  if (pl->limits) {
    q->time_budget = pl->limits->plan_time;
    q->seed = pl->limits->seed;
    q->objective = (ein_path_objective)pl->limits->objective;
  }
  /* Slicing a summed axis keeps sums of one output piece: where the whole
   * output is past the limit, only output axes are sliced (their pieces
   * need no sums). Axes a non-sum reduction combines are never sliced. */
  bool sum_ok = pl->p->reduction == EIN_REDUCE_SUM ||
                pl->p->reduction == EIN_REDUCE_MEAN;
  if (pl->memory_limit > 0 &&
      (!sum_ok || set_volume(pl, outset) > pl->memory_limit)) {
    bool *no = ein_arena_alloc(pl->arena, (size_t)pl->p->naxes + 1, 1);
    if (!no) return no_memory(pl);
    for (int a = 0; a < pl->p->naxes; a++) no[a] = !pl->p->axes[a].in_output;
    q->no_slice = no;
  }
  return EIN_OK;
}

/* Even slicing cannot meet the limit: what the contraction needs (the
 * unlimited path's largest intermediate) and what slicing reaches. */
static ein_status limit_error(planner *pl, const ein_path_result *r) {
  double es = (double)ein_dtype_size(pl->cdtype);
  return ein_fail_limit(
      pl->err,
      "no contraction order keeps every intermediate within the memory "
      "limit of %lld bytes: the contraction's best order needs %.0f bytes "
      "(%.0f elements of %s) for its largest intermediate, and even "
      "slicing every axis leaves one of %.0f bytes; a limit of %.0f bytes "
      "would fit",
      (long long)pl->memory_limit_bytes, r->free_largest * es,
      r->free_largest, ein_dtype_name(pl->cdtype), r->fit_largest * es,
      r->fit_largest * es);
}

/* The searched order as SSA pairs. When it fits the limit only sliced,
 * the plan is made again over those slices (pl->reslice, ein_plan_build):
 * EIN_ERR_LIMIT stands in until then. */
static ein_status search_path(planner *pl, axset outset, const axset *sets,
                              int (**pairs)[2]) {
  ein_path_query q;
  ein_path_result r;
  ein_status st = path_query_of(pl, outset, sets, &q);
  if (st) return st;
  ein_path_status ps = ein_path_search(&q, pl->arena, &r);
  if (ps == EIN_PATH_NO_MEMORY) return no_memory(pl);
  if (ps == EIN_PATH_TOO_LARGE) return limit_error(pl, &r);
  *pairs = r.pairs;
  pl->ir->path_method = r.method;
  if (!r.nsliced) return EIN_OK;
  pl->reslice = ein_arena_alloc(pl->arena, 1, sizeof *pl->reslice);
  if (!pl->reslice) return no_memory(pl);
  *pl->reslice = r;
  return EIN_ERR_LIMIT;
}

/* The contraction order: the caller's, or the search's. */
static ein_status find_path(planner *pl, axset outset, const axset *sets,
                            int (**pairs)[2]) {
  if (pl->given) {
    *pairs = pl->given;
    pl->ir->path_method = pl->given_method ? pl->given_method : "given";
    return EIN_OK;
  }
  return search_path(pl, outset, sets, pairs);
}

/* The result of a pair keeps the axes the output or a node not yet
 * merged still holds: count[a] (make_leaves) counts those holders. */
static axset merged_set(planner *pl, const node *l, const node *r,
                        int *count) {
  axset touched = set_or(pl, l->set, r->set), kept = set_new(pl, touched.n);
  if (!touched.ax || !kept.ax) {
    pl->oom = true;
    return kept;
  }
  for (int k = 0; k < touched.n; k++) {
    int a = touched.ax[k];
    count[a] -= set_has(&l->set, a) + set_has(&r->set, a);
    if (count[a] > 0) {
      kept.ax[kept.n++] = a;
      count[a]++;
    }
  }
  return kept;
}

/* The path in opt_einsum's linear form (plan.h). A node's position in
 * the live list is the number of live nodes before it (results are
 * appended, so the list is in SSA order): a Fenwick tree over the 2n - 1
 * SSA ids counts them in log time, so a 10,000-operand path converts in
 * milliseconds. lin[k] keeps the order of the plan's own pair (opt_einsum
 * takes either order), so the path given back through --path makes this
 * very plan again. */
static ein_status linear_path(planner *pl, int n, int (*pairs)[2]) {
  int total = 2 * n, (*lin)[2] = ein_arena_alloc(pl->arena, (size_t)n,
                                                 sizeof *lin);
  int *tree = ein_calloc((size_t)total + 1, sizeof *tree);
  if (!lin || !tree) {
    ein_free(tree);
    return no_memory(pl);
  }
  for (int i = 1; i <= n; i++) /* inputs live: add 1 at ids 0..n-1 */
    for (int j = i; j <= total; j += j & -j) tree[j]++;
  for (int k = 0; k < n - 1; k++) {
    for (int s = 0; s < 2; s++) {
      int pos = 0; /* live ids below pairs[k][s] */
      for (int j = pairs[k][s]; j > 0; j -= j & -j) pos += tree[j];
      lin[k][s] = pos;
    }
    for (int s = 0; s < 2; s++)
      for (int j = pairs[k][s] + 1; j <= total; j += j & -j) tree[j]--;
    for (int j = n + k + 1; j <= total; j += j & -j) tree[j]++;
  }
  ein_free(tree);
  pl->ir->path_linear = lin;
  return EIN_OK;
}

/* The contraction tree from the path: SSA id k >= n is node n + (k - n). */
static ein_status build_tree(planner *pl, axset outset, const axset *sets,
                             int *count) {
  int n = pl->p->ninputs, (*pairs)[2] = NULL;
  ein_status st = find_path(pl, outset, sets, &pairs);
  if (st) return st;
  pl->ir->path = pairs;
  pl->ir->npath = n - 1;
  for (int k = 0; k < n - 1; k++) {
    int l = pairs[k][0], r = pairs[k][1];
    if (l < 0 || r < 0 || l >= n + k || r >= n + k || l == r ||
        pl->nodes[l].parent >= 0 || pl->nodes[r].parent >= 0)
      return internal(pl, "the path names an operand that is not live");
    node *nd = &pl->nodes[pl->nnodes++];
    nd->left = l;
    nd->right = r;
    nd->parent = -1;
    nd->opnum = n + k;
    pl->nodes[l].parent = pl->nodes[r].parent = n + k;
    nd->set = merged_set(pl, &pl->nodes[l], &pl->nodes[r], count);
    if (pl->oom) return no_memory(pl);
  }
  return linear_path(pl, n, pairs);
}

/* Sums leaf i's private axes into a temporary, stored in the dtype of
 * its reader: the GEMM operand dtype when its parent is a GEMM, else the
 * compute dtype. Runs after build_tree so the parent is known; the steps
 * still come first in the plan. */
static ein_status reduce_leaf(planner *pl, int i, const pview *in) {
  node *nd = &pl->nodes[i];
  if (set_empty(set_minus(pl, view_set(pl, in), nd->set))) return EIN_OK;
  int parent = nd->parent;
  ein_dtype dt = parent >= 0 && node_gemm(pl, parent) ? gemm_ab_dtype(pl)
                                                      : pl->cdtype;
  int *axes = ein_arena_alloc(pl->arena, (size_t)(in->n + 1), sizeof(int));
  if (!axes) return no_memory(pl);
  int na = group_order(pl, in, nd->set, axes);
  pview t;
  ein_status st = temp_view(pl, axes, na, dt, &t);
  if (st) return st;
  const pview *src[1] = {in};
  if ((st = emit_loop(pl, EIN_ROLE_REDUCE, &t, 1, src, EIN_REDUCE_SUM, 1)))
    return st;
  pl->ir->steps[pl->ir->nsteps - 1].operand[0] = i;
  pl->ir->steps[pl->ir->nsteps - 1].result = i;
  nd->view = t;
  return EIN_OK;
}

/* emit_node recurses once per level of the tree: a chain contracted in
 * order is as deep as it is long (10,000 levels of a frame of ~0.7 KiB,
 * ~1.9 KiB under ASan). Deep trees are emitted on a thread of their own
 * with a stack sized for them, so no network overflows the caller's. */
typedef struct emit_job {
  planner *pl;
  int root;
  const pview *want;
  pview *out;
  ein_status st;
} emit_job;

static void *emit_thread(void *arg) {
  emit_job *job = arg;
  job->st = emit_node(job->pl, job->root, job->want, job->out);
  return NULL;
}

enum { EMIT_DIRECT_DEPTH = 256, EMIT_BYTES_PER_LEVEL = 8192 };

static ein_status emit_tree(planner *pl, int root, const pview *want,
                            pview *out) {
  int n = pl->p->ninputs, depth = 0;
  int *level = ein_calloc((size_t)pl->nnodes + 1, sizeof *level);
  if (!level) return no_memory(pl);
  for (int k = n; k < pl->nnodes; k++) { /* children come first */
    int l = level[pl->nodes[k].left], r = level[pl->nodes[k].right];
    level[k] = 1 + (l > r ? l : r);
    if (level[k] > depth) depth = level[k];
  }
  ein_free(level);
  if (depth <= EMIT_DIRECT_DEPTH) return emit_node(pl, root, want, out);
  emit_job job = {pl, root, want, out, EIN_OK};
  pthread_attr_t attr;
  pthread_t t;
  size_t stack = (size_t)depth * EMIT_BYTES_PER_LEVEL + (1u << 20);
  if (pthread_attr_init(&attr)) return no_memory(pl);
  bool made = !pthread_attr_setstacksize(&attr, stack) &&
              !pthread_create(&t, &attr, emit_thread, &job);
  pthread_attr_destroy(&attr);
  if (!made)
    return ein_fail_memory(pl->err, "cannot start a thread with a %zu-byte "
                                    "stack to plan a tree %d levels deep",
                           stack, depth);
  pthread_join(t, NULL);
  return job.st;
}

static ein_status plan_contraction(planner *pl, pview *inv,
                                   const pview *outv) {
  int n = pl->p->ninputs;
  axset *sets = ein_arena_alloc(pl->arena, (size_t)n, sizeof *sets);
  int *count = ein_calloc((size_t)pl->p->naxes + 1, sizeof *count);
  if (!sets || !count) {
    ein_free(count);
    return no_memory(pl);
  }
  for (int i = 0; i < n; i++) sets[i] = view_set(pl, &inv[i]);
  /* The output's axes that some input has: repeats come last. */
  axset outall = view_set(pl, outv), outset = set_new(pl, outall.n);
  if (outset.ax)
    for (int i = 0; i < n; i++)
      for (int k = 0; k < sets[i].n; k++) count[sets[i].ax[k]] = 1;
  if (outset.ax)
    for (int k = 0; k < outall.n; k++)
      if (count[outall.ax[k]]) outset.ax[outset.n++] = outall.ax[k];
  memset(count, 0, sizeof *count * (size_t)pl->p->naxes);
  ein_status st = pl->oom || !outset.ax ? no_memory(pl) : EIN_OK;
  if (!st) st = make_leaves(pl, inv, outset, sets, count);
  if (!st) st = build_tree(pl, outset, sets, count);
  ein_free(count);
  if (!st) st = check_memory_limit(pl, n);
  for (int i = 0; i < n && !st; i++) st = reduce_leaf(pl, i, &inv[i]);
  if (st) return st;
  int root = pl->nnodes - 1;
  pview r;
  bool repeats = outall.n > outset.n;
  if (!repeats) return emit_tree(pl, root, outv, &r);
  if ((st = emit_tree(pl, root, NULL, &r))) return st;
  const pview *src[1] = {&r};
  return emit_loop(pl, EIN_ROLE_REPEAT, outv, 1, src, EIN_REDUCE_SUM, 1);
}

void ein_plan_ir_destroy(ein_plan_ir *plan) {
  if (!plan) return;
  ein_plan_ir_destroy(plan->slicing.add);
  ein_plan_ir_destroy(plan->slicing.store);
  ein_plan_ir_destroy(plan->slicing.zero);
  ein_arena arena = plan->arena;
  ein_arena_destroy(&arena);
}

/* Whether axis a (factor f of dim d) already appeared in op before,
 * outside broadcast dims. An operand has at most a few dozen factors. */
static bool seen_before(const ein_bound_operand *op, int d, int f, int a) {
  for (int e = 0; e <= d; e++) {
    const ein_bound_dim *dim = &op->dims[e];
    if (dim->broadcast) continue;
    for (int g = dim->first; g < dim->first + dim->count && g < f; g++)
      if (op->factors[g] == a) return true;
  }
  return false;
}

/* Bytes an evaluation must move at least: each input's distinct elements
 * read once (an axis repeated in one operand, a diagonal, counts once; a
 * broadcast dim of size 1 counts once) and the output written once. */
static double compulsory_bytes(const ein_problem *p,
                               const ein_tensor_desc *inputs,
                               const ein_tensor_desc *output) {
  double total = 0;
  for (int i = 0; i < p->ninputs; i++) {
    const ein_bound_operand *op = &p->inputs[i];
    double elems = 1;
    for (int d = 0; d < op->ndim; d++) {
      const ein_bound_dim *dim = &op->dims[d];
      if (dim->broadcast) continue;
      for (int f = dim->first; f < dim->first + dim->count; f++) {
        int a = op->factors[f];
        if (!seen_before(op, d, f, a)) elems *= (double)p->axes[a].size;
      }
    }
    total += elems * (double)ein_dtype_size(inputs[i].dtype);
  }
  double out_elems = 1;
  for (int d = 0; d < p->output.ndim; d++)
    out_elems *= (double)p->output.dims[d].size;
  return total + out_elems * (double)ein_dtype_size(output->dtype);
}

/* The inputs' and the output's bytes, whole (numel x element size): what
 * they hold in memory, beside compulsory_bytes' traffic. Counted in double
 * (an empty tensor's other dims may multiply past int64) and held at
 * INT64_MAX. */
static int64_t bytes_held(double bytes) {
  return bytes < 0x1p63 ? (int64_t)bytes : INT64_MAX;
}

static void whole_bytes(const ein_problem *p, const ein_tensor_desc *inputs,
                        const ein_tensor_desc *output, ein_plan_ir *ir) {
  double in = 0, out = (double)ein_dtype_size(output->dtype);
  for (int i = 0; i < p->ninputs; i++) {
    double n = (double)ein_dtype_size(inputs[i].dtype);
    for (int d = 0; d < inputs[i].ndim; d++) n *= (double)inputs[i].shape[d];
    in += n;
  }
  for (int d = 0; d < p->output.ndim; d++) out *= (double)p->output.dims[d].size;
  ir->input_bytes = bytes_held(in);
  ir->output_bytes = bytes_held(out);
}

/* The accumulator and plain-copy rules of ein_step (plan.h). */
static void decide_numerics(ein_step *s) {
  ein_dtype in = s->nsrc ? s->src_dtype[0] : s->dst_dtype;
  if (ein_dtype_is_complex(in))
    s->acc_dtype = in == EIN_DT_C128 || s->dst_dtype == EIN_DT_C128
                       ? EIN_DT_C128
                       : EIN_DT_C64;
  else if (in == EIN_DT_F64 || s->dst_dtype == EIN_DT_F64)
    s->acc_dtype = ein_dtype_is_float(in) ? EIN_DT_F64 : EIN_DT_I64;
  else
    s->acc_dtype = ein_dtype_is_float(in) ? EIN_DT_F32 : EIN_DT_I64;
  bool reduces = false;
  for (int i = 0; i < s->naxes; i++)
    reduces |= s->axes[i].stride[0] == 0 && s->axes[i].size > 1;
  s->plain_copy = s->kind == EIN_STEP_LOOP && s->nsrc == 1 &&
                  s->src_dtype[0] == s->dst_dtype && s->alpha == 1 &&
                  s->op != EIN_REDUCE_ANY && s->op != EIN_REDUCE_ALL &&
                  !reduces;
}

/* The plan's per-axis and per-step arrays, sized from the problem. */
static ein_status alloc_plan_arrays(planner *pl) {
  const ein_problem *p = pl->p;
  ein_plan_ir *ir = pl->ir;
  int n = p->ninputs;
  pl->size = ein_arena_alloc(pl->arena, (size_t)(p->naxes + 1), sizeof(int64_t));
  ir->axis_labels = ein_arena_alloc(pl->arena, (size_t)(p->naxes + 1),
                                    sizeof(char *));
  ir->axis_roles = ein_arena_alloc(pl->arena, (size_t)(p->naxes + 1),
                                   sizeof(ein_axis_role));
  ir->out_shape = ein_arena_alloc(pl->arena, (size_t)(p->output.ndim + 1),
                                  sizeof(int64_t));
  pl->cap_steps = 6 * n + 8;
  pl->cap_bufs = 5 * n + 8;
  ir->steps = ein_arena_alloc(pl->arena, (size_t)pl->cap_steps, sizeof(ein_step));
  ir->buffers = ein_arena_alloc(pl->arena, (size_t)pl->cap_bufs,
                                sizeof(ein_plan_buffer));
  if (!pl->size || !ir->axis_labels || !ir->axis_roles || !ir->out_shape ||
      !ir->steps || !ir->buffers)
    return no_memory(pl);
  ir->axis_sizes = pl->full = pl->size;
  return EIN_OK;
}

/* Copies sizes, labels and roles of the problem's axes and the output
 * shape into the plan; *empty says some axis has size 0. */
static ein_status record_axes(planner *pl, bool *empty) {
  const ein_problem *p = pl->p;
  ein_plan_ir *ir = pl->ir;
  *empty = false;
  for (int a = 0; a < p->naxes; a++) {
    pl->size[a] = p->axes[a].size;
    ir->axis_labels[a] = ein_arena_strndup(pl->arena, p->axes[a].label,
                                           strlen(p->axes[a].label));
    if (!ir->axis_labels[a]) return no_memory(pl);
    *empty |= pl->size[a] == 0;
    ir->axis_roles[a] = ein_axis_reduced(p, a)    ? EIN_AXIS_REDUCED
                        : ein_axis_repeated(p, a) ? EIN_AXIS_REPEATED
                                                  : EIN_AXIS_KEPT;
  }
  ir->out_ndim = p->output.ndim;
  for (int d = 0; d < p->output.ndim; d++)
    ir->out_shape[d] = p->output.dims[d].size;
  return EIN_OK;
}

/* The yardsticks a plan is reported against: the naive cost, every input
 * axis visited once per term (opt_einsum), and the compulsory bytes. */
static void record_baselines(planner *pl, const ein_tensor_desc *inputs,
                             const ein_tensor_desc *output) {
  const ein_problem *p = pl->p;
  axset in_axes = set_new(pl, p->naxes), kept = set_new(pl, p->naxes);
  if (!in_axes.ax || !kept.ax) {
    pl->oom = true;
    return;
  }
  for (int a = 0; a < p->naxes; a++) {
    if (p->axes[a].in_input) in_axes.ax[in_axes.n++] = a;
    if (p->axes[a].in_input && p->axes[a].in_output) kept.ax[kept.n++] = a;
  }
  pl->ir->naive_flops = flop_count(pl, in_axes, kept, p->ninputs);
  pl->ir->min_bytes = compulsory_bytes(p, inputs, output);
  whole_bytes(p, inputs, output, pl->ir);
}

/* Buffers for the inputs and the output and their views (no input views
 * when the problem is empty). */
static ein_status operand_views(planner *pl, const ein_tensor_desc *inputs,
                                const ein_tensor_desc *output, bool empty,
                                pview **inv, pview *outv) {
  const ein_problem *p = pl->p;
  int n = p->ninputs;
  for (int i = 0; i < n; i++)
    add_buffer(pl, EIN_BUF_INPUT, i, inputs[i].dtype, 0);
  int outbuf = add_buffer(pl, EIN_BUF_OUTPUT, -1, output->dtype, 0);
  *inv = ein_arena_alloc(pl->arena, (size_t)n, sizeof **inv);
  if (!*inv) return no_memory(pl);
  ein_status st = EIN_OK;
  const ein_slicing *sl = &pl->ir->slicing;
  if (!empty)
    for (int i = 0; i < n && !st; i++) {
      pl->slice_acc = sl->n ? &sl->in_stride[(size_t)i * (size_t)sl->n] : NULL;
      st = operand_view(pl, &p->inputs[i], &inputs[i], i, &(*inv)[i]);
    }
  pl->slice_acc = sl->out_stride;
  if (!st) st = operand_view(pl, &p->output, output, outbuf, outv);
  pl->slice_acc = NULL;
  return st;
}

/* ------------------------------------------------------------ slicing */

/* The sliced axis named text[0 .. len), or -1. */
static int axis_named(const planner *pl, const char *text, size_t len) {
  for (int a = 0; a < pl->p->naxes; a++)
    if (strlen(pl->p->axes[a].label) == len &&
        memcmp(pl->p->axes[a].label, text, len) == 0)
      return a;
  return -1;
}

/* Places the sliced axes ids[0 .. total) (marked in pl->slice_pos):
 * output axes first, summed ones after, each in the order given; ids
 * gets them in that order. */
static void place_slices(planner *pl, int *ids, int total) {
  int kept = 0, summed = 0;
  for (int k = 0; k < total; k++) kept += pl->p->axes[ids[k]].in_output;
  int next_kept = 0;
  for (int k = 0; k < total; k++) {
    int a = ids[k];
    pl->slice_pos[a] = pl->p->axes[a].in_output ? next_kept++
                                                 : kept + summed++;
  }
  for (int a = 0; a < pl->p->naxes; a++)
    if (pl->slice_pos[a] >= 0) ids[pl->slice_pos[a]] = a;
  pl->ir->slicing.nkept = kept;
}

/* The sliced axes the search chose, and the caller's named ones, from
 * limits->slice_ids (ein_plan_build's second plan), each of the chunk
 * given beside it (planned size, in size[]). */
static ein_status slice_ids(planner *pl, const ein_plan_limits *limits,
                            int *ids, int64_t *size, int *n) {
  int total = 0;
  for (int k = 0; k < limits->nslice_ids; k++) {
    int a = limits->slice_ids[k];
    if (a < 0 || a >= pl->p->naxes || pl->slice_pos[a] != -1) continue;
    pl->slice_pos[a] = 0;
    size[a] = limits->slice_chunks ? limits->slice_chunks[k] : 1;
    ids[total++] = a;
  }
  place_slices(pl, ids, total);
  *n = total;
  return EIN_OK;
}

/* The number of slices after "name:" in a slice_axes text, as a chunk
 * size in size[a]: it must divide the axis (each slice plans one size). */
static ein_status read_slice_count(planner *pl, const char *text, int a,
                                   const char **c, int64_t *size) {
  char *end;
  long long count = strtoll(*c, &end, 10);
  int64_t full = pl->full[a];
  if (end == *c)
    return ein_fail_argument(pl->err,
                             "slice_axes '%.80s': '%s:' wants a number of "
                             "slices after ':'",
                             text, pl->p->axes[a].label);
  if (count < 1 || count > full || full % count != 0)
    return ein_fail_argument(
        pl->err, "slice_axes '%.80s': '%s:%.*s' asks for %.*s slices of an "
        "axis of size %lld; the count must divide the size",
        text, pl->p->axes[a].label, (int)(end - *c), *c, (int)(end - *c), *c,
        (long long)full);
  size[a] = full / count;
  *c = end;
  return EIN_OK;
}

/* Reads the comma-separated names, each "name" (one index per slice) or
 * "name:count" (that many slices), into pl->slice_pos, ids (output axes
 * first) and size[] (the chunks); *n is the count. */
static ein_status read_slice_names(planner *pl, const char *text, int *ids,
                                   int64_t *size, int *n) {
  int total = 0;
  for (const char *c = text; *c;) {
    while (*c == ' ' || *c == ',') c++;
    const char *end = c;
    while (*end && *end != ',' && *end != ' ' && *end != ':') end++;
    if (end == c) break;
    int a = axis_named(pl, c, (size_t)(end - c));
    if (a < 0 || pl->slice_pos[a] != -1)
      return ein_fail_argument(
          pl->err, "slice_axes '%.80s': '%.*s' %s", text, (int)(end - c), c,
          a < 0 ? "is no axis of the expression" : "is named twice");
    if (!pl->p->axes[a].in_output && pl->p->reduction != EIN_REDUCE_SUM &&
        pl->p->reduction != EIN_REDUCE_MEAN)
      return ein_fail_argument(
          pl->err, "slice_axes '%.80s': '%s' is reduced with '%s'; only "
                   "sum and mean add up over slices",
          text, pl->p->axes[a].label, ein_reduction_name(pl->p->reduction));
    pl->slice_pos[a] = 0; /* marked; placed below */
    size[a] = 1;
    ids[total++] = a;
    c = end;
    if (*c == ':') {
      c++;
      ein_status st = read_slice_count(pl, text, a, &c, size);
      if (st) return st;
    }
  }
  place_slices(pl, ids, total);
  *n = total;
  return EIN_OK;
}

/* Sets up slicing over the named axes: planned sizes of their chunks, the
 * tables of ein_slicing. Nothing is sliced when an axis is empty (the
 * plan fills the output). */
static ein_status setup_slicing(planner *pl, const ein_plan_limits *limits,
                                bool empty) {
  const char *text = limits ? limits->slice_axes : NULL;
  bool ids_given = limits && limits->nslice_ids > 0;
  if ((!ids_given && (!text || !*text)) || empty) return EIN_OK;
  int naxes = pl->p->naxes;
  ein_slicing *sl = &pl->ir->slicing;
  pl->slice_pos = ein_arena_alloc(pl->arena, (size_t)naxes + 1, sizeof(int));
  int *ids = ein_arena_alloc(pl->arena, (size_t)naxes + 1, sizeof(int));
  int64_t *size = ein_arena_alloc(pl->arena, (size_t)naxes + 1,
                                  sizeof(int64_t));
  if (!pl->slice_pos || !ids || !size) return no_memory(pl);
  for (int a = 0; a < naxes; a++) pl->slice_pos[a] = -1;
  memcpy(size, pl->full, sizeof(int64_t) * (size_t)naxes);
  ein_status st = ids_given ? slice_ids(pl, limits, ids, size, &sl->n)
                            : read_slice_names(pl, text, ids, size, &sl->n);
  if (st || sl->n == 0) {
    pl->slice_pos = NULL;
    return st;
  }
  int ni = pl->p->ninputs;
  sl->axes = ids;
  sl->sizes = ein_arena_alloc(pl->arena, (size_t)sl->n, sizeof(int64_t));
  sl->chunk = ein_arena_alloc(pl->arena, (size_t)sl->n, sizeof(int64_t));
  sl->in_stride = ein_arena_alloc(pl->arena, (size_t)sl->n * (size_t)ni,
                                  sizeof(int64_t));
  sl->out_stride = ein_arena_alloc(pl->arena, (size_t)sl->n, sizeof(int64_t));
  if (!sl->sizes || !sl->chunk || !sl->in_stride || !sl->out_stride)
    return no_memory(pl);
  sl->count = 1;
  for (int k = 0; k < sl->n; k++) {
    sl->chunk[k] = size[ids[k]];
    sl->sizes[k] = pl->full[ids[k]] / sl->chunk[k];
    sl->count *= (double)sl->sizes[k];
  }
  pl->size = size;
  return EIN_OK;
}

/* A plan of its own for one LOOP step of the accumulation: input 0 and
 * the output of the main plan's dtype; it borrows the main plan's axis
 * tables (it is destroyed with it, first). *sub is a planner over it. */
static ein_status sub_plan(planner *pl, planner *sub, ein_plan_ir **out) {
  ein_arena arena;
  ein_arena_init(&arena);
  ein_plan_ir *ir = ein_arena_alloc(&arena, 1, sizeof *ir);
  if (!ir) {
    ein_arena_destroy(&arena);
    return no_memory(pl);
  }
  ir->arena = arena;
  *out = ir;
  const ein_plan_ir *m = pl->ir;
  ir->dtype = m->dtype;
  ir->reduction = EIN_REDUCE_SUM;
  ir->naxes = m->naxes;
  ir->axis_labels = m->axis_labels;
  ir->axis_sizes = m->axis_sizes;
  ir->axis_roles = m->axis_roles;
  ir->ninputs = 1;
  ir->out_ndim = m->out_ndim;
  ir->out_shape = m->out_shape;
  ir->path_method = "slices";
  *sub = *pl;
  sub->ir = ir;
  sub->arena = &ir->arena;
  sub->cap_steps = 1;
  sub->cap_bufs = 2;
  ir->steps = ein_arena_alloc(sub->arena, 1, sizeof(ein_step));
  ir->buffers = ein_arena_alloc(sub->arena, 2, sizeof(ein_plan_buffer));
  if (!ir->steps || !ir->buffers) return no_memory(pl);
  add_buffer(sub, EIN_BUF_INPUT, 0, m->dtype, 0);
  add_buffer(sub, EIN_BUF_OUTPUT, -1, m->dtype, 0);
  return EIN_OK;
}

static void finish_sub(ein_plan_ir *ir) {
  decide_numerics(&ir->steps[0]);
  ir->flops = ir->steps[0].flops;
  ir->bytes_moved = ir->steps[0].bytes_read + ir->steps[0].bytes_written;
}

/* add: out[e] = in[e] + in[E + e], E = acc_elems, both compact. */
static ein_status plan_add(planner *pl, int64_t E) {
  planner sub;
  ein_plan_ir **add = &pl->ir->slicing.add;
  ein_status st = sub_plan(pl, &sub, add);
  if (st) return st;
  ein_step *s = add_step(&sub);
  s->axes = ein_arena_alloc(sub.arena, 2, sizeof *s->axes);
  if (!s->axes) return no_memory(pl);
  s->kind = EIN_STEP_LOOP;
  s->role = EIN_ROLE_REDUCE;
  s->nsrc = 1;
  s->op = EIN_REDUCE_SUM;
  s->dst = (ein_ref){1, 0};
  s->src[0] = (ein_ref){0, 0};
  s->dst_dtype = s->src_dtype[0] = pl->dtype;
  s->naxes = 2;
  s->axes[0] = (ein_loop_axis){-1, E, {1, 1, 0}};
  s->axes[1] = (ein_loop_axis){-1, 2, {0, E, 0}};
  s->flops = (double)E;
  s->bytes_read = 2 * (double)E * (double)ein_dtype_size(pl->dtype);
  s->bytes_written = (double)E * (double)ein_dtype_size(pl->dtype);
  finish_sub(*add);
  return EIN_OK;
}

/* store: the compact sum `compact` copied into the caller's view `want`
 * (the same axes). */
static ein_status plan_store(planner *pl, const pview *compact,
                             const pview *want) {
  planner sub;
  ein_plan_ir **store = &pl->ir->slicing.store;
  ein_status st = sub_plan(pl, &sub, store);
  if (st) return st;
  pview src = *compact, dst = *want;
  src.buf = 0;
  dst.buf = 1;
  const pview *srcs[1] = {&src};
  if ((st = emit_loop(&sub, EIN_ROLE_STORE, &dst, 1, srcs, EIN_REDUCE_SUM, 1)))
    return st;
  finish_sub(*store);
  return EIN_OK;
}

/* zero: one FILL step of 0 over the output piece `outv` of one slice, so
 * that a range of units (ein_plan_run_units) leaves zeros in the pieces
 * it does not write and partials add up. */
static ein_status plan_zero(planner *pl, const pview *outv) {
  if (pl->ir->slicing.nkept == 0) return EIN_OK;
  planner sub;
  ein_status st = sub_plan(pl, &sub, &pl->ir->slicing.zero);
  if (st) return st;
  ein_step *s = add_step(&sub);
  s->axes = ein_arena_alloc(sub.arena, (size_t)outv->n + 1, sizeof *s->axes);
  if (!s->axes) return no_memory(pl);
  s->kind = EIN_STEP_FILL;
  s->role = EIN_ROLE_EMPTY;
  s->fill = 0;
  s->dst = (ein_ref){1, 0};
  s->dst_dtype = pl->dtype;
  double total = 1;
  for (int i = 0; i < outv->n; i++) {
    int64_t n = pl->size[outv->ax[i]];
    s->axes[s->naxes++] = (ein_loop_axis){outv->ax[i], n, {outv->st[i], 0, 0}};
    total *= (double)n;
  }
  s->bytes_written = total * (double)ein_dtype_size(pl->dtype);
  finish_sub(pl->ir->slicing.zero);
  return EIN_OK;
}

/* When a summed axis is sliced the plan writes a compact output slice
 * (the accumulation buffers) instead of the caller's output: outv is
 * made compact, and the store plan copies into the caller's layout. */
static ein_status slice_output(planner *pl, pview *outv) {
  ein_slicing *sl = &pl->ir->slicing;
  if (sl->n == sl->nkept) return EIN_OK;
  pview want = *outv, compact;
  ein_status st;
  int *order = ein_arena_alloc(pl->arena, (size_t)outv->n + 1, sizeof(int));
  if (!order) return no_memory(pl);
  view_sort(&want);
  memcpy(order, want.ax, sizeof(int) * (size_t)want.n);
  int64_t saved = pl->ir->workspace_bytes, largest = pl->ir->largest_intermediate;
  /* A temp's compact layout, on the output buffer: no workspace. */
  if ((st = temp_view(pl, order, want.n, pl->dtype, &compact))) return st;
  pl->ir->nbuffers--;
  pl->ir->workspace_bytes = saved;
  pl->ir->largest_intermediate = largest;
  compact.buf = outv->buf;
  sl->acc_elems = 1;
  for (int i = 0; i < compact.n; i++) sl->acc_elems *= pl->size[compact.ax[i]];
  if ((st = plan_store(pl, &compact, outv)) || (st = plan_add(pl, sl->acc_elems)))
    return st;
  *outv = compact;
  return EIN_OK;
}

int64_t ein_plan_slice_bytes_ir(const ein_plan_ir *ir) {
  const ein_slicing *sl = &ir->slicing;
  return ir->workspace_bytes +
         3 * sl->acc_elems * (int64_t)ein_dtype_size(ir->dtype);
}

/* Temporaries share the workspace where their lives do not overlap: a
 * buffer lives from the first step that touches it to the last, and takes
 * the lowest 64-byte aligned offset clear of every buffer live with it
 * (first fit, in order of first use). A network's plan then needs about
 * its live intermediates, not the sum of all of them. */
/* first[b] and last[b]: the first and last step touching buffer b. */
static void buffer_lives(const ein_plan_ir *ir, int *first, int *last) {
  for (int b = 0; b < ir->nbuffers; b++) first[b] = last[b] = -1;
  for (int i = 0; i < ir->nsteps; i++) {
    const ein_step *st = &ir->steps[i];
    int bufs[3] = {st->dst.buffer, st->nsrc > 0 ? st->src[0].buffer : -1,
                   st->nsrc > 1 ? st->src[1].buffer : -1};
    for (int k = 0; k < 3; k++)
      if (bufs[k] >= 0) {
        if (first[bufs[k]] < 0) first[bufs[k]] = i;
        last[bufs[k]] = i;
      }
  }
}

static int64_t buffer_end(const ein_plan_buffer *b) {
  return b->offset + b->elems * (int64_t)ein_dtype_size(b->dtype);
}

/* The lowest 64-byte aligned offset where `size` bytes overlap none of
 * the live buffers. */
static int64_t first_fit(const ein_plan_ir *ir, const int *live, int nlive,
                         int64_t size) {
  int64_t off = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (int k = 0; k < nlive; k++) {
      const ein_plan_buffer *o = &ir->buffers[live[k]];
      if (off < buffer_end(o) && o->offset < off + size) {
        off = (buffer_end(o) + 63) & ~(int64_t)63;
        moved = true;
      }
    }
  }
  return off;
}

static int cmp_pair(const void *a, const void *b) {
  const int *x = a, *y = b;
  return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0])
                      : (x[1] > y[1]) - (x[1] < y[1]);
}

static ein_status pack_workspace(planner *pl) {
  ein_plan_ir *ir = pl->ir;
  int nb = ir->nbuffers, nlive = 0, norder = 0;
  int *first = ein_malloc(sizeof(int) * (size_t)(nb + 1));
  int *last = ein_malloc(sizeof(int) * (size_t)(nb + 1));
  int *live = ein_malloc(sizeof(int) * (size_t)(nb + 1));
  int (*order)[2] = ein_malloc(sizeof *order * (size_t)(nb + 1));
  if (!first || !last || !live || !order) {
    ein_free(first), ein_free(last), ein_free(live), ein_free(order);
    return no_memory(pl);
  }
  buffer_lives(ir, first, last);
  for (int b = 0; b < nb; b++) /* temporaries by (first use, id) */
    if (ir->buffers[b].kind == EIN_BUF_TEMP && first[b] >= 0)
      order[norder][0] = first[b], order[norder++][1] = b;
  qsort(order, (size_t)norder, sizeof *order, cmp_pair);
  int64_t top = 0;
  for (int j = 0; j < norder; j++) {
    int b = order[j][1], kept = 0;
    for (int k = 0; k < nlive; k++) /* drop the buffers dead by now */
      if (last[live[k]] >= first[b]) live[kept++] = live[k];
    nlive = kept;
    ein_plan_buffer *buf = &ir->buffers[b];
    buf->offset = first_fit(ir, live, nlive,
                            buf->elems * (int64_t)ein_dtype_size(buf->dtype));
    if (buffer_end(buf) > top) top = buffer_end(buf);
    live[nlive++] = b;
    int64_t live_bytes = 0; /* the temporaries alive at b's first step */
    for (int k = 0; k < nlive; k++)
      live_bytes += buffer_end(&ir->buffers[live[k]]) -
                    ir->buffers[live[k]].offset;
    if (live_bytes > ir->peak_temp_bytes) ir->peak_temp_bytes = live_bytes;
  }
  ein_free(first), ein_free(last), ein_free(live), ein_free(order);
  ir->workspace_bytes = top;
  return EIN_OK;
}

/* The memory limit covers every buffer the plan allocates, not only the
 * path's intermediates: pre-reductions, layout copies and stores too, and
 * a sliced plan's accumulation buffers (issue 26, bug 2). */
static ein_status check_buffers(planner *pl) {
  if (pl->memory_limit_bytes <= 0) return EIN_OK;
  const ein_plan_ir *ir = pl->ir;
  int worst = -1;
  int64_t worst_bytes = ir->slicing.acc_elems *
                        (int64_t)ein_dtype_size(ir->dtype);
  for (int b = 0; b < ir->nbuffers; b++) {
    const ein_plan_buffer *buf = &ir->buffers[b];
    int64_t bytes = buf->kind == EIN_BUF_TEMP
                        ? buf->elems * (int64_t)ein_dtype_size(buf->dtype)
                        : 0;
    if (bytes > worst_bytes) worst_bytes = bytes, worst = b;
  }
  if (worst_bytes <= pl->memory_limit_bytes) return EIN_OK;
  const char *what = "a sum of sliced output pieces";
  int step = 0;
  for (int i = 0; i < ir->nsteps && worst >= 0; i++)
    if (ir->steps[i].dst.buffer == worst) {
      what = ein_step_role_name(ir->steps[i].role);
      step = i + 1;
      break;
    }
  return ein_fail_limit(
      pl->err,
      "the plan needs a buffer of %lld bytes (%s%s%.0d) but the memory "
      "limit is %lld bytes; a limit of %lld bytes fits this plan, or slice "
      "axes (slice_axes, --slice) to shrink every buffer",
      (long long)worst_bytes, what, step ? ", written by step " : "", step,
      (long long)pl->memory_limit_bytes, (long long)worst_bytes);
}

/* The totals of a sliced plan: every slice's FLOPs and bytes, the adds,
 * and the FLOPs of the same expression planned whole. */
static void slicing_totals(planner *pl, const ein_tensor_desc *inputs,
                           const ein_tensor_desc *output,
                           const ein_plan_limits *limits) {
  ein_plan_ir *ir = pl->ir;
  ein_slicing *sl = &ir->slicing;
  if (!sl->n) return;
  sl->slice_flops = ir->flops;
  double pieces = 1;
  for (int k = 0; k < sl->nkept; k++) pieces *= (double)sl->sizes[k];
  double adds = sl->add ? sl->count - pieces : 0;
  ir->flops = sl->slice_flops * sl->count + (sl->add ? adds * sl->add->flops : 0);
  ir->bytes_moved = ir->bytes_moved * sl->count +
                    (sl->add ? adds * sl->add->bytes_moved +
                                   pieces * sl->store->bytes_moved
                             : 0);
  sl->unsliced_largest = limits->unsliced_largest;
  if (limits->unsliced_flops > 0) {
    sl->unsliced_flops = limits->unsliced_flops;
    return;
  }
  ein_plan_limits whole = {.path = limits->path};
  ein_plan_ir *unsliced = NULL;
  ein_error_rec quiet = {0};
  if (ein_plan_build(pl->p, inputs, output, pl->caps, &whole, &quiet,
                     &unsliced) == EIN_OK)
    sl->unsliced_flops = unsliced->flops;
  ein_plan_ir_destroy(unsliced);
  ein_error_clear(&quiet);
}

/* The steps: a fill for an empty problem, one LOOP for one operand, else
 * the contraction tree. */
static ein_status plan_steps(planner *pl, bool empty, pview *inv,
                             pview *outv) {
  ein_plan_ir *ir = pl->ir;
  const ein_problem *p = pl->p;
  if (empty) {
    ir->path_method = "none";
    return plan_empty(pl, outv);
  }
  if (p->ninputs > 1) return plan_contraction(pl, inv, outv);
  ir->path_method = "single";
  double alpha = p->reduction == EIN_REDUCE_MEAN ? 1 / reduced_count(pl) : 1;
  const pview *src[1] = {&inv[0]};
  ein_status st =
      emit_loop(pl, EIN_ROLE_SINGLE, outv, 1, src, p->reduction, alpha);
  if (!st) {
    ir->steps[0].operand[0] = 0;
    ir->steps[0].result = 1;
  }
  return st;
}

/* The caller's contraction order, checked against the operand count
 * whether or not the plan contracts (one operand takes "[]"). */
static ein_status given_path(planner *pl, const char *text) {
  int n = pl->p->ninputs;
  pl->given = ein_arena_alloc(pl->arena, (size_t)n, sizeof *pl->given);
  if (!pl->given) return no_memory(pl);
  return ein_path_given(text, n, pl->given, pl->err);
}

/* Sets up the planner over a new plan; checks the operand count and
 * dtypes and picks the compute dtype and the memory limit. */
static ein_status planner_init(planner *pl, const ein_tensor_desc *inputs,
                               const ein_tensor_desc *output,
                               const ein_plan_limits *limits) {
  const ein_problem *p = pl->p;
  ein_plan_ir *ir = pl->ir;
  if (p->ninputs < 1)
    return ein_fail(pl->err, EIN_ERR_OPERAND_COUNT,
                    "an expression needs at least one input to evaluate");
  pl->dtype = inputs[0].dtype;
  ein_status st = check_dtypes(pl, inputs, output);
  if (st) return st;
  pl->cdtype = pl->caps->round_intermediates ? pl->dtype
                                              : ein_dtype_compute(pl->dtype);
  pl->limits = limits;
  if (limits && limits->memory_limit > 0) {
    pl->memory_limit_bytes = limits->memory_limit;
    pl->memory_limit =
        (double)limits->memory_limit / (double)ein_dtype_size(pl->cdtype);
    if (limits->search_limit > 0 && limits->search_limit < pl->memory_limit)
      pl->memory_limit = limits->search_limit;
  }
  if (limits && limits->ssa_path) {
    int n = pl->p->ninputs;
    pl->given = ein_arena_alloc(pl->arena, (size_t)n, sizeof *pl->given);
    if (!pl->given) return no_memory(pl);
    memcpy(pl->given, limits->ssa_path, sizeof *pl->given * (size_t)(n - 1));
    pl->given_method = limits->path_method;
  } else if (limits && limits->path && *limits->path &&
             (st = given_path(pl, limits->path))) {
    return st;
  }
  ir->dtype = pl->dtype;
  ir->reduction = p->reduction;
  ir->ninputs = p->ninputs;
  ir->naxes = p->naxes;
  return EIN_OK;
}

/* The largest d <= cap dividing n (n >= 1, cap >= 1). */
static int64_t largest_divisor_within(int64_t n, double cap) {
  for (int64_t d = cap >= (double)n ? n : (int64_t)cap; d > 1; d--)
    if (n % d == 0) return d;
  return 1;
}

/* How many indices of each axis the search sliced one slice takes: the
 * one rule for chunks (docs/design.md, "Chunked slices"). The search sized
 * its slices at one index of each axis, its largest intermediate then
 * `slice_largest` elements; an intermediate grows at most by the product
 * of the chunks of the axes it holds, so each axis in turn takes the
 * largest chunk dividing its size within the headroom the limit leaves
 * (the fewest slices the limit allows: each slice pays fixed costs). */
static void choose_chunks(const planner *pl, const ein_path_result *r,
                          int64_t *chunks) {
  double headroom = r->slice_largest > 0
                        ? floor(pl->memory_limit / r->slice_largest)
                        : 1;
  for (int k = 0; k < r->nsliced; k++) {
    int64_t size = pl->full[r->sliced[k]];
    chunks[k] = headroom >= 2 ? largest_divisor_within(size, headroom) : 1;
    headroom = floor(headroom / (double)chunks[k]);
  }
}

/* What a second plan over the search's slices takes (ein_plan_build):
 * the sliced axes (the caller's first) and their chunks, the per-slice
 * path, in memory of their own since the first plan is destroyed. */
static ein_status reslice_limits(planner *pl, const ein_plan_limits *limits,
                                 ein_plan_limits *again) {
  const ein_path_result *r = pl->reslice;
  const ein_slicing *sl = &pl->ir->slicing;
  int n = pl->p->ninputs, nids = sl->n + r->nsliced;
  int *ids = ein_malloc(sizeof(int) * (size_t)(nids + 1));
  int64_t *chunks = ein_malloc(sizeof(int64_t) * (size_t)(nids + 1));
  int (*pairs)[2] = ein_malloc(sizeof *pairs * (size_t)n);
  if (!ids || !chunks || !pairs) {
    ein_free(ids);
    ein_free(chunks);
    ein_free(pairs);
    return no_memory(pl);
  }
  for (int k = 0; k < sl->n; k++) ids[k] = sl->axes[k];
  for (int k = 0; k < sl->n; k++) chunks[k] = sl->chunk[k];
  for (int k = 0; k < r->nsliced; k++) ids[sl->n + k] = r->sliced[k];
  choose_chunks(pl, r, chunks + sl->n);
  memcpy(pairs, r->pairs, sizeof *pairs * (size_t)(n - 1));
  if (limits) *again = *limits;
  again->slice_ids = ids;
  again->slice_chunks = chunks;
  again->nslice_ids = nids;
  again->ssa_path = (const int(*)[2])pairs;
  again->path_method = r->method;
  again->unsliced_flops = r->free_flops;
  again->unsliced_largest = r->free_largest;
  return EIN_OK;
}

static ein_status plan_build(const ein_problem *p, const ein_tensor_desc *inputs,
                             const ein_tensor_desc *output,
                             const ein_backend_caps *caps,
                             const ein_plan_limits *limits, ein_error_rec *err,
                             ein_plan_ir **out, ein_plan_limits *again,
                             bool *over) {
  ein_arena arena;
  ein_arena_init(&arena);
  ein_plan_ir *ir = ein_arena_alloc(&arena, 1, sizeof *ir);
  if (!ir) {
    ein_arena_destroy(&arena);
    return ein_fail_memory(err, "out of memory while planning");
  }
  ir->arena = arena;
  planner pl = {.p = p, .caps = caps, .ir = ir, .arena = &ir->arena,
                .err = err};
  bool empty;
  pview *inv, outv;
  ein_status st;
  *over = false;
  if ((st = planner_init(&pl, inputs, output, limits)) ||
      (st = alloc_plan_arrays(&pl)) || (st = record_axes(&pl, &empty)))
    goto fail;
  record_baselines(&pl, inputs, output);
  if ((st = setup_slicing(&pl, limits, empty)) ||
      (st = operand_views(&pl, inputs, output, empty, &inv, &outv)) ||
      (!empty && pl.ir->slicing.n && (st = plan_zero(&pl, &outv))) ||
      (!empty && (st = slice_output(&pl, &outv))) ||
      (st = plan_steps(&pl, empty, inv, &outv))) {
    if (pl.reslice && again) st = reslice_limits(&pl, limits, again);
    if (!st) st = EIN_ERR_LIMIT;
    goto fail;
  }
  if (pl.oom) {
    st = no_memory(&pl);
    goto fail;
  }
  if ((st = pack_workspace(&pl))) goto fail;
  if ((st = check_buffers(&pl))) {
    *over = true;
    goto fail;
  }
  for (int i = 0; i < ir->nsteps; i++) decide_numerics(&ir->steps[i]);
  if (!ir->slicing.n && (st = ein_plan_find_view(ir, output))) {
    st = no_memory(&pl);
    goto fail;
  }
  for (int i = 0; i < ir->nsteps; i++) {
    ir->flops += ir->steps[i].flops;
    ir->bytes_moved += ir->steps[i].bytes_read + ir->steps[i].bytes_written;
  }
  slicing_totals(&pl, inputs, output, limits);
  *out = ir;
  return EIN_OK;
fail:
  ein_plan_ir_destroy(ir);
  return st;
}

/* One plan at the limits; when the search fits only sliced, a second plan
 * over those slices. *over: the plan failed only because a layout copy
 * or a sum exceeds the limit (check_buffers). */
static ein_status plan_round(const ein_problem *p,
                             const ein_tensor_desc *inputs,
                             const ein_tensor_desc *output,
                             const ein_backend_caps *caps,
                             const ein_plan_limits *limits,
                             ein_error_rec *err, ein_plan_ir **out,
                             bool *over) {
  ein_plan_limits again = {0};
  ein_status st =
      plan_build(p, inputs, output, caps, limits, err, out, &again, over);
  if (st != EIN_ERR_LIMIT || !again.ssa_path) return st;
  ein_error_clear(err);
  st = plan_build(p, inputs, output, caps, &again, err, out, NULL, over);
  if (st == EIN_ERR_LIMIT && *over) {
    /* chunks bound intermediates, not layout copies: one index each */
    ein_free((void *)again.slice_chunks);
    again.slice_chunks = NULL;
    ein_error_clear(err);
    st = plan_build(p, inputs, output, caps, &again, err, out, NULL, over);
  }
  ein_free((void *)again.slice_ids);
  ein_free((void *)again.slice_chunks);
  ein_free((void *)again.ssa_path);
  return st;
}

/* A plan whose searched order has an intermediate past what int64 counts
 * (EIN_ERR_OVERFLOW with no memory limit, path or slices given): made
 * again sliced at EIN_PLAN_COUNTABLE_BYTES, so that any network gets a
 * path, its costs and its largest intermediate; marked needs_limit_elems
 * (refused at execution). st when that cannot be made either. */
static ein_status plan_past_int64(const ein_problem *p,
                                  const ein_tensor_desc *inputs,
                                  const ein_tensor_desc *output,
                                  const ein_backend_caps *caps,
                                  const ein_plan_limits *limits,
                                  ein_error_rec *err, ein_plan_ir **out,
                                  ein_status st) {
  ein_plan_limits countable = limits ? *limits : (ein_plan_limits){0};
  if (st != EIN_ERR_OVERFLOW || countable.memory_limit ||
      (countable.path && *countable.path) ||
      (countable.slice_axes && *countable.slice_axes))
    return st;
  countable.memory_limit = EIN_PLAN_COUNTABLE_BYTES;
  ein_error_rec quiet = {0};
  ein_plan_ir *ir = NULL;
  ein_status again = ein_plan_build(p, inputs, output, caps, &countable,
                                    &quiet, &ir);
  ein_error_clear(&quiet);
  if (again) return st;
  ein_error_clear(err);
  ir->needs_limit_elems = ir->slicing.unsliced_largest > 0
                              ? ir->slicing.unsliced_largest
                              : 9.3e18; /* (past int64, by its failure) */
  *out = ir;
  return EIN_OK;
}

/* A plan; when the path search fits the memory limit only by slicing, a
 * second plan over those slices (the caller's sliced axes kept), on the
 * per-slice path the search found; past int64, plan_past_int64's. */
ein_status ein_plan_build(const ein_problem *p, const ein_tensor_desc *inputs,
                          const ein_tensor_desc *output,
                          const ein_backend_caps *caps,
                          const ein_plan_limits *limits, ein_error_rec *err,
                          ein_plan_ir **out) {
  ein_plan_limits tight = limits ? *limits : (ein_plan_limits){0};
  ein_status st = EIN_OK;
  /* Layout copies and sums past the limit: the search held 4x tighter,
   * a few times, before giving up with the first message. */
  for (int round = 0; round < 6; round++) {
    bool over = false;
    st = plan_round(p, inputs, output, caps, &tight, err, out, &over);
    if (st == EIN_ERR_OVERFLOW)
      return plan_past_int64(p, inputs, output, caps, limits, err, out, st);
    if (st != EIN_ERR_LIMIT || !over || tight.path) return st;
    ein_plan_ir *probe = NULL;
    ein_error_rec quiet = {0};
    double elems = (double)tight.memory_limit /
                   (double)ein_dtype_size(ein_dtype_compute(inputs[0].dtype));
    tight.search_limit = (tight.search_limit > 0 ? tight.search_limit : elems) / 4;
    if (tight.search_limit < 1) return st;
    ein_status again = plan_round(p, inputs, output, caps, &tight, &quiet,
                                  &probe, &over);
    ein_error_clear(&quiet);
    if (!again) {
      ein_error_clear(err);
      *out = probe;
      return EIN_OK;
    }
  }
  return st;
}

const char *ein_step_role_name(ein_step_role role) {
  switch (role) {
  case EIN_ROLE_CONTRACT: return "contract";
  case EIN_ROLE_REDUCE: return "pre-reduce";
  case EIN_ROLE_SINGLE: return "single";
  case EIN_ROLE_LAYOUT: return "layout";
  case EIN_ROLE_CONVERT: return "convert";
  case EIN_ROLE_STORE: return "store";
  case EIN_ROLE_REPEAT: return "repeat";
  case EIN_ROLE_EMPTY: return "empty";
  }
  return "?";
}

const char *ein_step_name(const ein_step *s) {
  if (s->view) return "view";
  if (s->kind == EIN_STEP_GEMM) return "gemm";
  if (s->kind == EIN_STEP_FILL) return "fill";
  bool reduces = false;
  for (int i = 0; i < s->naxes; i++)
    reduces |= s->axes[i].stride[0] == 0 && s->axes[i].size > 1;
  if (s->nsrc == 2) return reduces ? "contract" : "product";
  return reduces ? "reduce" : "copy";
}
