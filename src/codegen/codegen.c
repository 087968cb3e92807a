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
 */
#include "alloc.h"
#include "codegen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop_axes.h"
#include "strbuf.h"

enum {
  MAP_BLOCK = 256,
  TILE = 32,        /* transpose tile edge */
  TILE_ROWS = 8,    /* threads per tile column */
  RED_OUT_LANES = 8 /* reduce_outer: lanes per output element */
};

/* Grid-stride loops make any grid correct; this bounds the grid. */
static const int64_t MAX_BLOCKS = 1 << 16;

typedef enum acc_kind { ACC_F32, ACC_F64, ACC_I64 } acc_kind;

const char *ein_kernel_kind_name(ein_kernel_kind kind) {
  switch (kind) {
  case EIN_KERNEL_NONE: return "none";
  case EIN_KERNEL_FILL: return "fill";
  case EIN_KERNEL_MAP: return "map";
  case EIN_KERNEL_TRANSPOSE: return "transpose";
  case EIN_KERNEL_REDUCE_INNER: return "reduce_inner";
  case EIN_KERNEL_REDUCE_OUTER: return "reduce_outer";
  }
  return "none";
}

uint64_t ein_fnv1a(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = seed;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

void ein_kernel_src_free(ein_kernel_src *k) {
  if (!k)
    return;
  ein_free(k->source);
  k->source = NULL;
  k->len = 0;
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
  default: return "unsigned char";
  }
}

/* The planner's accumulator (ein_step.acc_dtype) as a C type family. */
static acc_kind acc_of(ein_dtype dt) {
  return dt == EIN_DT_F64 ? ACC_F64 : dt == EIN_DT_F32 ? ACC_F32 : ACC_I64;
}

static const char *acc_type(acc_kind a) {
  return a == ACC_F32 ? "float" : a == ACC_F64 ? "double" : "long long";
}

/* Expression converting stored value `x` of dtype dt to the accumulator. */
static void emit_load(ein_strbuf *sb, ein_dtype dt, acc_kind acc,
                      const char *x) {
  if (dt == EIN_DT_F16)
    ein_strbuf_printf(sb, "(%s)ein_h2f(%s)", acc_type(acc), x);
  else if (dt == EIN_DT_BF16)
    ein_strbuf_printf(sb, "(%s)ein_b2f(%s)", acc_type(acc), x);
  else if (dt == EIN_DT_BOOL)
    ein_strbuf_printf(sb, "(%s)(%s != 0)", acc_type(acc), x);
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

/* A double as a CUDA C literal of the accumulator type. */
static void emit_constant(ein_strbuf *sb, double v, acc_kind acc) {
  if (acc == ACC_I64) {
    ein_strbuf_printf(sb, "(long long)%lldLL", (long long)v);
  } else if (isnan(v)) {
    ein_strbuf_printf(sb, acc == ACC_F32
                              ? "__int_as_float(0x7fc00000)"
                              : "__longlong_as_double(0x7ff8000000000000LL)");
  } else if (isinf(v)) {
    ein_strbuf_printf(sb, "%s%s", v < 0 ? "-" : "",
                      acc == ACC_F32
                          ? "__int_as_float(0x7f800000)"
                          : "__longlong_as_double(0x7ff0000000000000LL)");
  } else {
    char num[48];
    snprintf(num, sizeof num, acc == ACC_F32 ? "%.9g" : "%.17g", v);
    bool plain = strpbrk(num, ".e") == NULL;
    ein_strbuf_printf(sb, "%s%s%s", num, plain ? ".0" : "",
                      acc == ACC_F32 ? "f" : "");
  }
}

/* -------------------------------------------------------- the prelude */

/* src/codegen/prelude_*.h, embedded by scripts/embed.py at build time. */
extern const char ein_prelude_nvrtc[], ein_prelude_host[];

const char *ein_codegen_prelude(bool host) {
  return host ? ein_prelude_host : ein_prelude_nvrtc;
}

/* The combine function of a reduction, named ein_comb. Integer sums and
 * products wrap (computed unsigned); max and min let NaN win, as numpy. */
static void emit_combine(ein_strbuf *sb, ein_reduction op, acc_kind acc) {
  const char *t = acc_type(acc);
  ein_strbuf_printf(sb,
                    "static __device__ __forceinline__ %s ein_comb(%s a, %s b) "
                    "{\n  return ",
                    t, t, t);
  switch (op) {
  case EIN_REDUCE_SUM:
  case EIN_REDUCE_MEAN:
    ein_strbuf_printf(
        sb, acc == ACC_I64 ? "(long long)((ein_u64)a + (ein_u64)b)" : "a + b");
    break;
  case EIN_REDUCE_PROD:
    ein_strbuf_printf(
        sb, acc == ACC_I64 ? "(long long)((ein_u64)a * (ein_u64)b)" : "a * b");
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
  ein_strbuf_printf(sb, ";\n}\n");
}

/* The reduction's starting value; int64 extremes are written as hex
 * because a double cannot hold INT64_MAX exactly. */
static void emit_identity(ein_strbuf *sb, ein_reduction op, acc_kind acc) {
  switch (op) {
  case EIN_REDUCE_PROD:
  case EIN_REDUCE_ALL: emit_constant(sb, 1, acc); return;
  case EIN_REDUCE_MAX:
    if (acc == ACC_I64)
      ein_strbuf_printf(sb, "(long long)(-0x7fffffffffffffffLL - 1)");
    else
      emit_constant(sb, -INFINITY, acc);
    return;
  case EIN_REDUCE_MIN:
    if (acc == ACC_I64)
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
  acc_kind acc;
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

/* The accumulator-typed value of the step at offsets o1 (and o2). */
static void emit_value(gen *g, const char *o1, const char *o2) {
  const ein_step *s = g->s;
  char x[192];
  snprintf(x, sizeof x, "s0[%s]", o1);
  if (s->nsrc == 2)
    ein_strbuf_printf(g->sb, "ein_mul(");
  emit_load(g->sb, s->src_dtype[0], g->acc, x);
  if (s->nsrc == 2) {
    snprintf(x, sizeof x, "s1[%s]", o2);
    ein_strbuf_printf(g->sb, ", ");
    emit_load(g->sb, s->src_dtype[1], g->acc, x);
    ein_strbuf_printf(g->sb, ")");
  }
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

static void emit_store(gen *g, const char *where, const char *v) {
  ein_strbuf_printf(g->sb, "    d[%s] = ", where);
  emit_store_value(g->sb, g->s->dst_dtype, v);
  ein_strbuf_printf(g->sb, ";\n");
}

/* The parameter list, typed per operand. */
static void emit_signature(gen *g, const char *name, unsigned threads,
                           const char *dtype, const char *s0type,
                           const char *s1type) {
  ein_strbuf_printf(g->sb,
                    "extern \"C\" __global__ void __launch_bounds__(%u) %s(\n"
                    "    %s *__restrict__ d, const %s *__restrict__ s0,\n"
                    "    const %s *__restrict__ s1) {\n",
                    threads, name, dtype, s0type, s1type);
}

static const char *src_type(const ein_step *s, int k) {
  return k < s->nsrc ? storage_type(s->src_dtype[k]) : "void";
}

static int64_t blocks_for(int64_t work, int64_t per_block) {
  int64_t b = (work + per_block - 1) / per_block;
  if (b < 1)
    b = 1;
  return b < MAX_BLOCKS ? b : MAX_BLOCKS;
}

/* ------------------------------------------------------------- kernels */

/* A flat loop over the kept axes: fill or map. */
static void gen_map(gen *g, const char *name, const ein_loop_axes *kept,
                    const char *dtype, const char *s0type, const char *s1type,
                    bool raw_copy) {
  ein_strbuf *sb = g->sb;
  const ein_step *s = g->s;
  int64_t n = ein_loop_axes_volume(kept);
  emit_signature(g, name, MAP_BLOCK, dtype, s0type, s1type);
  ein_strbuf_printf(sb, "  for (%s i = (%s)blockIdx.x * %d + threadIdx.x; i < ",
                    g->idx, g->idx, MAP_BLOCK);
  emit_int(g, n);
  ein_strbuf_printf(sb, "; i += (%s)gridDim.x * %d) {\n", g->idx, MAP_BLOCK);
  ein_strbuf_printf(sb, "    %s o0 = 0, o1 = 0, o2 = 0;\n", g->idx);
  emit_decompose(g, kept, "i", "o", s->kind == EIN_STEP_FILL ? 1u : 7u);
  if (raw_copy) {
    ein_strbuf_printf(sb, "    d[o0] = s0[o1];\n  }\n}\n");
    return;
  }
  ein_strbuf_printf(sb, "    %s v_ = ", acc_type(g->acc));
  if (s->kind == EIN_STEP_FILL)
    emit_constant(sb, s->fill, g->acc);
  else
    emit_value(g, "o1", "o2");
  ein_strbuf_printf(sb, ";\n");
  if (s->kind != EIN_STEP_FILL)
    emit_post(g, "v_", true);
  emit_store(g, "o0", "v_");
  ein_strbuf_printf(sb, "  }\n}\n");
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

/* Permuting copy through a shared-memory tile. Axis a is dst's contiguous
 * axis, b the source's; `rest` holds the others. */
static void gen_transpose(gen *g, ein_kernel_src *k, int a, int b) {
  ein_strbuf *sb = g->sb;
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
  int64_t ta = (sa + TILE - 1) / TILE, tb = (sb_ + TILE - 1) / TILE;
  int64_t nrest = ein_loop_axes_volume(&rest);
  const char *dt = storage_type(s->dst_dtype);
  emit_signature(g, "ein_main", TILE * TILE_ROWS, dt, src_type(s, 0), "void");
  ein_strbuf_printf(sb, "  __shared__ %s tile[%d][%d];\n", dt, TILE, TILE + 1);
  ein_strbuf_printf(sb, "  const %s a0 = (%s)(blockIdx.x %% %lld) * %d;\n",
                    g->idx, g->idx, (long long)ta, TILE);
  ein_strbuf_printf(sb, "  const %s b0 = (%s)(blockIdx.x / %lld) * %d;\n",
                    g->idx, g->idx, (long long)ta, TILE);
  ein_strbuf_printf(sb, "  for (%s r = blockIdx.y; r < ", g->idx);
  emit_int(g, nrest);
  ein_strbuf_printf(sb, "; r += gridDim.y) {\n");
  ein_strbuf_printf(sb, "    %s o0 = 0, o1 = 0, o2 = 0;\n", g->idx);
  emit_decompose(g, &rest, "r", "o", 3u);
  ein_strbuf_printf(sb, "    (void)o2;\n");
  /* read rows along a, threads along b (the source's contiguous axis) */
  ein_strbuf_printf(sb,
                    "    for (int j = threadIdx.y; j < %d; j += %d) {\n"
                    "      %s a = a0 + j, b = b0 + threadIdx.x;\n"
                    "      if (a < ",
                    TILE, TILE_ROWS, g->idx);
  emit_int(g, sa);
  ein_strbuf_printf(sb, " && b < ");
  emit_int(g, sb_);
  ein_strbuf_printf(sb, ") {\n        %s v_ = ", acc_type(g->acc));
  char at[160];
  snprintf(at, sizeof at, "o1 + a * %lld%s + b * %lld%s", (long long)sta[1],
           g->wide ? "LL" : "", (long long)stb[1], g->wide ? "LL" : "");
  emit_value(g, at, "0");
  ein_strbuf_printf(sb, ";\n  ");
  emit_post(g, "v_", true);
  ein_strbuf_printf(sb, "        tile[j][threadIdx.x] = ");
  emit_store_value(sb, s->dst_dtype, "v_");
  ein_strbuf_printf(sb, ";\n      }\n    }\n    __syncthreads();\n");
  /* write rows along b, threads along a (dst's contiguous axis) */
  ein_strbuf_printf(sb,
                    "    for (int j = threadIdx.y; j < %d; j += %d) {\n"
                    "      %s b = b0 + j, a = a0 + threadIdx.x;\n"
                    "      if (a < ",
                    TILE, TILE_ROWS, g->idx);
  emit_int(g, sa);
  ein_strbuf_printf(sb, " && b < ");
  emit_int(g, sb_);
  ein_strbuf_printf(sb, ")\n        d[o0 + a * ");
  emit_int(g, sta[0]);
  ein_strbuf_printf(sb, " + b * ");
  emit_int(g, stb[0]);
  ein_strbuf_printf(sb, "] = tile[threadIdx.x][j];\n    }\n"
                        "    __syncthreads();\n  }\n}\n");
  k->grid[0] = (unsigned)(ta * tb);
  k->grid[1] = (unsigned)(nrest < 65535 ? nrest : 65535);
  k->grid[2] = 1;
  k->block[0] = TILE;
  k->block[1] = TILE_ROWS;
  k->block[2] = 1;
}

/* Reductions: lanes of a block cooperate on each output element. In the
 * inner form lanes run along x (a warp, or 256 threads, per element) and
 * combine with shuffles; in the outer form outputs run along x and
 * RED_OUT_LANES lanes along y combine through shared memory. */
static void gen_reduce(gen *g, ein_kernel_src *k, bool inner) {
  ein_strbuf *sb = g->sb;
  const ein_step *s = g->s;
  int64_t nout = ein_loop_axes_volume(&g->kept);
  int64_t nred = ein_loop_axes_volume(&g->red);
  int lanes = inner ? (nred >= 4096 && nout < 16384 ? 256 : 32) : RED_OUT_LANES;
  int per_block = inner ? 256 / lanes : 32; /* outputs per block */
  const char *at = acc_type(g->acc);
  emit_combine(sb, s->op, g->acc);
  emit_signature(g, "ein_main", 256, storage_type(s->dst_dtype), src_type(s, 0),
                 src_type(s, 1));
  const char *olane = inner ? "threadIdx.y" : "threadIdx.x";
  const char *rlane = inner ? "threadIdx.x" : "threadIdx.y";
  if (inner && lanes > 32)
    ein_strbuf_printf(sb, "  __shared__ %s part_[%d];\n", at, lanes / 32);
  if (!inner)
    ein_strbuf_printf(sb, "  __shared__ %s part_[%d][33];\n", at, lanes);
  ein_strbuf_printf(sb, "  for (%s ob = (%s)blockIdx.x * %d; ob < ", g->idx,
                    g->idx, per_block);
  emit_int(g, nout);
  ein_strbuf_printf(sb, "; ob += (%s)gridDim.x * %d) {\n", g->idx, per_block);
  ein_strbuf_printf(sb, "    %s o = ob + %s;\n    %s acc_ = ", g->idx, olane,
                    at);
  emit_identity(sb, s->op, g->acc);
  ein_strbuf_printf(sb, ";\n    %s b0 = 0, b1 = 0, b2 = 0;\n    if (o < ",
                    g->idx);
  emit_int(g, nout);
  ein_strbuf_printf(sb, ") {\n");
  emit_decompose(g, &g->kept, "o", "b", 7u);
  ein_strbuf_printf(sb, "    for (%s r = %s; r < ", g->idx, rlane);
  emit_int(g, nred);
  ein_strbuf_printf(sb, "; r += %d) {\n", lanes);
  ein_strbuf_printf(sb, "    %s o0 = 0, o1 = b1, o2 = b2;\n    (void)o0;\n",
                    g->idx);
  emit_decompose(g, &g->red, "r", "o", 6u);
  ein_strbuf_printf(sb, "    %s v_ = ", at);
  emit_value(g, "o1", "o2");
  ein_strbuf_printf(sb, ";\n    acc_ = ein_comb(acc_, v_);\n    }\n    }\n");
  if (inner) {
    ein_strbuf_printf(
        sb, "    for (int off = 16; off > 0; off >>= 1)\n"
            "      acc_ = ein_comb(acc_, __shfl_down_sync(0xffffffffu, "
            "acc_, off));\n");
    if (lanes > 32)
      ein_strbuf_printf(
          sb,
          "    if ((threadIdx.x & 31) == 0) part_[threadIdx.x >> 5] "
          "= acc_;\n"
          "    __syncthreads();\n"
          "    if (threadIdx.x == 0)\n"
          "      for (int w = 1; w < %d; w++) acc_ = ein_comb(acc_, "
          "part_[w]);\n"
          "    __syncthreads();\n",
          lanes / 32);
    ein_strbuf_printf(sb, "    if (threadIdx.x == 0 && o < ");
  } else {
    ein_strbuf_printf(
        sb,
        "    part_[threadIdx.y][threadIdx.x] = acc_;\n"
        "    __syncthreads();\n"
        "    if (threadIdx.y == 0)\n"
        "      for (int y = 1; y < %d; y++) acc_ = ein_comb(acc_, "
        "part_[y][threadIdx.x]);\n"
        "    __syncthreads();\n"
        "    if (threadIdx.y == 0 && o < ",
        lanes);
  }
  emit_int(g, nout);
  ein_strbuf_printf(sb, ") {\n");
  emit_post(g, "acc_", false);
  emit_store(g, "b0", "acc_");
  ein_strbuf_printf(sb, "    }\n  }\n}\n");
  k->grid[0] = (unsigned)blocks_for(nout, per_block);
  k->grid[1] = k->grid[2] = 1;
  k->block[0] = inner ? (unsigned)lanes : 32;
  k->block[1] = inner ? (unsigned)per_block : (unsigned)lanes;
  k->block[2] = 1;
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

/* The tile axes of a permuting copy, or false when a map serves. */
static bool transpose_axes(const gen *g, int *a, int *b) {
  const ein_step *s = g->s;
  const ein_loop_axes *k = &g->kept;
  if (s->kind != EIN_STEP_LOOP || s->nsrc != 1 || g->red.n != 0 || k->n < 2)
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
  *a = in;
  *b = best;
  return true;
}

ein_status ein_codegen_step(const ein_step *s, ein_kernel_src *out) {
  memset(out, 0, sizeof *out);
  if (s->kind == EIN_STEP_GEMM)
    return EIN_ERR_INTERNAL;
  gen g = {.s = s};
  bool empty;
  if (!ein_loop_axes_split(s, &g.kept, &g.red, &empty))
    return EIN_ERR_LIMIT;
  if (empty)
    return EIN_OK; /* EIN_KERNEL_NONE */
  g.acc = acc_of(s->acc_dtype);
  g.wide = needs_wide(&g);
  g.idx = g.wide ? "long long" : "int";
  ein_strbuf sb = {0};
  g.sb = &sb;

  /* Which kernel; the comment line says what it does for `einc cuda-src`. */
  int ta = -1, tb = -1;
  ein_loop_axes vec;
  if (s->kind == EIN_STEP_FILL)
    out->kind = EIN_KERNEL_FILL;
  else if (g.red.n == 0)
    out->kind =
        transpose_axes(&g, &ta, &tb) ? EIN_KERNEL_TRANSPOSE : EIN_KERNEL_MAP;
  else {
    int64_t kept_min = g.kept.n ? llabs(g.kept.st[g.kept.n - 1][1]) : INT64_MAX;
    int64_t red_min = llabs(g.red.st[g.red.n - 1][1]);
    out->kind = red_min < kept_min || !g.kept.n ? EIN_KERNEL_REDUCE_INNER
                                                : EIN_KERNEL_REDUCE_OUTER;
  }
  ein_strbuf_printf(&sb, "/* einc %s: %s", ein_kernel_kind_name(out->kind),
                    ein_dtype_name(s->dst_dtype));
  for (int i = 0; i < s->nsrc; i++)
    ein_strbuf_printf(&sb, "%s%s", i ? ", " : " <- ",
                      ein_dtype_name(s->src_dtype[i]));
  ein_strbuf_printf(&sb, "; %lld outputs",
                    (long long)ein_loop_axes_volume(&g.kept));
  if (g.red.n)
    ein_strbuf_printf(&sb, ", %s over %lld", ein_reduction_name(s->op),
                      (long long)ein_loop_axes_volume(&g.red));
  ein_strbuf_printf(&sb, " */\n");
  if (s->nsrc == 2) {
    const char *t = acc_type(g.acc);
    ein_strbuf_printf(
        &sb,
        "static __device__ __forceinline__ %s ein_mul(%s a, %s b) "
        "{ return %s; }\n",
        t, t, t,
        g.acc == ACC_I64 ? "(long long)((ein_u64)a * (ein_u64)b)" : "a * b");
  }

  switch (out->kind) {
  case EIN_KERNEL_FILL:
  case EIN_KERNEL_MAP: {
    int64_t n = ein_loop_axes_volume(&g.kept);
    gen_map(&g, "ein_main", &g.kept, storage_type(s->dst_dtype), src_type(s, 0),
            src_type(s, 1), false);
    out->grid[0] = (unsigned)blocks_for(n, MAP_BLOCK);
    out->grid[1] = out->grid[2] = 1;
    out->block[0] = MAP_BLOCK;
    out->block[1] = out->block[2] = 1;
    if (out->kind == EIN_KERNEL_MAP && vector_axes(&g, &vec)) {
      gen_map(&g, "ein_vec", &vec, "uint4", "uint4", "void", true);
      out->has_vec = true;
      out->grid_vec[0] =
          (unsigned)blocks_for(ein_loop_axes_volume(&vec), MAP_BLOCK);
      out->grid_vec[1] = out->grid_vec[2] = 1;
    }
    break;
  }
  case EIN_KERNEL_TRANSPOSE: gen_transpose(&g, out, ta, tb); break;
  case EIN_KERNEL_REDUCE_INNER: gen_reduce(&g, out, true); break;
  case EIN_KERNEL_REDUCE_OUTER: gen_reduce(&g, out, false); break;
  case EIN_KERNEL_NONE: break;
  }
  if (sb.failed) {
    ein_strbuf_free(&sb);
    return EIN_ERR_NO_MEMORY;
  }
  out->source = sb.data;
  out->len = sb.len;
  out->hash = ein_fnv1a(sb.data, sb.len, EIN_FNV_SEED);
  return EIN_OK;
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
