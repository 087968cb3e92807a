/*
 * codegen_emit.c - the pieces of a kernel's Step struct (codegen_internal.h):
 * storage and accumulator types, loads, stores and constants, the
 * reduction's identity and combination, the decomposition of a flat index
 * into element offsets, a term's value and the result's conversion.
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

/* ------------------------------------------------------------ types */

const char *cg_storage_type(ein_dtype dt) {
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
const char *cg_word_type(int64_t bytes) {
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
const char *cg_acc_type(ein_acc a) {
  static const char *const names[] = {"float", "double", "long long",
                                      "ein_c64", "ein_c128"};
  return names[a];
}

size_t cg_acc_size(ein_acc a) {
  return a == EIN_ACC_F32 ? 4 : a == EIN_ACC_C128 ? 16 : 8;
}

/* Expression converting stored value `x` of dtype dt to the accumulator. */
void cg_emit_load(ein_strbuf *sb, ein_dtype dt, ein_acc acc,
                      const char *x) {
  if (dt == EIN_DT_F16)
    ein_strbuf_printf(sb, "(%s)ein_h2f(%s)", cg_acc_type(acc), x);
  else if (dt == EIN_DT_BF16)
    ein_strbuf_printf(sb, "(%s)ein_b2f(%s)", cg_acc_type(acc), x);
  else if (dt == EIN_DT_BOOL)
    ein_strbuf_printf(sb, "(%s)(%s != 0)", cg_acc_type(acc), x);
  else if (dt == EIN_DT_F8E4M3 || dt == EIN_DT_F8E5M2) /* fp8_eval.c */
    ein_strbuf_printf(sb, "(%s)ein_e%sf(%s)", cg_acc_type(acc),
                      dt == EIN_DT_F8E4M3 ? "4m3" : "5m2", x);
  else
    ein_strbuf_printf(sb, "(%s)(%s)", cg_acc_type(acc), x);
}

/* Expression converting accumulator value `v` to dst's stored type. */
void cg_emit_store_value(ein_strbuf *sb, ein_dtype dt, const char *v) {
  if (dt == EIN_DT_F16)
    ein_strbuf_printf(sb, "ein_f2h((float)(%s))", v);
  else if (dt == EIN_DT_BF16)
    ein_strbuf_printf(sb, "ein_f2b((float)(%s))", v);
  else if (dt == EIN_DT_BOOL)
    ein_strbuf_printf(sb, "(unsigned char)((%s) != 0)", v);
  else
    ein_strbuf_printf(sb, "(%s)(%s)", cg_storage_type(dt), v);
}

/* A double as a CUDA C literal of the accumulator type; for a complex
 * one v + 0i, or nan+nanj for a NaN (numpy's mean of nothing). */
void cg_emit_constant(ein_strbuf *sb, double v, ein_acc acc) {
  if (acc == EIN_ACC_C64 || acc == EIN_ACC_C128) {
    ein_acc part = acc == EIN_ACC_C64 ? EIN_ACC_F32 : EIN_ACC_F64;
    ein_strbuf_printf(sb, "%s(", cg_acc_type(acc));
    cg_emit_constant(sb, v, part);
    ein_strbuf_printf(sb, ", ");
    cg_emit_constant(sb, isnan(v) ? v : 0, part);
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
void cg_emit_combine(ein_strbuf *sb, ein_reduction op, ein_acc acc) {
  const char *t = cg_acc_type(acc);
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
void cg_emit_identity(ein_strbuf *sb, ein_reduction op, ein_acc acc) {
  switch (op) {
  case EIN_REDUCE_PROD:
  case EIN_REDUCE_ALL: cg_emit_constant(sb, 1, acc); return;
  case EIN_REDUCE_MAX:
    if (acc == EIN_ACC_I64)
      ein_strbuf_printf(sb, "(long long)(-0x7fffffffffffffffLL - 1)");
    else
      cg_emit_constant(sb, -INFINITY, acc);
    return;
  case EIN_REDUCE_MIN:
    if (acc == EIN_ACC_I64)
      ein_strbuf_printf(sb, "(long long)0x7fffffffffffffffLL");
    else
      cg_emit_constant(sb, INFINITY, acc);
    return;
  default: cg_emit_constant(sb, 0, acc); return;
  }
}


void cg_emit_int(gen *g, int64_t v) {
  ein_strbuf_printf(g->sb, g->wide ? "%lldLL" : "%lld", (long long)v);
}

/* Adds to offsets o0/o1/o2 (for the operands in `ops`, a bit mask) the
 * offsets of flat index `var` over axes la, last axis fastest. */
void cg_emit_decompose(gen *g, const ein_loop_axes *la, const char *var,
                           const char *prefix, unsigned ops) {
  ein_strbuf *sb = g->sb;
  if (la->n == 0)
    return;
  ein_strbuf_printf(sb, "    { %s t_ = %s, c_ = 0;\n", g->idx, var);
  for (int i = la->n - 1; i >= 0; i--) {
    bool last = i == 0;
    if (!last) {
      ein_strbuf_printf(sb, "      c_ = t_ %% ");
      cg_emit_int(g, la->size[i]);
      ein_strbuf_printf(sb, "; t_ /= ");
      cg_emit_int(g, la->size[i]);
      ein_strbuf_printf(sb, ";\n");
    }
    for (int k = 0; k < 3; k++) {
      if (!(ops & (1u << k)) || la->st[i][k] == 0)
        continue;
      ein_strbuf_printf(sb, "      %s%d += %s * ", prefix, k,
                        last ? "t_" : "c_");
      cg_emit_int(g, la->st[i][k]);
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
void cg_emit_offsets_fn(gen *g, const char *name, const char *var,
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
  cg_emit_decompose(g, la, var, prefix, ops);
  ein_strbuf_printf(sb, "  }\n");
}

/* A map other than the product: grad_map.cuh's ein_map_NAME of the
 * sources loaded (a one-source map's twice). */
void cg_emit_map_op(gen *g, const char *x0, const char *x1) {
  static const char *const names[] = {
      "product", "equal", "div", "is_zero", "zero_to_one", "div_nonzero",
      "prod_mask", "conj"};
  const ein_step *s = g->s;
  int k = s->nsrc == 2;
  ein_strbuf_printf(g->sb, "ein_map_%s<%s>(", names[s->map],
                    cg_acc_type(g->acc));
  cg_emit_load(g->sb, s->src_dtype[0], g->acc, x0);
  ein_strbuf_printf(g->sb, ", ");
  cg_emit_load(g->sb, s->src_dtype[k], g->acc, k ? x1 : x0);
  ein_strbuf_printf(g->sb, ")");
}

/* The accumulator-typed value of the step from stored values x0 (and
 * x1), each an expression. */
void cg_emit_value_of(gen *g, const char *x0, const char *x1) {
  const ein_step *s = g->s;
  if (s->map != EIN_MAP_PRODUCT) {
    cg_emit_map_op(g, x0, x1);
    return;
  }
  if (s->nsrc == 2)
    ein_strbuf_printf(g->sb, "ein_mul(");
  cg_emit_load(g->sb, s->src_dtype[0], g->acc, x0);
  if (s->nsrc == 2) {
    ein_strbuf_printf(g->sb, ", ");
    cg_emit_load(g->sb, s->src_dtype[1], g->acc, x1);
    ein_strbuf_printf(g->sb, ")");
  }
}

/* The accumulator-typed value of the step at offsets o1 (and o2). */
void cg_emit_value(gen *g, const char *o1, const char *o2) {
  char x0[192], x1[192];
  snprintf(x0, sizeof x0, "s0[%s]", o1);
  snprintf(x1, sizeof x1, "s1[%s]", o2);
  cg_emit_value_of(g, x0, x1);
}

/* "acc = alpha * acc" and the 0/1 normalisation of any/all, in place. */
void cg_emit_post(gen *g, const char *v, bool normalise) {
  const ein_step *s = g->s;
  if (s->alpha != 1) {
    ein_strbuf_printf(g->sb, "    %s = (%s)(%s * ", v, cg_acc_type(g->acc), v);
    cg_emit_constant(g->sb, s->alpha, g->acc);
    ein_strbuf_printf(g->sb, ");\n");
  }
  if (normalise && (s->op == EIN_REDUCE_ANY || s->op == EIN_REDUCE_ALL))
    ein_strbuf_printf(g->sb, "    %s = (%s)(%s != 0);\n", v,
                      cg_acc_type(g->acc), v);
}

const char *cg_src_type(const ein_step *s, int k) {
  return k < s->nsrc ? cg_storage_type(s->src_dtype[k]) : "void";
}


/* d's type `dtype`, the sources' the step's stored types. */
operand_types cg_step_types(const ein_step *s, const char *dtype) {
  return (operand_types){dtype, cg_src_type(s, 0), cg_src_type(s, 1)};
}

/* The parameter list, typed per operand. */
void cg_emit_signature(gen *g, const char *name, unsigned threads,
                           operand_types t) {
  ein_strbuf_printf(g->sb,
                    "extern \"C\" __global__ void __launch_bounds__(%u) %s(\n"
                    "    %s *__restrict__ d, const %s *__restrict__ s0,\n"
                    "    const %s *__restrict__ s1) {\n",
                    threads, name, t.d, t.s0, t.s1);
}

int64_t cg_blocks_for(int64_t work, int64_t per_block) {
  int64_t b = (work + per_block - 1) / per_block;
  if (b < 1)
    b = 1;
  return b < MAX_BLOCKS ? b : MAX_BLOCKS;
}

/* ------------------------------------------------------------- kernels */


/* The struct's types and item count (the Step interface of map.cuh). */
void cg_emit_step_types(gen *g, const char *step, int64_t n,
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
  cg_emit_int(g, n);
  ein_strbuf_printf(g->sb, ";\n");
}

/* Closes the accumulator-typed expression the caller has written after
 * "acc v_ = " and returns it scaled, normalised and converted. */
void cg_emit_step_result(gen *g) {
  ein_strbuf_printf(g->sb, ";\n");
  if (g->s->kind != EIN_STEP_FILL)
    cg_emit_post(g, "v_", true);
  ein_strbuf_printf(g->sb, "    return ");
  cg_emit_store_value(g->sb, g->s->dst_dtype, "v_");
  ein_strbuf_printf(g->sb, ";\n  }\n");
}

/* value(s0, s1, o1, o2), or for the 2-byte vector form value_of(x0, x1)
 * and whether each source is contiguous along the vector. */
void cg_emit_step_value(gen *g, map_form form, const ein_loop_axes *la) {
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
                      s->nsrc == 2 ? "src1_t" : "int", cg_acc_type(g->acc));
    cg_emit_value_of(g, "x0", "x1");
    cg_emit_step_result(g);
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
  ein_strbuf_printf(sb, "    %s v_ = ", cg_acc_type(g->acc));
  if (s->kind == EIN_STEP_FILL)
    cg_emit_constant(sb, s->fill, g->acc);
  else
    cg_emit_value(g, "o1", "o2");
  cg_emit_step_result(g);
}


/* identity() and comb(a, b) of the step's reduction, in a Step struct
 * that has acc_t. */
void cg_emit_red_ops(gen *g) {
  ein_strbuf *sb = g->sb;
  ein_strbuf_printf(sb, "  static __device__ __forceinline__ acc_t "
                        "identity() { return ");
  cg_emit_identity(sb, g->s->op, g->acc);
  ein_strbuf_printf(sb, "; }\n  static __device__ __forceinline__ acc_t "
                        "comb(acc_t a, acc_t b) {\n    return ");
  cg_emit_combine(sb, g->s->op, g->acc);
  ein_strbuf_printf(sb, ";\n  }\n");
}
