/*
 * codegen.c - writes the CUDA C of a LOOP or FILL step (codegen.h).
 *
 * The step's axes are brought into the normal form of loop_axes.h (kept
 * axes sorted by dst stride, reduced axes by source stride, both fused).
 * A flat index over the kept axes then names an output element, a flat
 * index over the reduced axes a term of its reduction; each index is
 * turned into element offsets by divisions by constant sizes, which the
 * compiler strength-reduces. 32-bit indices are used whenever every offset
 * and count fits, 64-bit otherwise.
 *
 * The kernels themselves are templates in kernels/FAMILY.cuh (map,
 * transpose, reduce), embedded after the prelude: this file writes only a
 * struct Step of one step's constants (sizes, strides, dtypes, the index
 * decompositions, the value of a term, the reduction, the conversion of
 * the result) and the extern "C" kernel that instantiates a template.
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


const char *ein_kernel_kind_name(ein_kernel_kind kind) {
  switch (kind) {
  case EIN_KERNEL_NONE: return "none";
  case EIN_KERNEL_FILL: return "fill";
  case EIN_KERNEL_MAP: return "map";
  case EIN_KERNEL_TRANSPOSE: return "transpose";
  case EIN_KERNEL_REDUCE_INNER: return "reduce_inner";
  case EIN_KERNEL_REDUCE_OUTER: return "reduce_outer";
  case EIN_KERNEL_REDUCE_THREAD: return "reduce_thread";
  case EIN_KERNEL_REDUCE_SPLIT: return "reduce_split";
  case EIN_KERNEL_REDUCE_FINISH: return "reduce_finish";
  }
  return "none";
}

void ein_kernel_src_free(ein_kernel_src *k) {
  if (!k)
    return;
  ein_free(k->source);
  k->source = NULL;
  k->len = 0;
}

void ein_step_kernels_free(ein_step_kernels *k) {
  if (!k)
    return;
  ein_kernel_src_free(&k->main);
  ein_kernel_src_free(&k->finish);
}

/* A flat loop over axes la: fill, map, a 16-byte copy (MAP_RAW, types
 * uint4) or the 2-byte vector map, as kernel `name` with Step name_step. */
static void gen_map(gen *g, const char *name, const ein_loop_axes *la,
                    const char *dtype, map_form form) {
  const ein_step *s = g->s;
  bool raw = form == MAP_RAW;
  operand_types t =
      raw ? (operand_types){dtype, "uint4", "void"} : cg_step_types(s, dtype);
  char step[64];
  snprintf(step, sizeof step, "%s_step", name);
  cg_emit_step_types(g, step, ein_loop_axes_volume(la), t);
  cg_emit_offsets_fn(g, "offsets", "i", "o", 7u, la,
                  s->kind == EIN_STEP_FILL ? 1u : 7u);
  cg_emit_step_value(g, form, la);
  ein_strbuf_printf(g->sb, "};\n");
  cg_emit_signature(g, name, MAP_BLOCK, t);
  ein_strbuf_printf(g->sb, "  %s<%s>(d, s0, s1);\n}\n",
                    form == MAP_HALF_VEC ? "ein_map_half_vec" : "ein_map",
                    step);
}

/* Whether a plain copy can move 16 bytes per access: the innermost kept
 * axis is contiguous on both sides and every other stride, the inner size
 * and hence every offset stay multiples of the vector width. Fills in
 * the axes in vector units. */
static bool vector_axes(const gen *g, ein_loop_axes *out) {
  const ein_step *s = g->s;
  if (!s->plain_copy || g->red.n != 0 || g->kept.n == 0)
    return false;
  int64_t esz = (int64_t)ein_dtype_size(s->dst_dtype);
  if (esz > 8)
    return false;
  int64_t w = 16 / esz;
  const ein_loop_axes *k = &g->kept;
  int in = k->n - 1;
  if (k->st[in][0] != 1 || k->st[in][1] != 1 || k->size[in] % w)
    return false;
  *out = *k;
  for (int i = 0; i < k->n; i++) {
    if (i == in)
      continue;
    if (k->st[i][0] % w || k->st[i][1] % w)
      return false;
    out->st[i][0] /= w;
    out->st[i][1] /= w;
  }
  out->size[in] /= w;
  return true;
}

/* Whether a 2-byte map (not a plain copy: outer products, scaled or
 * converted repeats) can take HALF_VEC elements a thread: the innermost
 * kept axis is contiguous in dst and contiguous or broadcast in each
 * source, and every offset of a contiguous operand stays a multiple of
 * HALF_VEC. Fills in the axes in vector units (inner strides scaled). */
static bool half_vector_axes(const gen *g, ein_loop_axes *out) {
  const ein_step *s = g->s;
  const ein_loop_axes *k = &g->kept;
  if (s->kind != EIN_STEP_LOOP || s->plain_copy || g->red.n != 0 || k->n == 0)
    return false;
  if (ein_dtype_size(s->dst_dtype) != 2)
    return false;
  for (int j = 0; j < s->nsrc; j++)
    if (ein_dtype_size(s->src_dtype[j]) != 2)
      return false;
  int in = k->n - 1;
  if (k->st[in][0] != 1 || k->size[in] % HALF_VEC)
    return false;
  for (int j = 1; j <= s->nsrc; j++)
    if (k->st[in][j] != 0 && k->st[in][j] != 1)
      return false;
  for (int i = 0; i < in; i++)
    for (int j = 0; j <= s->nsrc; j++)
      if (k->st[in][j] == 1 && k->st[i][j] % HALF_VEC)
        return false;
  *out = *k;
  out->size[in] /= HALF_VEC;
  for (int j = 0; j < 3; j++)
    out->st[in][j] *= HALF_VEC;
  return true;
}

/* A plain copy whose source's contiguous axis lies inside dst's
 * contiguous run but is not dst's innermost axis (patchify's
 * `(p1 p2 c)` from rows of p2): both sides are strided for a thread, so
 * the copy goes through shared memory in tiles. The tile axes are dst's
 * innermost axes up to the source's contiguous one (a contiguous run of
 * `elems` elements in dst); each tile is read in `width`-element vectors
 * along the source's contiguous axis and written as vectors of dst's
 * run. */
typedef struct staged {
  int width, bytes, tiles; /* vector elements and bytes; tiles a block */
  int64_t elems, cstride;  /* a tile's elements; dst stride of the
                              source's contiguous axis */
  ein_loop_axes tile;      /* the tile axes in source order, in vectors */
  ein_loop_axes rest;      /* the other kept axes */
} staged;

/* Whether every stride of axes la but axis `skip` (-1: none) of operand
 * `op` is a multiple of w. */
static bool strides_multiple(const ein_loop_axes *la, int skip, int op,
                             int64_t w) {
  for (int i = 0; i < la->n; i++)
    if (i != skip && la->st[i][op] % w)
      return false;
  return true;
}

/* The tile and rest axes of a staged copy: the source's contiguous axis
 * c, and dst contiguous over axes c..inner. */
static bool staged_split(const gen *g, staged *st, int *c) {
  const ein_loop_axes *k = &g->kept;
  int in = k->n - 1;
  *c = -1;
  for (int i = 0; i < in; i++)
    if (k->st[i][1] == 1)
      *c = i;
  if (*c < 0 || k->st[in][0] != 1)
    return false;
  int64_t run = 1;
  for (int i = in; i >= *c; i--) {
    if (k->st[i][0] != run)
      return false;
    run *= k->size[i];
  }
  st->elems = run;
  st->cstride = k->st[*c][0];
  st->rest = *k;
  st->rest.n = *c;
  st->tile.n = 0;
  for (int i = *c; i <= in; i++) {
    st->tile.size[st->tile.n] = k->size[i];
    memcpy(st->tile.st[st->tile.n++], k->st[i], sizeof k->st[i]);
  }
  ein_loop_axes_sort(&st->tile, 1);
  return true;
}

/* The widest vector (16, 8 or 4 bytes, at least 2 elements) that keeps
 * every access aligned: the source's contiguous axis and the run divide
 * into vectors, every other stride on both sides is a multiple. */
static bool staged_axes(const gen *g, staged *st) {
  const ein_step *s = g->s;
  const ein_loop_axes *k = &g->kept;
  if (s->kind != EIN_STEP_LOOP || !s->plain_copy || g->red.n || k->n < 2)
    return false;
  int c;
  if (!staged_split(g, st, &c))
    return false;
  int64_t esz = (int64_t)ein_dtype_size(s->dst_dtype);
  if (st->elems * esz > STAGE_MAX_BYTES)
    return false;
  for (int64_t bytes = 16; bytes >= 4 && bytes / esz >= 2; bytes /= 2) {
    int64_t w = bytes / esz;
    if (k->size[c] % w || st->elems % w || !strides_multiple(k, c, 1, w) ||
        !strides_multiple(&st->rest, -1, 0, w))
      continue;
    /* the source's contiguous axis: last unless a repeated (stride 0)
     * axis sorted after it */
    int t = st->tile.n - 1;
    while (st->tile.st[t][1] != 1)
      t--;
    st->tile.size[t] /= w;
    st->tile.st[t][0] *= w;
    st->tile.st[t][1] *= w;
    st->width = (int)w;
    st->bytes = (int)bytes;
    st->tiles = st->elems >= STAGE_ELEMS ? 1 : (int)(STAGE_ELEMS / st->elems);
    return true;
  }
  return false;
}

/* The staged copy's Step (transpose.cuh's ein_transpose_staged) and the
 * kernel ein_vec. */
static void gen_staged(gen *g, ein_kernel_src *k, const staged *st) {
  ein_strbuf *sb = g->sb;
  const char *dt = cg_storage_type(g->s->dst_dtype);
  int64_t nrest = ein_loop_axes_volume(&st->rest);
  ein_strbuf_printf(sb,
                    "struct ein_vec_step {\n  typedef %s idx;\n"
                    "  typedef %s dst_t;\n  typedef %s vec_t;\n"
                    "  static constexpr int block = %d, width = %d, "
                    "tiles = %d;\n  static constexpr idx elems = ",
                    g->idx, dt, cg_word_type(st->bytes), (int)MAP_BLOCK,
                    st->width, st->tiles);
  cg_emit_int(g, st->elems);
  ein_strbuf_printf(sb, ", cstride = ");
  cg_emit_int(g, st->cstride);
  ein_strbuf_printf(sb, ", nrest = ");
  cg_emit_int(g, nrest);
  ein_strbuf_printf(sb, ";\n");
  cg_emit_offsets_fn(g, "rest_offsets", "r", "o", 7u, &st->rest, 3u);
  cg_emit_offsets_fn(g, "tile_offsets", "u", "o", 7u, &st->tile, 3u);
  ein_strbuf_printf(sb, "};\n");
  cg_emit_signature(g, "ein_vec", MAP_BLOCK, (operand_types){dt, dt, "void"});
  ein_strbuf_printf(sb, "  ein_transpose_staged<ein_vec_step>(d, s0);\n}\n");
  k->has_vec = true;
  k->vec_staged = true;
  k->vec_bytes = (unsigned)st->bytes;
  k->vec_items = (unsigned)st->width;
  k->grid_vec[0] = (unsigned)cg_blocks_for(nrest, st->tiles);
  k->grid_vec[1] = k->grid_vec[2] = 1;
}

/* Whether a 2-byte plain copy's transpose can move pairs: both tile
 * edges even and every other stride even, so that each pair lies in one
 * aligned 4-byte word on both sides. */
static bool half_transpose_ok(const gen *g, const ein_loop_axes *rest,
                              int64_t sa, int64_t sb_, const int64_t sta[3],
                              const int64_t stb[3]) {
  const ein_step *s = g->s;
  if (!s->plain_copy || ein_dtype_size(s->dst_dtype) != 2)
    return false;
  if (sa % 2 || sb_ % 2 || sta[1] % 2 || stb[0] % 2)
    return false;
  for (int i = 0; i < rest->n; i++)
    if (rest->st[i][0] % 2 || rest->st[i][1] % 2)
      return false;
  return true;
}

/* Whether a 2-byte transpose without pairs takes the runs kernel
 * (transpose.cuh's ein_transpose_runs): element-wise (no terms folded),
 * the tile's rows contiguous on both sides (sb1 and sa0 1), and rows that
 * start anywhere in a sector: a pitch or a rest stride not a multiple of
 * a sector's 16 elements on either side. A 32x32 tile then touches 3
 * sectors for every 64 bytes it moves, on both sides; runs of 64 in
 * windows aligned to 64 bytes touch 5 for 128 (docs/design.md, "Odd
 * 2-byte transposes"). Only where the 64x64 tiles fill RUNS_MIN_TILES. */
static bool runs_transpose(const gen *g, const ein_loop_axes *rest,
                           int64_t na, int64_t nb, const int64_t sta[3],
                           const int64_t stb[3]) {
  const ein_step *s = g->s;
  if (g->red.n || ein_dtype_size(s->dst_dtype) != 2 ||
      ein_dtype_size(s->src_dtype[0]) != 2 || sta[0] != 1 || stb[1] != 1)
    return false;
  int64_t tiles = ((na + TILE2 - 1) / TILE2) * ((nb + TILE2 - 1) / TILE2);
  if (tiles * ein_loop_axes_volume(rest) < RUNS_MIN_TILES)
    return false;
  bool odd = sta[1] % 16 || stb[0] % 16;
  for (int i = 0; i < rest->n; i++)
    odd = odd || rest->st[i][0] % 16 || rest->st[i][1] % 16;
  return odd;
}

/* A short reduction folded into a transpose's value(s0, at) (see
 * transpose_axes): identity(), then comb with each term at its offset
 * from at, fixed at generation time as in reduce_thread. Opens with the
 * identity; the caller ends the statement. */
static void emit_transpose_terms(gen *g) {
  ein_strbuf *sb = g->sb;
  int64_t n = ein_loop_axes_volume(&g->red);
  ein_strbuf_printf(sb, "identity()");
  if (n >= SHORT_RED) { /* a loop over term_offsets */
    ein_strbuf_printf(sb, ";\n    for (idx r = 0; r < %lld; r++) {\n"
                          "      idx o1 = at;\n      term_offsets(r, o1);\n"
                          "      v_ = comb(v_, ", (long long)n);
    cg_emit_value_of(g, "s0[o1]", "");
    ein_strbuf_printf(sb, ");\n    }\n    (void)0");
    return;
  }
  for (int64_t t = 0; t < n; t++) {
    int64_t off[3];
    ein_loop_axes_offsets(&g->red, t, off);
    char x0[96];
    snprintf(x0, sizeof x0, "s0[at + %lld]", (long long)off[1]);
    ein_strbuf_printf(sb, ";\n    v_ = comb(v_, ");
    cg_emit_value_of(g, x0, "");
    ein_strbuf_printf(sb, ")");
  }
}

/* The Step struct of a transpose kernel (kernels/transpose.cuh): the
 * tile plane a x b with ta tiles of edge `tile` along a, the rest axes
 * and, for the element-wise form, value(s0, at). */
static void emit_transpose_step(gen *g, const char *step, int tile,
                                const ein_loop_axes *rest, int64_t sa,
                                int64_t sb_, const int64_t sta[3],
                                const int64_t stb[3]) {
  ein_strbuf *sb = g->sb;
  const ein_step *s = g->s;
  ein_strbuf_printf(sb,
                    "struct %s {\n  typedef %s idx;\n  typedef %s dst_t;\n"
                    "  typedef %s src0_t;\n"
                    "  static constexpr int tile = %d, tile_rows = %d;\n"
                    "  static constexpr bool raw = %s;\n"
                    "  static constexpr idx na = ",
                    step, g->idx, cg_storage_type(s->dst_dtype),
                    cg_src_type(s, 0), tile, (int)TILE_ROWS,
                    s->plain_copy ? "true" : "false");
  int64_t v[7] = {sb_, ein_loop_axes_volume(rest), (sa + tile - 1) / tile,
                  sta[0], stb[0], sta[1], stb[1]};
  static const char *const names[7] = {"nb", "nrest", "ta", "sa0",
                                       "sb0", "sa1", "sb1"};
  cg_emit_int(g, sa);
  for (int i = 0; i < 7; i++) {
    ein_strbuf_printf(sb, ",%s%s = ", i == 3 ? "\n      " : " ", names[i]);
    cg_emit_int(g, v[i]);
  }
  ein_strbuf_printf(sb, ";\n");
  cg_emit_offsets_fn(g, "rest_offsets", "r", "o", 7u, rest, 3u);
  if (g->red.n) {
    ein_strbuf_printf(sb, "  typedef %s acc_t;\n", cg_acc_type(g->acc));
    cg_emit_red_ops(g);
    if (ein_loop_axes_volume(&g->red) >= SHORT_RED)
      cg_emit_offsets_fn(g, "term_offsets", "r", "o", 2u, &g->red, 2u);
  }
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ dst_t "
                        "value(const src0_t *s0, idx at) {\n    %s v_ = ",
                    cg_acc_type(g->acc));
  if (g->red.n)
    emit_transpose_terms(g);
  else
    cg_emit_value(g, "at", "0");
  ein_strbuf_printf(sb, ";\n");
  cg_emit_post(g, "v_", !g->red.n); /* a reduction's comb normalises */
  ein_strbuf_printf(sb, "    return ");
  cg_emit_store_value(sb, s->dst_dtype, "v_");
  ein_strbuf_printf(sb, ";\n  }\n};\n");
}

/* Permuting copy through a shared-memory tile (transpose.cuh). Axis a is
 * dst's contiguous axis, b the source's; `rest` holds the others. A
 * 2-byte plain copy also gets the variant that moves pairs. */
static void gen_transpose(gen *g, ein_kernel_src *k, int a, int b) {
  const ein_step *s = g->s;
  ein_loop_axes rest = g->kept;
  int64_t sa, sb_, sta[3], stb[3];
  /* take the later index first so the earlier one stays valid */
  if (a > b) {
    ein_loop_axes_take(&rest, a, &sa, sta);
    ein_loop_axes_take(&rest, b, &sb_, stb);
  } else {
    ein_loop_axes_take(&rest, b, &sb_, stb);
    ein_loop_axes_take(&rest, a, &sa, sta);
  }
  int64_t nrest = ein_loop_axes_volume(&rest);
  const char *dt = cg_storage_type(s->dst_dtype);
  bool pairs = half_transpose_ok(g, &rest, sa, sb_, sta, stb);
  bool runs = !pairs && runs_transpose(g, &rest, sa, sb_, sta, stb);
  int edge = runs ? TILE2 : TILE;
  emit_transpose_step(g, "ein_main_step", edge, &rest, sa, sb_, sta, stb);
  cg_emit_signature(g, "ein_main", TILE * TILE_ROWS,
                 (operand_types){dt, cg_src_type(s, 0), "void"});
  ein_strbuf_printf(g->sb, "  %s<ein_main_step>(d, s0);\n}\n",
                    runs ? "ein_transpose_runs" : "ein_transpose");
  k->grid[0] = (unsigned)(((sa + edge - 1) / edge) * ((sb_ + edge - 1) / edge));
  k->grid[1] = (unsigned)(nrest < 65535 ? nrest : 65535);
  k->grid[2] = 1;
  k->block[0] = TILE;
  k->block[1] = TILE_ROWS;
  k->block[2] = 1;
  if (!pairs)
    return;
  emit_transpose_step(g, "ein_vec_step", TILE2, &rest, sa, sb_, sta, stb);
  cg_emit_signature(g, "ein_vec", TILE * TILE_ROWS,
                 (operand_types){"unsigned short", "unsigned short", "void"});
  ein_strbuf_printf(g->sb, "  ein_transpose_half<ein_vec_step>(d, s0);\n}\n");
  k->has_vec = true;
  k->vec_bytes = 4;
  k->vec_items = 2;
  k->grid_vec[0] =
      (unsigned)(((sa + TILE2 - 1) / TILE2) * ((sb_ + TILE2 - 1) / TILE2));
  k->grid_vec[1] = k->grid[1];
  k->grid_vec[2] = 1;
}

/* Largest |offset| any operand reaches, and the largest count: decides
 * 32- or 64-bit indexing. */
static bool needs_wide(const gen *g) {
  const int64_t lim = (int64_t)1 << 30;
  int64_t span[3] = {0, 0, 0};
  const ein_loop_axes *sets[2] = {&g->kept, &g->red};
  for (int j = 0; j < 2; j++)
    for (int i = 0; i < sets[j]->n; i++)
      for (int k = 0; k < 3; k++) {
        span[k] += llabs(sets[j]->st[i][k]) * (sets[j]->size[i] - 1);
        if (span[k] >= lim)
          return true;
      }
  return ein_loop_axes_volume(&g->kept) >= lim ||
         ein_loop_axes_volume(&g->red) >= lim;
}

/* The tile axes of a permuting copy, or false when a map serves. A
 * one-source reduction of fewer than SHORT_RED terms whose kept axes are
 * permuted takes the tile too, each element folding its terms as the
 * tile is read: a thread per output (reduce_thread, reduce_outer) walks
 * dst's order, so its lanes read a source stride apart (b j i -> i j
 * over b: 26-29 sectors a request where 4 would do). Up to TILE_RED_MAX
 * terms, and past SHORT_RED only when the tiles fill a wave of the H100
 * (one block of 8 warps per SM). */
static bool transpose_axes(const gen *g, int *a, int *b) {
  const ein_step *s = g->s;
  const ein_loop_axes *k = &g->kept;
  int64_t nred = ein_loop_axes_volume(&g->red);
  if (s->kind != EIN_STEP_LOOP || s->nsrc != 1 || k->n < 2 ||
      s->map != EIN_MAP_PRODUCT ||
      (g->red.n && nred > TILE_RED_MAX))
    return false;
  int in = k->n - 1;
  if (llabs(k->st[in][0]) != 1)
    return false;
  int best = -1;
  for (int i = 0; i < k->n; i++)
    if (llabs(k->st[i][1]) == 1)
      best = i;
  if (best < 0 || best == in)
    return false;
  if (k->size[in] < 4 || k->size[best] < 4)
    return false;
  /* a longer reduction keeps the tile only when the tiles fill a wave;
   * fewer outputs are the split reduction's */
  int64_t tiles = ein_loop_axes_volume(k) / (TILE * TILE);
  if (g->red.n && nred >= SHORT_RED && tiles < SPLIT_TARGET / 8)
    return false;
  *a = in;
  *b = best;
  return true;
}

/* The comment line (what the kernel does, for `einc cuda-src`) and the
 * helpers every kernel of the step uses. */
static void emit_header(gen *g, ein_kernel_kind kind, const red_shape *r) {
  const ein_step *s = g->s;
  ein_strbuf *sb = g->sb;
  ein_strbuf_printf(sb, "/* einc %s: %s", ein_kernel_kind_name(kind),
                    ein_dtype_name(s->dst_dtype));
  if (kind == EIN_KERNEL_REDUCE_FINISH) {
    ein_strbuf_printf(sb,
                      " <- %s partials; %lld outputs, %s over %lld "
                      "chunks */\n",
                      cg_acc_type(g->acc), (long long)r->nout,
                      ein_reduction_name(s->op), (long long)r->splits);
    return;
  }
  for (int i = 0; i < s->nsrc; i++)
    ein_strbuf_printf(sb, "%s%s", i ? ", " : " <- ",
                      ein_dtype_name(s->src_dtype[i]));
  ein_strbuf_printf(sb, "; %lld outputs",
                    (long long)ein_loop_axes_volume(&g->kept));
  if (g->red.n)
    ein_strbuf_printf(sb, ", %s over %lld", ein_reduction_name(s->op),
                      (long long)ein_loop_axes_volume(&g->red));
  if (kind == EIN_KERNEL_REDUCE_SPLIT)
    ein_strbuf_printf(sb,
                      " (%s layout) in %lld chunks of %lld, partials "
                      "to scratch",
                      r->inner ? "inner" : "outer", (long long)r->splits,
                      (long long)r->chunk);
  ein_strbuf_printf(sb, " */\n");
  if (s->nsrc == 2) {
    const char *t = cg_acc_type(g->acc);
    ein_strbuf_printf(
        sb,
        "static __device__ __forceinline__ %s ein_mul(%s a, %s b) "
        "{ return %s; }\n",
        t, t, t,
        g->acc == EIN_ACC_I64 ? "(long long)((ein_u64)a * (ein_u64)b)" : "a * b");
  }
}

/* Which kernel runs the step: fill, map or transpose without reduced
 * axes; otherwise the reduction rule, given whether the reduced axes hold
 * the source's smallest stride. */
static ein_kernel_kind choose_kind(const gen *g, int *ta, int *tb,
                                   red_shape *r) {
  if (g->s->kind == EIN_STEP_FILL)
    return EIN_KERNEL_FILL;
  if (transpose_axes(g, ta, tb))
    return EIN_KERNEL_TRANSPOSE;
  if (g->red.n == 0)
    return EIN_KERNEL_MAP;
  int64_t kept_min =
      g->kept.n ? llabs(g->kept.st[g->kept.n - 1][1]) : INT64_MAX;
  int64_t red_min = llabs(g->red.st[g->red.n - 1][1]);
  *r = cg_choose_reduction(g, red_min < kept_min || !g->kept.n);
  return r->kind;
}

/* A fill or map, with its vector variant where one applies. */
static void gen_map_kernels(gen *g, ein_kernel_src *out) {
  const ein_step *s = g->s;
  ein_loop_axes vec;
  gen_map(g, "ein_main", &g->kept, cg_storage_type(s->dst_dtype), MAP_VALUE);
  out->grid[0] =
      (unsigned)cg_blocks_for(ein_loop_axes_volume(&g->kept), MAP_BLOCK);
  out->grid[1] = out->grid[2] = 1;
  out->block[0] = MAP_BLOCK;
  out->block[1] = out->block[2] = 1;
  if (out->kind != EIN_KERNEL_MAP || s->map != EIN_MAP_PRODUCT)
    return; /* grad_map.cuh's operations have no vector form */
  if (vector_axes(g, &vec)) {
    gen_map(g, "ein_vec", &vec, "uint4", MAP_RAW);
    out->vec_items = 16 / (unsigned)ein_dtype_size(s->dst_dtype);
  } else if (half_vector_axes(g, &vec)) {
    gen_map(g, "ein_vec", &vec, "unsigned short", MAP_HALF_VEC);
    out->vec_items = HALF_VEC;
  } else {
    staged st;
    if (staged_axes(g, &st))
      gen_staged(g, out, &st);
    return;
  }
  out->has_vec = true;
  out->vec_bytes = 16;
  out->grid_vec[0] =
      (unsigned)cg_blocks_for(ein_loop_axes_volume(&vec), MAP_BLOCK);
  out->grid_vec[1] = out->grid_vec[2] = 1;
}

/* Hands a finished buffer to k (source, length, hash). */
static ein_status take_source(ein_strbuf *sb, ein_kernel_src *k) {
  if (sb->failed) {
    ein_strbuf_free(sb);
    return EIN_ERR_NO_MEMORY;
  }
  k->source = sb->data;
  k->len = sb->len;
  k->hash = ein_fnv1a(sb->data, sb->len, EIN_FNV_SEED);
  return EIN_OK;
}

/* A split reduction's pass 2 and the scratch the passes share. */
static ein_status gen_split_finish(gen *g, const red_shape *r,
                                   ein_step_kernels *out) {
  ein_strbuf sb = {0};
  g->sb = &sb;
  out->finish.kind = EIN_KERNEL_REDUCE_FINISH;
  emit_header(g, EIN_KERNEL_REDUCE_FINISH, r);
  cg_gen_finish(g, &out->finish, r);
  size_t asz = cg_acc_size(g->acc);
  out->scratch_bytes = r->splits * r->nout * (int64_t)asz;
  return take_source(&sb, &out->finish);
}

ein_status ein_codegen_step(const ein_step *s, ein_step_kernels *kernels) {
  memset(kernels, 0, sizeof *kernels);
  ein_kernel_src *out = &kernels->main;
  if (s->kind == EIN_STEP_GEMM)
    return EIN_ERR_INTERNAL;
  gen g = {.s = s};
  bool empty;
  if (!ein_loop_axes_split(s, &g.kept, &g.red, &empty))
    return EIN_ERR_LIMIT;
  if (empty)
    return EIN_OK; /* EIN_KERNEL_NONE */
  g.acc = ein_acc_of(s->acc_dtype);
  g.wide = needs_wide(&g);
  g.idx = g.wide ? "long long" : "int";
  ein_strbuf sb = {0};
  g.sb = &sb;
  int ta = -1, tb = -1;
  red_shape r = {0};
  out->kind = choose_kind(&g, &ta, &tb, &r);
  emit_header(&g, out->kind, &r);
  switch (out->kind) {
  case EIN_KERNEL_FILL:
  case EIN_KERNEL_MAP:
    gen_map_kernels(&g, out);
    break;
  case EIN_KERNEL_TRANSPOSE: gen_transpose(&g, out, ta, tb); break;
  case EIN_KERNEL_REDUCE_THREAD:
    cg_gen_reduce_thread(&g, out, &r);
    break;
  case EIN_KERNEL_REDUCE_INNER:
  case EIN_KERNEL_REDUCE_OUTER:
  case EIN_KERNEL_REDUCE_SPLIT:
    cg_gen_reduce(&g, out, &r);
    break;
  default:
    break;
  }
  ein_status st = take_source(&sb, out);
  if (!st && out->kind == EIN_KERNEL_REDUCE_SPLIT)
    st = gen_split_finish(&g, &r, kernels);
  if (st)
    ein_step_kernels_free(kernels);
  return st;
}

const ein_backend_caps *ein_cuda_caps(void) {
  /* A cuBLAS call costs ~10 us of launch and setup whatever its size;
   * below ~128^3 multiply-adds one direct kernel is cheaper. */
  static const ein_backend_caps caps = {.device = "cuda",
                                        .gemm_half = true,
                                        .gemm_int = false,
                                        .gemm_min_flops = (int64_t)1 << 22};
  return &caps;
}

void ein_gemm_as_loop(const ein_step *gs, ein_step *loop, ein_loop_axis *axes) {
  const ein_gemm *g = &gs->gemm;
  *loop = *gs;
  loop->kind = EIN_STEP_LOOP;
  loop->op = EIN_REDUCE_SUM;
  int n = 0;
  for (int i = 0; i < g->nbatch; i++)
    axes[n++] = g->batch[i];
  axes[n++] = (ein_loop_axis){-1, g->m, {g->c_ms, g->a_ms, 0}};
  axes[n++] = (ein_loop_axis){-1, g->n, {g->c_ns, 0, g->b_ns}};
  axes[n++] = (ein_loop_axis){-1, g->k, {0, g->a_ks, g->b_ks}};
  loop->naxes = n;
  loop->axes = axes;
}
