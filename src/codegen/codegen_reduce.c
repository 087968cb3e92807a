/*
 * codegen_reduce.c - the reduction kernels (kernels/reduce.cuh):
 * how a reduction spreads over the machine (choose_reduction, PyTorch's
 * and Inductor's rule), the inner, outer, thread and split forms and the
 * split's finishing pass (codegen_internal.h).
 */
#include "alloc.h"
#include "codegen.h"
#include "codegen_internal.h"
#include "hash.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_axes.h"
#include "outer_layout.h"
#include "strbuf.h"

/* ---------------------------------------------------------- reductions */


/* A contiguous reduced axis keeps a warp (or, for long rows and not too
 * many of them, 256 threads) per output; a strided one a thread per
 * output with 8 lanes along the reduction. Fewer than SHORT_RED terms
 * are unrolled in one thread (or in a transpose's tile: transpose_axes). When the outputs give less than one wave
 * of blocks and the reduction is long, the reduced range is cut into
 * chunks of at least SPLIT_MIN_TERMS per lane so that pass 1 has about
 * SPLIT_TARGET blocks. */
red_shape cg_choose_reduction(const gen *g, bool inner) {
  red_shape r = {.inner = inner,
                 .nout = ein_loop_axes_volume(&g->kept),
                 .nred = ein_loop_axes_volume(&g->red),
                 .splits = 1};
  r.chunk = r.nred;
  if (r.nred < SHORT_RED) {
    r.kind = EIN_KERNEL_REDUCE_THREAD;
    r.lanes = 1;
    r.per_block = MAP_BLOCK;
    r.blocks = cg_blocks_for(r.nout, MAP_BLOCK);
    return r;
  }
  r.kind = inner ? EIN_KERNEL_REDUCE_INNER : EIN_KERNEL_REDUCE_OUTER;
  r.lanes = !inner                             ? RED_OUT_LANES
            : r.nred >= 4096 && r.nout < 16384 ? 256
                                               : 32;
  r.per_block = inner ? 256 / r.lanes : 32;
  r.blocks = cg_blocks_for(r.nout, r.per_block);
  int64_t most = r.nred / ((int64_t)r.lanes * SPLIT_MIN_TERMS);
  int64_t want = (SPLIT_TARGET + r.blocks - 1) / r.blocks;
  if (r.blocks >= SPLIT_TARGET / 2 || most < 2 || want < 2)
    return r;
  int64_t splits = want < most ? want : most;
  r.chunk = (r.nred + splits - 1) / splits;
  r.chunk = (r.chunk + r.lanes - 1) / r.lanes * r.lanes;
  r.splits = (r.nred + r.chunk - 1) / r.chunk;
  r.kind = EIN_KERNEL_REDUCE_SPLIT;
  return r;
}

/* ------------------------------------------ the reduction family */

/* Opens the Step struct of a reduction (kernels/reduce.cuh): its types,
 * output and term counts, and the reduction, identity() and comb(a, b).
 * Integer sums and products wrap (computed unsigned); max and min let NaN
 * win, as numpy. */
static void emit_red_head(gen *g, const char *step, const red_shape *r,
                          int64_t nout, operand_types t) {
  ein_strbuf *sb = g->sb;
  ein_strbuf_printf(sb,
                    "struct %s {\n"
                    "  typedef %s idx;\n  typedef %s acc_t;\n"
                    "  typedef %s dst_t;\n  typedef %s out_t;\n"
                    "  typedef %s src0_t;\n  typedef %s src1_t;\n"
                    "  static constexpr idx nout = ",
                    step, g->idx, cg_acc_type(g->acc),
                    cg_storage_type(g->s->dst_dtype), t.d, t.s0, t.s1);
  cg_emit_int(g, nout);
  ein_strbuf_printf(sb, ", nred = ");
  cg_emit_int(g, r->nred);
  ein_strbuf_printf(sb, ";\n");
  cg_emit_red_ops(g);
}

/* out_offsets(o, b0, b1, b2) over axes la (the kept axes, in outputs or
 * in a vector variant's groups of them), for operands `ops`. */
static void emit_red_out_offsets(gen *g, const ein_loop_axes *la,
                                 unsigned ops) {
  cg_emit_offsets_fn(g, "out_offsets", "o", "b", 7u, la, ops);
}

/* result(acc_): scaled and converted to dst's stored type. */
static void emit_red_result(gen *g) {
  ein_strbuf_printf(g->sb, "  static __device__ __forceinline__ dst_t "
                           "result(acc_t acc_) {\n");
  cg_emit_post(g, "acc_", false);
  ein_strbuf_printf(g->sb, "    return ");
  cg_emit_store_value(g->sb, g->s->dst_dtype, "acc_");
  ein_strbuf_printf(g->sb, ";\n  }\n");
}

/* term_offsets(r, o1, o2) over the reduced axes, and value(s0, s1, o1,
 * o2), the accumulator-typed term. */
static void emit_red_terms(gen *g) {
  ein_strbuf *sb = g->sb;
  cg_emit_offsets_fn(g, "term_offsets", "r", "o", 6u, &g->red, 6u);
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ acc_t "
                        "value(const src0_t *s0, const src1_t *s1, idx o1, "
                        "idx o2) {\n    (void)s1; (void)o2;\n    return ");
  cg_emit_value(g, "o1", "o2");
  ein_strbuf_printf(sb, ";\n  }\n");
}

/* The kernel `name`(d, s0, s1) calling template `tmpl` with the Step
 * name_step; pass 2 and the vector variant take no s1. */
static void emit_red_kernel(gen *g, const char *name, const char *tmpl,
                            unsigned threads, operand_types t) {
  cg_emit_signature(g, name, threads, t);
  bool s1 = strcmp(tmpl, "ein_reduce_finish") != 0 &&
            strcmp(tmpl, "ein_reduce_thread_vec") != 0;
  ein_strbuf_printf(g->sb, "  %s<%s_step>(d, s0%s);\n}\n", tmpl, name,
                    s1 ? ", s1" : "");
}

/* Reductions where lanes of a block cooperate on each output element
 * (reduce.cuh's ein_reduce). In the inner form lanes run along x (a warp,
 * or 256 threads, per element); in the outer form outputs run along x and
 * RED_OUT_LANES lanes along y. A split's pass 1 stores its partial,
 * unscaled, at [blockIdx.y][o] of d. */
/* The outer form's layout (outer_layout.h), applied: the chosen kept axis
 * becomes the innermost (consecutive outputs along it), the block holds
 * per_block outputs along x and RED_OUT_LANES rows of terms along y, and
 * k records it. Split and inner forms keep theirs. */
static ein_outer_layout outer_layout(gen *g, ein_kernel_src *k,
                                     red_shape *r) {
  const ein_step *s = g->s;
  ein_outer_layout o = {.lane_axis = g->kept.n - 1,
                        .per_block = r->per_block};
  if (r->kind != EIN_KERNEL_REDUCE_OUTER)
    return o;
  int esize[3] = {ein_dtype_size(s->dst_dtype),
                  s->nsrc > 0 ? ein_dtype_size(s->src_dtype[0]) : 0,
                  s->nsrc > 1 ? ein_dtype_size(s->src_dtype[1]) : 0};
  o = ein_outer_layout_choose(&g->kept, &g->red, s->nsrc, esize);
  r->per_block = o.per_block; /* lanes stay RED_OUT_LANES: 16 outputs
                                 make a block of 128 threads */
  r->blocks = cg_blocks_for(r->nout, r->per_block);
  if (o.lane_axis < g->kept.n - 1) {
    ein_loop_axes *kp = &g->kept;
    int64_t size, st[3];
    ein_loop_axes_take(kp, o.lane_axis, &size, st);
    kp->size[kp->n] = size;
    for (int j = 0; j < 3; j++)
      kp->st[kp->n][j] = st[j];
    kp->n++;
    k->lanes_moved = true;
  }
  k->staged_src = (unsigned)o.stage;
  k->staged_bytes =
      o.stage ? (unsigned)(o.stage_n * ein_dtype_size(s->src_dtype[o.stage - 1]))
              : 0;
  return o;
}

/* The Step's stage constants: the staged source (0 none) and its padded
 * shared copy, a word after every 128 bytes for each row of terms a warp
 * holds (reduce.cuh's ein_staged_at): rows read adjacent terms, which
 * one word of skew would put on the next row's bank. */
static void emit_stage(gen *g, const ein_outer_layout *o) {
  int esz = o->stage ? ein_dtype_size(g->s->src_dtype[o->stage - 1]) : 4;
  int rows = 32 / o->per_block; /* a warp's rows of terms */
  int p = 128 / esz, q = 4 * rows / esz > 1 ? 4 * rows / esz : 1;
  int64_t len = o->stage ? o->stage_n + o->stage_n / p * q + q : 1;
  ein_strbuf_printf(g->sb, "  static constexpr int stage = %d, stage_p = %d, "
                           "stage_q = %d;\n  static constexpr idx stage_n = ",
                    o->stage, p, q);
  cg_emit_int(g, o->stage_n);
  ein_strbuf_printf(g->sb, ", stage_len = ");
  cg_emit_int(g, len);
  ein_strbuf_printf(g->sb, ";\n");
}

void cg_gen_reduce(gen *g, ein_kernel_src *k, red_shape *r) {
  const ein_step *s = g->s;
  bool split = r->kind == EIN_KERNEL_REDUCE_SPLIT;
  ein_outer_layout o = outer_layout(g, k, r);
  operand_types t = cg_step_types(
      s, split ? cg_acc_type(g->acc) : cg_storage_type(s->dst_dtype));
  emit_red_head(g, "ein_main_step", r, r->nout, t);
  ein_strbuf_printf(g->sb,
                    "  static constexpr int lanes = %d, per_block = %d;\n"
                    "  static constexpr bool inner = %s, split = %s;\n"
                    "  static constexpr idx chunk = ",
                    r->lanes, r->per_block, r->inner ? "true" : "false",
                    split ? "true" : "false");
  cg_emit_int(g, r->chunk);
  ein_strbuf_printf(g->sb, ";\n");
  emit_stage(g, &o);
  emit_red_out_offsets(g, &g->kept, 7u);
  emit_red_terms(g);
  emit_red_result(g);
  ein_strbuf_printf(g->sb, "};\n");
  emit_red_kernel(g, "ein_main", "ein_reduce",
                  r->inner ? 256u : (unsigned)(r->per_block * r->lanes), t);
  /* a staging block loops over several groups of outputs, so that its
   * copy of the source serves more than one (two waves of blocks) */
  k->grid[0] = (unsigned)(k->staged_src && !split &&
                                  r->blocks > SPLIT_TARGET / 2
                              ? SPLIT_TARGET / 2
                              : r->blocks);
  k->grid[1] = (unsigned)r->splits;
  k->grid[2] = 1;
  k->block[0] = r->inner ? (unsigned)r->lanes : (unsigned)r->per_block;
  k->block[1] = r->inner ? (unsigned)r->per_block : (unsigned)r->lanes;
  k->block[2] = 1;
}

/* reduce_thread's vector variant: `per` adjacent outputs a thread, read
 * as `rows` runs of `width` elements (`bytes` each) along the source's
 * contiguous axis. */
typedef struct thread_vec {
  int per, width, bytes;
  ein_loop_axes out;  /* the kept axes in groups of `per` outputs */
  ein_loop_axes rows; /* the reduced axes but the column axis */
} thread_vec;

/* Whether groups of tv->per outputs read aligned runs of tv->width
 * elements and store aligned groups: the inner kept size divides into
 * groups, and every other source stride (kept and row axes) is a
 * multiple of the run, every other dst stride of the group. */
static bool thread_vec_aligned(const gen *g, thread_vec *tv) {
  const ein_loop_axes *k = &g->kept;
  int in = k->n - 1;
  if (k->size[in] % tv->per)
    return false;
  for (int i = 0; i < in; i++)
    if (k->st[i][1] % tv->width || k->st[i][0] % tv->per)
      return false;
  for (int i = 0; i < tv->rows.n; i++)
    if (tv->rows.st[i][1] % tv->width)
      return false;
  tv->out = *k;
  tv->out.size[in] /= tv->per;
  tv->out.st[in][0] *= tv->per;
  tv->out.st[in][1] *= tv->per;
  return true;
}

/* The widest vector form of a one-source reduce_thread step, chosen from
 * its strides: dst's inner axis is contiguous, the source advances `step`
 * elements per output along it, and (for step > 1) the innermost reduced
 * axis covers exactly those `step` elements with stride 1 (a pooling
 * window's column). Then `per` adjacent outputs read each row of their
 * window as one run of per * step elements: 16 bytes where strides allow,
 * else 8, else 4. False: the scalar kernel only. */
static bool thread_vec_choose(const gen *g, thread_vec *tv) {
  const ein_step *s = g->s;
  const ein_loop_axes *k = &g->kept, *r = &g->red;
  if (s->kind != EIN_STEP_LOOP || s->nsrc != 1 || k->n == 0)
    return false;
  int in = k->n - 1;
  int64_t step = k->st[in][1];
  if (k->st[in][0] != 1 || step < 1)
    return false;
  tv->rows = *r;
  if (step > 1) {
    int c = r->n - 1;
    if (c < 0 || r->st[c][1] != 1 || r->size[c] != step)
      return false;
    tv->rows.n--;
  }
  int64_t esz = (int64_t)ein_dtype_size(s->src_dtype[0]),
          dsz = (int64_t)ein_dtype_size(s->dst_dtype);
  for (int64_t bytes = 16; bytes >= 4; bytes /= 2) {
    if (bytes % (step * esz) || (bytes / (step * esz)) * dsz > 16)
      continue;
    tv->per = (int)(bytes / (step * esz));
    tv->width = (int)(tv->per * step);
    tv->bytes = (int)bytes;
    if (thread_vec_aligned(g, tv))
      return true;
  }
  return false;
}

/* The vector variant's Step (reduce.cuh's ein_reduce_thread_vec): the
 * head, the group offsets, the rows' offsets, load(x) and result(acc),
 * and the kernel ein_vec. */
static void gen_reduce_thread_vec(gen *g, ein_kernel_src *k,
                                  const red_shape *r, const thread_vec *tv) {
  ein_strbuf *sb = g->sb;
  const ein_step *s = g->s;
  const char *dt = cg_storage_type(s->dst_dtype);
  int64_t groups = ein_loop_axes_volume(&tv->out);
  operand_types t = {dt, cg_src_type(s, 0), "void"};
  emit_red_head(g, "ein_vec_step", r, groups, t);
  ein_strbuf_printf(sb,
                    "  static constexpr int block = %d, per_thread = %d, "
                    "width = %d, rows = %lld;\n"
                    "  typedef %s load_t;\n  typedef %s store_t;\n",
                    (int)MAP_BLOCK, tv->per, tv->width,
                    (long long)ein_loop_axes_volume(&tv->rows),
                    cg_word_type(tv->bytes),
                    tv->per == 1 ? dt
                                 : cg_word_type(tv->per *
                                                (int64_t)ein_dtype_size(
                                                    s->dst_dtype)));
  emit_red_out_offsets(g, &tv->out, 3u);
  cg_emit_offsets_fn(g, "row_offsets", "r", "o", 2u, &tv->rows, 2u);
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ acc_t "
                        "load(src0_t x) {\n    return ");
  cg_emit_load(sb, s->src_dtype[0], g->acc, "x");
  ein_strbuf_printf(sb, ";\n  }\n");
  emit_red_result(g);
  ein_strbuf_printf(sb, "};\n");
  emit_red_kernel(g, "ein_vec", "ein_reduce_thread_vec", MAP_BLOCK, t);
  k->has_vec = true;
  k->vec_bytes = (unsigned)tv->bytes;
  k->vec_items = (unsigned)tv->per;
  k->grid_vec[0] = (unsigned)cg_blocks_for(groups, MAP_BLOCK);
  k->grid_vec[1] = k->grid_vec[2] = 1;
}

/* A thread per output with its few terms unrolled at offsets fixed at
 * generation time (reduce.cuh's ein_reduce_thread). */
void cg_gen_reduce_thread(gen *g, ein_kernel_src *k, const red_shape *r) {
  ein_strbuf *sb = g->sb;
  const ein_step *s = g->s;
  operand_types t = cg_step_types(s, cg_storage_type(s->dst_dtype));
  emit_red_head(g, "ein_main_step", r, r->nout, t);
  ein_strbuf_printf(sb, "  static constexpr int block = %d;\n",
                    (int)MAP_BLOCK);
  emit_red_out_offsets(g, &g->kept, 7u);
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ void terms("
                        "acc_t &acc_, const src0_t *s0, const src1_t *s1, "
                        "idx o1, idx o2) {\n    (void)s1; (void)o2;\n");
  for (int64_t t = 0; t < r->nred; t++) {
    int64_t off[3];
    ein_loop_axes_offsets(&g->red, t, off);
    char o1[64], o2[64];
    snprintf(o1, sizeof o1, "o1 + %lld", (long long)off[1]);
    snprintf(o2, sizeof o2, "o2 + %lld", (long long)off[2]);
    ein_strbuf_printf(sb, "    acc_ = comb(acc_, ");
    cg_emit_value(g, o1, o2);
    ein_strbuf_printf(sb, ");\n");
  }
  ein_strbuf_printf(sb, "  }\n");
  emit_red_result(g);
  ein_strbuf_printf(sb, "};\n");
  emit_red_kernel(g, "ein_main", "ein_reduce_thread", MAP_BLOCK, t);
  k->grid[0] = (unsigned)r->blocks;
  k->grid[1] = k->grid[2] = 1;
  k->block[0] = MAP_BLOCK;
  k->block[1] = k->block[2] = 1;
  thread_vec tv;
  if (thread_vec_choose(g, &tv))
    gen_reduce_thread_vec(g, k, r, &tv);
}

/* A split's pass 2 (reduce.cuh's ein_reduce_finish): the partials at
 * [c][o] of s0 combined in chunk order, scaled and stored. */
void cg_gen_finish(gen *g, ein_kernel_src *k, const red_shape *r) {
  operand_types t = {cg_storage_type(g->s->dst_dtype), cg_acc_type(g->acc),
                     "void"};
  emit_red_head(g, "ein_main_step", r, r->nout, t);
  ein_strbuf_printf(g->sb,
                    "  static constexpr int splits = %lld, block = %d;\n",
                    (long long)r->splits, (int)FINISH_BLOCK);
  emit_red_out_offsets(g, &g->kept, 1u);
  emit_red_result(g);
  ein_strbuf_printf(g->sb, "};\n");
  emit_red_kernel(g, "ein_main", "ein_reduce_finish", FINISH_BLOCK, t);
  k->grid[0] = (unsigned)cg_blocks_for(r->nout, FINISH_BLOCK);
  k->grid[1] = k->grid[2] = 1;
  k->block[0] = FINISH_BLOCK;
  k->block[1] = k->block[2] = 1;
}
