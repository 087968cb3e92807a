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
#include "hash.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_axes.h"
#include "outer_layout.h"
#include "strbuf.h"

enum {
  MAP_BLOCK = 256,
  TILE = 32,         /* transpose tile edge */
  TILE_ROWS = 8,     /* threads per tile column */
  TILE2 = 2 * TILE,  /* 2-byte transpose tile edge: TILE threads move pairs */
  HALF_VEC = 8,      /* 2-byte map variant: elements per thread */
  RED_OUT_LANES = 8, /* reduce_outer: lanes per output element */
  SHORT_RED = 8,     /* fewer terms: a thread per output (Inductor) */
  /* a reduction over a transposed plane of up to this many terms folds
   * them in a transpose's tile (transpose_axes) */
  TILE_RED_MAX = 64,
  /* A split's pass 1 aims at two waves of 132 SMs, 8 blocks of 256
   * threads each (the H100; PyTorch's rule gives ~2100 blocks too). */
  SPLIT_TARGET = 2 * 132 * 8,
  SPLIT_MIN_TERMS = 16, /* per lane in each chunk: less is launch-bound */
  FINISH_BLOCK = 256,
  /* A staged copy's block moves tiles of this many elements at most
   * (whole tiles, at least one): 8 per thread of a MAP_BLOCK block. */
  STAGE_ELEMS = 8 * MAP_BLOCK,
  STAGE_MAX_BYTES = 16384 /* one tile's shared memory at most */
};

/* Grid-stride loops make any grid correct; this bounds the grid. */
static const int64_t MAX_BLOCKS = 1 << 16;

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

/* ------------------------------------------------------------ types */

static const char *storage_type(ein_dtype dt) {
  switch (dt) {
  case EIN_DT_F16:
  case EIN_DT_BF16:
  case EIN_DT_U16: return "unsigned short";
  case EIN_DT_F32: return "float";
  case EIN_DT_F64: return "double";
  case EIN_DT_I8: return "signed char";
  case EIN_DT_I16: return "short";
  case EIN_DT_I32: return "int";
  case EIN_DT_I64: return "long long";
  case EIN_DT_U8:
  case EIN_DT_BOOL: return "unsigned char";
  case EIN_DT_U32: return "unsigned int";
  case EIN_DT_U64: return "unsigned long long";
  case EIN_DT_C64: return "ein_c64";
  case EIN_DT_C128: return "ein_c128";
  default: return "unsigned char";
  }
}

/* The unsigned type of 1-16 bytes (a power of two) as a kernel names it. */
static const char *word_type(int64_t bytes) {
  switch (bytes) {
  case 1: return "unsigned char";
  case 2: return "unsigned short";
  case 4: return "unsigned int";
  case 8: return "uint2";
  default: return "uint4";
  }
}

/* C names of the accumulators; EIN_ACC_C64 and EIN_ACC_C128 are the
 * preludes' ein_c64 and ein_c128. */
static const char *acc_type(ein_acc a) {
  static const char *const names[] = {"float", "double", "long long",
                                      "ein_c64", "ein_c128"};
  return names[a];
}

static size_t acc_size(ein_acc a) {
  return a == EIN_ACC_F32 ? 4 : a == EIN_ACC_C128 ? 16 : 8;
}

/* Expression converting stored value `x` of dtype dt to the accumulator. */
static void emit_load(ein_strbuf *sb, ein_dtype dt, ein_acc acc,
                      const char *x) {
  if (dt == EIN_DT_F16)
    ein_strbuf_printf(sb, "(%s)ein_h2f(%s)", acc_type(acc), x);
  else if (dt == EIN_DT_BF16)
    ein_strbuf_printf(sb, "(%s)ein_b2f(%s)", acc_type(acc), x);
  else if (dt == EIN_DT_BOOL)
    ein_strbuf_printf(sb, "(%s)(%s != 0)", acc_type(acc), x);
  else if (dt == EIN_DT_F8E4M3 || dt == EIN_DT_F8E5M2) /* fp8_eval.c */
    ein_strbuf_printf(sb, "(%s)ein_e%sf(%s)", acc_type(acc),
                      dt == EIN_DT_F8E4M3 ? "4m3" : "5m2", x);
  else
    ein_strbuf_printf(sb, "(%s)(%s)", acc_type(acc), x);
}

/* Expression converting accumulator value `v` to dst's stored type. */
static void emit_store_value(ein_strbuf *sb, ein_dtype dt, const char *v) {
  if (dt == EIN_DT_F16)
    ein_strbuf_printf(sb, "ein_f2h((float)(%s))", v);
  else if (dt == EIN_DT_BF16)
    ein_strbuf_printf(sb, "ein_f2b((float)(%s))", v);
  else if (dt == EIN_DT_BOOL)
    ein_strbuf_printf(sb, "(unsigned char)((%s) != 0)", v);
  else
    ein_strbuf_printf(sb, "(%s)(%s)", storage_type(dt), v);
}

/* A double as a CUDA C literal of the accumulator type; for a complex
 * one v + 0i, or nan+nanj for a NaN (numpy's mean of nothing). */
static void emit_constant(ein_strbuf *sb, double v, ein_acc acc) {
  if (acc == EIN_ACC_C64 || acc == EIN_ACC_C128) {
    ein_acc part = acc == EIN_ACC_C64 ? EIN_ACC_F32 : EIN_ACC_F64;
    ein_strbuf_printf(sb, "%s(", acc_type(acc));
    emit_constant(sb, v, part);
    ein_strbuf_printf(sb, ", ");
    emit_constant(sb, isnan(v) ? v : 0, part);
    ein_strbuf_printf(sb, ")");
  } else if (acc == EIN_ACC_I64) {
    ein_strbuf_printf(sb, "(long long)%lldLL", (long long)v);
  } else if (isnan(v)) {
    ein_strbuf_printf(sb, acc == EIN_ACC_F32
                              ? "__int_as_float(0x7fc00000)"
                              : "__longlong_as_double(0x7ff8000000000000LL)");
  } else if (isinf(v)) {
    ein_strbuf_printf(sb, "%s%s", v < 0 ? "-" : "",
                      acc == EIN_ACC_F32
                          ? "__int_as_float(0x7f800000)"
                          : "__longlong_as_double(0x7ff0000000000000LL)");
  } else {
    char num[48];
    snprintf(num, sizeof num, acc == EIN_ACC_F32 ? "%.9g" : "%.17g", v);
    bool plain = strpbrk(num, ".e") == NULL;
    ein_strbuf_printf(sb, "%s%s%s", num, plain ? ".0" : "",
                      acc == EIN_ACC_F32 ? "f" : "");
  }
}

/* -------------------------------------------------------- the prelude */

/* src/codegen/prelude_*.h, each followed by the templates of
 * src/codegen/kernels/, embedded by scripts/embed.py at build time. */
extern const char ein_prelude_nvrtc[], ein_prelude_host[];

const char *ein_codegen_prelude(bool host) {
  return host ? ein_prelude_host : ein_prelude_nvrtc;
}

/* The combine expression of a reduction over accumulators a and b.
 * Integer sums and products wrap (computed unsigned); max and min let NaN
 * win, as numpy. */
static void emit_combine(ein_strbuf *sb, ein_reduction op, ein_acc acc) {
  const char *t = acc_type(acc);
  switch (op) {
  case EIN_REDUCE_SUM:
  case EIN_REDUCE_MEAN:
    ein_strbuf_printf(
        sb, acc == EIN_ACC_I64 ? "(long long)((ein_u64)a + (ein_u64)b)" : "a + b");
    break;
  case EIN_REDUCE_PROD:
    ein_strbuf_printf(
        sb, acc == EIN_ACC_I64 ? "(long long)((ein_u64)a * (ein_u64)b)" : "a * b");
    break;
  case EIN_REDUCE_MAX:
    ein_strbuf_printf(sb, "(b > a || b != b) ? b : a");
    break;
  case EIN_REDUCE_MIN:
    ein_strbuf_printf(sb, "(b < a || b != b) ? b : a");
    break;
  case EIN_REDUCE_ANY:
    ein_strbuf_printf(sb, "(%s)(a != 0 || b != 0)", t);
    break;
  case EIN_REDUCE_ALL:
    ein_strbuf_printf(sb, "(%s)(a != 0 && b != 0)", t);
    break;
  }
}

/* The reduction's starting value; int64 extremes are written as hex
 * because a double cannot hold INT64_MAX exactly. */
static void emit_identity(ein_strbuf *sb, ein_reduction op, ein_acc acc) {
  switch (op) {
  case EIN_REDUCE_PROD:
  case EIN_REDUCE_ALL: emit_constant(sb, 1, acc); return;
  case EIN_REDUCE_MAX:
    if (acc == EIN_ACC_I64)
      ein_strbuf_printf(sb, "(long long)(-0x7fffffffffffffffLL - 1)");
    else
      emit_constant(sb, -INFINITY, acc);
    return;
  case EIN_REDUCE_MIN:
    if (acc == EIN_ACC_I64)
      ein_strbuf_printf(sb, "(long long)0x7fffffffffffffffLL");
    else
      emit_constant(sb, INFINITY, acc);
    return;
  default: emit_constant(sb, 0, acc); return;
  }
}

/* ------------------------------------------------------ index algebra */

typedef struct gen {
  const ein_step *s;
  ein_strbuf *sb;
  ein_loop_axes kept, red;
  ein_acc acc;
  bool wide;       /* 64-bit indices */
  const char *idx; /* "int" or "long long" */
} gen;

static void emit_int(gen *g, int64_t v) {
  ein_strbuf_printf(g->sb, g->wide ? "%lldLL" : "%lld", (long long)v);
}

/* Adds to offsets o0/o1/o2 (for the operands in `ops`, a bit mask) the
 * offsets of flat index `var` over axes la, last axis fastest. */
static void emit_decompose(gen *g, const ein_loop_axes *la, const char *var,
                           const char *prefix, unsigned ops) {
  ein_strbuf *sb = g->sb;
  if (la->n == 0)
    return;
  ein_strbuf_printf(sb, "    { %s t_ = %s, c_ = 0;\n", g->idx, var);
  for (int i = la->n - 1; i >= 0; i--) {
    bool last = i == 0;
    if (!last) {
      ein_strbuf_printf(sb, "      c_ = t_ %% ");
      emit_int(g, la->size[i]);
      ein_strbuf_printf(sb, "; t_ /= ");
      emit_int(g, la->size[i]);
      ein_strbuf_printf(sb, ";\n");
    }
    for (int k = 0; k < 3; k++) {
      if (!(ops & (1u << k)) || la->st[i][k] == 0)
        continue;
      ein_strbuf_printf(sb, "      %s%d += %s * ", prefix, k,
                        last ? "t_" : "c_");
      emit_int(g, la->st[i][k]);
      ein_strbuf_printf(sb, ";\n");
    }
  }
  ein_strbuf_printf(sb, "      (void)c_;\n");
  ein_strbuf_printf(sb, "    }\n");
}

/* A Step member `name`(var, &P0, &P1, &P2) that adds to its offset
 * arguments (those in `params`, a bit mask; P is `prefix`) the offsets of
 * index `var` over axes la for the operands in `ops`. Every offset
 * function of the kernel templates (offsets, out_offsets, rest_offsets,
 * tile_offsets, term_offsets, row_offsets) is one of these. */
static void emit_offsets_fn(gen *g, const char *name, const char *var,
                            const char *prefix, unsigned params,
                            const ein_loop_axes *la, unsigned ops) {
  ein_strbuf *sb = g->sb;
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ void %s(idx %s",
                    name, var);
  for (int k = 0; k < 3; k++)
    if (params & (1u << k))
      ein_strbuf_printf(sb, ", idx &%s%d", prefix, k);
  ein_strbuf_printf(sb, ") {\n    (void)%s;", var);
  for (int k = 0; k < 3; k++)
    if (params & (1u << k))
      ein_strbuf_printf(sb, " (void)%s%d;", prefix, k);
  ein_strbuf_printf(sb, "\n");
  emit_decompose(g, la, var, prefix, ops);
  ein_strbuf_printf(sb, "  }\n");
}

/* A map other than the product: grad_map.cuh's ein_map_NAME of the
 * sources loaded (a one-source map's twice). */
static void emit_map_op(gen *g, const char *x0, const char *x1) {
  static const char *const names[] = {
      "product", "equal", "div", "is_zero", "zero_to_one", "div_nonzero",
      "prod_mask", "conj"};
  const ein_step *s = g->s;
  int k = s->nsrc == 2;
  ein_strbuf_printf(g->sb, "ein_map_%s<%s>(", names[s->map], acc_type(g->acc));
  emit_load(g->sb, s->src_dtype[0], g->acc, x0);
  ein_strbuf_printf(g->sb, ", ");
  emit_load(g->sb, s->src_dtype[k], g->acc, k ? x1 : x0);
  ein_strbuf_printf(g->sb, ")");
}

/* The accumulator-typed value of the step from stored values x0 (and
 * x1), each an expression. */
static void emit_value_of(gen *g, const char *x0, const char *x1) {
  const ein_step *s = g->s;
  if (s->map != EIN_MAP_PRODUCT) {
    emit_map_op(g, x0, x1);
    return;
  }
  if (s->nsrc == 2)
    ein_strbuf_printf(g->sb, "ein_mul(");
  emit_load(g->sb, s->src_dtype[0], g->acc, x0);
  if (s->nsrc == 2) {
    ein_strbuf_printf(g->sb, ", ");
    emit_load(g->sb, s->src_dtype[1], g->acc, x1);
    ein_strbuf_printf(g->sb, ")");
  }
}

/* The accumulator-typed value of the step at offsets o1 (and o2). */
static void emit_value(gen *g, const char *o1, const char *o2) {
  char x0[192], x1[192];
  snprintf(x0, sizeof x0, "s0[%s]", o1);
  snprintf(x1, sizeof x1, "s1[%s]", o2);
  emit_value_of(g, x0, x1);
}

/* "acc = alpha * acc" and the 0/1 normalisation of any/all, in place. */
static void emit_post(gen *g, const char *v, bool normalise) {
  const ein_step *s = g->s;
  if (s->alpha != 1) {
    ein_strbuf_printf(g->sb, "    %s = (%s)(%s * ", v, acc_type(g->acc), v);
    emit_constant(g->sb, s->alpha, g->acc);
    ein_strbuf_printf(g->sb, ");\n");
  }
  if (normalise && (s->op == EIN_REDUCE_ANY || s->op == EIN_REDUCE_ALL))
    ein_strbuf_printf(g->sb, "    %s = (%s)(%s != 0);\n", v, acc_type(g->acc),
                      v);
}

static const char *src_type(const ein_step *s, int k) {
  return k < s->nsrc ? storage_type(s->src_dtype[k]) : "void";
}

/* The C types a kernel's pointers d, s0 and s1 point to; "void" for a
 * source the kernel does not have. */
typedef struct operand_types {
  const char *d, *s0, *s1;
} operand_types;

/* d's type `dtype`, the sources' the step's stored types. */
static operand_types step_types(const ein_step *s, const char *dtype) {
  return (operand_types){dtype, src_type(s, 0), src_type(s, 1)};
}

/* The parameter list, typed per operand. */
static void emit_signature(gen *g, const char *name, unsigned threads,
                           operand_types t) {
  ein_strbuf_printf(g->sb,
                    "extern \"C\" __global__ void __launch_bounds__(%u) %s(\n"
                    "    %s *__restrict__ d, const %s *__restrict__ s0,\n"
                    "    const %s *__restrict__ s1) {\n",
                    threads, name, t.d, t.s0, t.s1);
}

static int64_t blocks_for(int64_t work, int64_t per_block) {
  int64_t b = (work + per_block - 1) / per_block;
  if (b < 1)
    b = 1;
  return b < MAX_BLOCKS ? b : MAX_BLOCKS;
}

/* ------------------------------------------------------------- kernels */

/* The map family (kernels/map.cuh) instantiated for one step: a struct
 * of the step's constants and inline functions, then the kernel calling
 * the family's template with it. */
typedef enum map_form { MAP_VALUE, MAP_RAW, MAP_HALF_VEC } map_form;

/* The struct's types and item count (the Step interface of map.cuh). */
static void emit_step_types(gen *g, const char *step, int64_t n,
                            operand_types t) {
  ein_strbuf_printf(g->sb,
                    "struct %s {\n"
                    "  typedef %s idx;\n"
                    "  typedef %s dst_t;\n"
                    "  typedef %s src0_t;\n"
                    "  typedef %s src1_t;\n"
                    "  static constexpr int nsrc = %d, block = %d;\n"
                    "  static constexpr idx n = ",
                    step, g->idx, t.d, t.s0, t.s1, g->s->nsrc,
                    (int)MAP_BLOCK);
  emit_int(g, n);
  ein_strbuf_printf(g->sb, ";\n");
}

/* Closes the accumulator-typed expression the caller has written after
 * "acc v_ = " and returns it scaled, normalised and converted. */
static void emit_step_result(gen *g) {
  ein_strbuf_printf(g->sb, ";\n");
  if (g->s->kind != EIN_STEP_FILL)
    emit_post(g, "v_", true);
  ein_strbuf_printf(g->sb, "    return ");
  emit_store_value(g->sb, g->s->dst_dtype, "v_");
  ein_strbuf_printf(g->sb, ";\n  }\n");
}

/* value(s0, s1, o1, o2), or for the 2-byte vector form value_of(x0, x1)
 * and whether each source is contiguous along the vector. */
static void emit_step_value(gen *g, map_form form, const ein_loop_axes *la) {
  ein_strbuf *sb = g->sb;
  const ein_step *s = g->s;
  if (form == MAP_HALF_VEC) {
    int in = la->n - 1;
    ein_strbuf_printf(sb,
                      "  static constexpr int vec = %d;\n"
                      "  static constexpr bool contig1 = %s, contig2 = %s;\n"
                      "  static __device__ __forceinline__ dst_t value_of("
                      "src0_t x0, %s x1) {\n    (void)x1;\n    %s v_ = ",
                      (int)HALF_VEC, la->st[in][1] ? "true" : "false",
                      s->nsrc == 2 && la->st[in][2] ? "true" : "false",
                      s->nsrc == 2 ? "src1_t" : "int", acc_type(g->acc));
    emit_value_of(g, "x0", "x1");
    emit_step_result(g);
    return;
  }
  ein_strbuf_printf(sb,
                    "  static __device__ __forceinline__ dst_t value("
                    "const src0_t *s0, const src1_t *s1, idx o1, idx o2) {\n"
                    "    (void)s0; (void)s1; (void)o1; (void)o2;\n");
  if (form == MAP_RAW) {
    ein_strbuf_printf(sb, "    return s0[o1];\n  }\n");
    return;
  }
  ein_strbuf_printf(sb, "    %s v_ = ", acc_type(g->acc));
  if (s->kind == EIN_STEP_FILL)
    emit_constant(sb, s->fill, g->acc);
  else
    emit_value(g, "o1", "o2");
  emit_step_result(g);
}

/* A flat loop over axes la: fill, map, a 16-byte copy (MAP_RAW, types
 * uint4) or the 2-byte vector map, as kernel `name` with Step name_step. */
static void gen_map(gen *g, const char *name, const ein_loop_axes *la,
                    const char *dtype, map_form form) {
  const ein_step *s = g->s;
  bool raw = form == MAP_RAW;
  operand_types t =
      raw ? (operand_types){dtype, "uint4", "void"} : step_types(s, dtype);
  char step[64];
  snprintf(step, sizeof step, "%s_step", name);
  emit_step_types(g, step, ein_loop_axes_volume(la), t);
  emit_offsets_fn(g, "offsets", "i", "o", 7u, la,
                  s->kind == EIN_STEP_FILL ? 1u : 7u);
  emit_step_value(g, form, la);
  ein_strbuf_printf(g->sb, "};\n");
  emit_signature(g, name, MAP_BLOCK, t);
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
  const char *dt = storage_type(g->s->dst_dtype);
  int64_t nrest = ein_loop_axes_volume(&st->rest);
  ein_strbuf_printf(sb,
                    "struct ein_vec_step {\n  typedef %s idx;\n"
                    "  typedef %s dst_t;\n  typedef %s vec_t;\n"
                    "  static constexpr int block = %d, width = %d, "
                    "tiles = %d;\n  static constexpr idx elems = ",
                    g->idx, dt, word_type(st->bytes), (int)MAP_BLOCK,
                    st->width, st->tiles);
  emit_int(g, st->elems);
  ein_strbuf_printf(sb, ", cstride = ");
  emit_int(g, st->cstride);
  ein_strbuf_printf(sb, ", nrest = ");
  emit_int(g, nrest);
  ein_strbuf_printf(sb, ";\n");
  emit_offsets_fn(g, "rest_offsets", "r", "o", 7u, &st->rest, 3u);
  emit_offsets_fn(g, "tile_offsets", "u", "o", 7u, &st->tile, 3u);
  ein_strbuf_printf(sb, "};\n");
  emit_signature(g, "ein_vec", MAP_BLOCK, (operand_types){dt, dt, "void"});
  ein_strbuf_printf(sb, "  ein_transpose_staged<ein_vec_step>(d, s0);\n}\n");
  k->has_vec = true;
  k->vec_staged = true;
  k->vec_bytes = (unsigned)st->bytes;
  k->vec_items = (unsigned)st->width;
  k->grid_vec[0] = (unsigned)blocks_for(nrest, st->tiles);
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

/* identity() and comb(a, b) of the step's reduction, in a Step struct
 * that has acc_t. */
static void emit_red_ops(gen *g) {
  ein_strbuf *sb = g->sb;
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ acc_t "
                        "identity() { return ");
  emit_identity(sb, g->s->op, g->acc);
  ein_strbuf_printf(sb, "; }\n  static __device__ __forceinline__ acc_t "
                        "comb(acc_t a, acc_t b) {\n    return ");
  emit_combine(sb, g->s->op, g->acc);
  ein_strbuf_printf(sb, ";\n  }\n");
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
    emit_value_of(g, "s0[o1]", "");
    ein_strbuf_printf(sb, ");\n    }\n    (void)0");
    return;
  }
  for (int64_t t = 0; t < n; t++) {
    int64_t off[3];
    ein_loop_axes_offsets(&g->red, t, off);
    char x0[96];
    snprintf(x0, sizeof x0, "s0[at + %lld]", (long long)off[1]);
    ein_strbuf_printf(sb, ";\n    v_ = comb(v_, ");
    emit_value_of(g, x0, "");
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
                    "  static constexpr idx na = ",
                    step, g->idx, storage_type(s->dst_dtype), src_type(s, 0),
                    tile, (int)TILE_ROWS);
  int64_t v[7] = {sb_, ein_loop_axes_volume(rest), (sa + tile - 1) / tile,
                  sta[0], stb[0], sta[1], stb[1]};
  static const char *const names[7] = {"nb", "nrest", "ta", "sa0",
                                       "sb0", "sa1", "sb1"};
  emit_int(g, sa);
  for (int i = 0; i < 7; i++) {
    ein_strbuf_printf(sb, ",%s%s = ", i == 3 ? "\n      " : " ", names[i]);
    emit_int(g, v[i]);
  }
  ein_strbuf_printf(sb, ";\n");
  emit_offsets_fn(g, "rest_offsets", "r", "o", 7u, rest, 3u);
  if (g->red.n) {
    ein_strbuf_printf(sb, "  typedef %s acc_t;\n", acc_type(g->acc));
    emit_red_ops(g);
    if (ein_loop_axes_volume(&g->red) >= SHORT_RED)
      emit_offsets_fn(g, "term_offsets", "r", "o", 2u, &g->red, 2u);
  }
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ dst_t "
                        "value(const src0_t *s0, idx at) {\n    %s v_ = ",
                    acc_type(g->acc));
  if (g->red.n)
    emit_transpose_terms(g);
  else
    emit_value(g, "at", "0");
  ein_strbuf_printf(sb, ";\n");
  emit_post(g, "v_", !g->red.n); /* a reduction's comb normalises */
  ein_strbuf_printf(sb, "    return ");
  emit_store_value(sb, s->dst_dtype, "v_");
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
  const char *dt = storage_type(s->dst_dtype);
  emit_transpose_step(g, "ein_main_step", TILE, &rest, sa, sb_, sta, stb);
  emit_signature(g, "ein_main", TILE * TILE_ROWS,
                 (operand_types){dt, src_type(s, 0), "void"});
  ein_strbuf_printf(g->sb, "  ein_transpose<ein_main_step>(d, s0);\n}\n");
  k->grid[0] = (unsigned)(((sa + TILE - 1) / TILE) * ((sb_ + TILE - 1) / TILE));
  k->grid[1] = (unsigned)(nrest < 65535 ? nrest : 65535);
  k->grid[2] = 1;
  k->block[0] = TILE;
  k->block[1] = TILE_ROWS;
  k->block[2] = 1;
  if (!half_transpose_ok(g, &rest, sa, sb_, sta, stb))
    return;
  emit_transpose_step(g, "ein_vec_step", TILE2, &rest, sa, sb_, sta, stb);
  emit_signature(g, "ein_vec", TILE * TILE_ROWS,
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

/* ---------------------------------------------------------- reductions */

/* How a reduction spreads over the machine, chosen from the sizes alone
 * (choose_reduction): the rule of PyTorch's Reduce.cuh and Inductor,
 * written once. */
typedef struct red_shape {
  ein_kernel_kind kind; /* REDUCE_THREAD, _INNER, _OUTER or _SPLIT */
  bool inner;           /* lanes along x share an output */
  int lanes, per_block; /* lanes per output, outputs per block */
  int64_t nout, nred;
  int64_t blocks;        /* along x */
  int64_t splits, chunk; /* split: blocks along y, terms of each */
} red_shape;

/* A contiguous reduced axis keeps a warp (or, for long rows and not too
 * many of them, 256 threads) per output; a strided one a thread per
 * output with 8 lanes along the reduction. Fewer than SHORT_RED terms
 * are unrolled in one thread (or in a transpose's tile: transpose_axes). When the outputs give less than one wave
 * of blocks and the reduction is long, the reduced range is cut into
 * chunks of at least SPLIT_MIN_TERMS per lane so that pass 1 has about
 * SPLIT_TARGET blocks. */
static red_shape choose_reduction(const gen *g, bool inner) {
  red_shape r = {.inner = inner,
                 .nout = ein_loop_axes_volume(&g->kept),
                 .nred = ein_loop_axes_volume(&g->red),
                 .splits = 1};
  r.chunk = r.nred;
  if (r.nred < SHORT_RED) {
    r.kind = EIN_KERNEL_REDUCE_THREAD;
    r.lanes = 1;
    r.per_block = MAP_BLOCK;
    r.blocks = blocks_for(r.nout, MAP_BLOCK);
    return r;
  }
  r.kind = inner ? EIN_KERNEL_REDUCE_INNER : EIN_KERNEL_REDUCE_OUTER;
  r.lanes = !inner                             ? RED_OUT_LANES
            : r.nred >= 4096 && r.nout < 16384 ? 256
                                               : 32;
  r.per_block = inner ? 256 / r.lanes : 32;
  r.blocks = blocks_for(r.nout, r.per_block);
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
                    step, g->idx, acc_type(g->acc),
                    storage_type(g->s->dst_dtype), t.d, t.s0, t.s1);
  emit_int(g, nout);
  ein_strbuf_printf(sb, ", nred = ");
  emit_int(g, r->nred);
  ein_strbuf_printf(sb, ";\n");
  emit_red_ops(g);
}

/* out_offsets(o, b0, b1, b2) over axes la (the kept axes, in outputs or
 * in a vector variant's groups of them), for operands `ops`. */
static void emit_red_out_offsets(gen *g, const ein_loop_axes *la,
                                 unsigned ops) {
  emit_offsets_fn(g, "out_offsets", "o", "b", 7u, la, ops);
}

/* result(acc_): scaled and converted to dst's stored type. */
static void emit_red_result(gen *g) {
  ein_strbuf_printf(g->sb, "  static __device__ __forceinline__ dst_t "
                           "result(acc_t acc_) {\n");
  emit_post(g, "acc_", false);
  ein_strbuf_printf(g->sb, "    return ");
  emit_store_value(g->sb, g->s->dst_dtype, "acc_");
  ein_strbuf_printf(g->sb, ";\n  }\n");
}

/* term_offsets(r, o1, o2) over the reduced axes, and value(s0, s1, o1,
 * o2), the accumulator-typed term. */
static void emit_red_terms(gen *g) {
  ein_strbuf *sb = g->sb;
  emit_offsets_fn(g, "term_offsets", "r", "o", 6u, &g->red, 6u);
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ acc_t "
                        "value(const src0_t *s0, const src1_t *s1, idx o1, "
                        "idx o2) {\n    (void)s1; (void)o2;\n    return ");
  emit_value(g, "o1", "o2");
  ein_strbuf_printf(sb, ";\n  }\n");
}

/* The kernel `name`(d, s0, s1) calling template `tmpl` with the Step
 * name_step; pass 2 and the vector variant take no s1. */
static void emit_red_kernel(gen *g, const char *name, const char *tmpl,
                            unsigned threads, operand_types t) {
  emit_signature(g, name, threads, t);
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
  r->blocks = blocks_for(r->nout, r->per_block);
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
  emit_int(g, o->stage_n);
  ein_strbuf_printf(g->sb, ", stage_len = ");
  emit_int(g, len);
  ein_strbuf_printf(g->sb, ";\n");
}

static void gen_reduce(gen *g, ein_kernel_src *k, red_shape *r) {
  const ein_step *s = g->s;
  bool split = r->kind == EIN_KERNEL_REDUCE_SPLIT;
  ein_outer_layout o = outer_layout(g, k, r);
  operand_types t = step_types(
      s, split ? acc_type(g->acc) : storage_type(s->dst_dtype));
  emit_red_head(g, "ein_main_step", r, r->nout, t);
  ein_strbuf_printf(g->sb,
                    "  static constexpr int lanes = %d, per_block = %d;\n"
                    "  static constexpr bool inner = %s, split = %s;\n"
                    "  static constexpr idx chunk = ",
                    r->lanes, r->per_block, r->inner ? "true" : "false",
                    split ? "true" : "false");
  emit_int(g, r->chunk);
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
  const char *dt = storage_type(s->dst_dtype);
  int64_t groups = ein_loop_axes_volume(&tv->out);
  operand_types t = {dt, src_type(s, 0), "void"};
  emit_red_head(g, "ein_vec_step", r, groups, t);
  ein_strbuf_printf(sb,
                    "  static constexpr int block = %d, per_thread = %d, "
                    "width = %d, rows = %lld;\n"
                    "  typedef %s load_t;\n  typedef %s store_t;\n",
                    (int)MAP_BLOCK, tv->per, tv->width,
                    (long long)ein_loop_axes_volume(&tv->rows),
                    word_type(tv->bytes),
                    tv->per == 1 ? dt
                                 : word_type(tv->per * (int64_t)ein_dtype_size(
                                                           s->dst_dtype)));
  emit_red_out_offsets(g, &tv->out, 3u);
  emit_offsets_fn(g, "row_offsets", "r", "o", 2u, &tv->rows, 2u);
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ acc_t "
                        "load(src0_t x) {\n    return ");
  emit_load(sb, s->src_dtype[0], g->acc, "x");
  ein_strbuf_printf(sb, ";\n  }\n");
  emit_red_result(g);
  ein_strbuf_printf(sb, "};\n");
  emit_red_kernel(g, "ein_vec", "ein_reduce_thread_vec", MAP_BLOCK, t);
  k->has_vec = true;
  k->vec_bytes = (unsigned)tv->bytes;
  k->vec_items = (unsigned)tv->per;
  k->grid_vec[0] = (unsigned)blocks_for(groups, MAP_BLOCK);
  k->grid_vec[1] = k->grid_vec[2] = 1;
}

/* A thread per output with its few terms unrolled at offsets fixed at
 * generation time (reduce.cuh's ein_reduce_thread). */
static void gen_reduce_thread(gen *g, ein_kernel_src *k, const red_shape *r) {
  ein_strbuf *sb = g->sb;
  const ein_step *s = g->s;
  operand_types t = step_types(s, storage_type(s->dst_dtype));
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
    emit_value(g, o1, o2);
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
static void gen_finish(gen *g, ein_kernel_src *k, const red_shape *r) {
  operand_types t = {storage_type(g->s->dst_dtype), acc_type(g->acc), "void"};
  emit_red_head(g, "ein_main_step", r, r->nout, t);
  ein_strbuf_printf(g->sb,
                    "  static constexpr int splits = %lld, block = %d;\n",
                    (long long)r->splits, (int)FINISH_BLOCK);
  emit_red_out_offsets(g, &g->kept, 1u);
  emit_red_result(g);
  ein_strbuf_printf(g->sb, "};\n");
  emit_red_kernel(g, "ein_main", "ein_reduce_finish", FINISH_BLOCK, t);
  k->grid[0] = (unsigned)blocks_for(r->nout, FINISH_BLOCK);
  k->grid[1] = k->grid[2] = 1;
  k->block[0] = FINISH_BLOCK;
  k->block[1] = k->block[2] = 1;
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
                      acc_type(g->acc), (long long)r->nout,
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
    const char *t = acc_type(g->acc);
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
  *r = choose_reduction(g, red_min < kept_min || !g->kept.n);
  return r->kind;
}

/* A fill or map, with its vector variant where one applies. */
static void gen_map_kernels(gen *g, ein_kernel_src *out) {
  const ein_step *s = g->s;
  ein_loop_axes vec;
  gen_map(g, "ein_main", &g->kept, storage_type(s->dst_dtype), MAP_VALUE);
  out->grid[0] =
      (unsigned)blocks_for(ein_loop_axes_volume(&g->kept), MAP_BLOCK);
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
      (unsigned)blocks_for(ein_loop_axes_volume(&vec), MAP_BLOCK);
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
  gen_finish(g, &out->finish, r);
  size_t asz = acc_size(g->acc);
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
    gen_reduce_thread(&g, out, &r);
    break;
  case EIN_KERNEL_REDUCE_INNER:
  case EIN_KERNEL_REDUCE_OUTER:
  case EIN_KERNEL_REDUCE_SPLIT:
    gen_reduce(&g, out, &r);
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
