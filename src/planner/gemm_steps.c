/*
 * gemm_steps.c - a contraction of two operands as a GEMM: the batch, M, N
 * and K groups of its axes, the order of each group that both operands
 * (and the result) can be read in as matrices, a permuting copy of an
 * operand that fits no order, the GEMM step itself (dtypes for half
 * backends: gemm_ab_dtype), and the tree node emitted as a GEMM or, when
 * degenerate, a LOOP.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "path.h"
#include "path_given.h"
#include "planner_internal.h"

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
int group_order(planner *pl, const pview *v, axset g, int *out) {
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
  if (!axes) return planner_no_memory(pl);
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


static bool gemm_dtype_ok(const planner *pl, ein_dtype dt) {
  if (ein_dtype_is_float(dt) || ein_dtype_is_complex(dt)) return true;
  return pl->caps->gemm_int && dt != EIN_DT_BOOL;
}

/* Storage dtypes (docs/design.md, "Half precision on cuBLAS"). A GEMM's A
 * and B share one dtype: the half dtype itself on backends whose GEMM
 * reads it (cuBLAS takes no f32 operand beside a bf16 one, and an f32 GEMM
 * runs at a fifteenth of the half rate; the CPU where it has bf16 units
 * and oneDNN, about twice its f32 rate), else the compute
 * dtype. So an
 * intermediate a GEMM reads is stored in gemm_ab_dtype; one only LOOP
 * steps read (a store, a permute, a reduction, a LOOP contraction) stays
 * in the compute dtype, f32 for f16/bf16. */
ein_dtype gemm_ab_dtype(const planner *pl) {
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

bool node_gemm(planner *pl, int idx) {
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
  if (!axes) return planner_no_memory(pl);
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
  if (!grp->axes) return planner_no_memory(pl);
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
  if (!out->ax) return planner_no_memory(pl);
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
   * over it (a step over an axis neither input has). */
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
  if (!g->batch) return planner_no_memory(pl);
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
  if (!s) return planner_internal(pl, "too many steps");
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

ein_status emit_node(planner *pl, int idx, const pview *want,
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
