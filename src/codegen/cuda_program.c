/*
 * cuda_program.c - per-step decisions of the CUDA backend (cuda_program.h).
 */
#include "alloc.h"
#include "cuda_program.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_gemm.h"
#include "loop_axes.h"

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

bool ein_cublas_types_legal(ein_dtype ab, ein_dtype c,
                            ein_gemm_compute compute) {
  switch (ab) {
  case EIN_DT_F16:
  case EIN_DT_BF16:
    return (c == ab || c == EIN_DT_F32) && compute == EIN_GEMM_COMPUTE_32F;
  case EIN_DT_F32:
    return c == EIN_DT_F32 && (compute == EIN_GEMM_COMPUTE_32F ||
                               compute == EIN_GEMM_COMPUTE_32F_TF32);
  case EIN_DT_F64:
    return c == EIN_DT_F64 && compute == EIN_GEMM_COMPUTE_64F;
  case EIN_DT_C64: /* CUDA_C_32F, as cublasCgemm */
    return c == EIN_DT_C64 && compute == EIN_GEMM_COMPUTE_32F;
  case EIN_DT_C128: /* CUDA_C_64F, as cublasZgemm */
    return c == EIN_DT_C128 && compute == EIN_GEMM_COMPUTE_64F;
  default:
    return false;
  }
}

const char *ein_gemm_compute_name(ein_gemm_compute compute) {
  switch (compute) {
  case EIN_GEMM_COMPUTE_32F: return "32F";
  case EIN_GEMM_COMPUTE_32F_TF32: return "32F_TF32";
  case EIN_GEMM_COMPUTE_64F: return "64F";
  }
  return "?";
}

/* The step's types and the compute type cuBLAS runs them with: f64 and
 * c128 in f64, f32 in f32 or TF32 when allowed, c64 in f32 (TF32 is for
 * f32 alone), f16/bf16 accumulated in f32.
 * False when A and B differ or the row is not legal. */
static bool cublas_types(const ein_step *s, bool allow_tf32,
                         ein_cublas_gemm *out) {
  if (s->src_dtype[0] != s->src_dtype[1])
    return false;
  out->ab_dtype = s->src_dtype[0];
  out->c_dtype = s->dst_dtype;
  bool f64 = out->ab_dtype == EIN_DT_F64 || out->ab_dtype == EIN_DT_C128;
  out->compute = f64 ? EIN_GEMM_COMPUTE_64F
                 : allow_tf32 && out->ab_dtype == EIN_DT_F32
                     ? EIN_GEMM_COMPUTE_32F_TF32
                     : EIN_GEMM_COMPUTE_32F;
  return ein_cublas_types_legal(out->ab_dtype, out->c_dtype, out->compute);
}

bool ein_cublas_map(const ein_step *s, bool allow_tf32, ein_cublas_gemm *out) {
  memset(out, 0, sizeof *out);
  if (!cublas_types(s, allow_tf32, out))
    return false;
  const ein_gemm *g = &s->gemm;
  ein_gemm_call call;
  if (!ein_gemm_rowmajor(g, &call))
    return false;
  /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
   * call's operands swap once more. */
  out->a_is_step_a = call.swap;
  out->trans_a = call.tb;
  out->trans_b = call.ta;
  out->m = call.n;
  out->n = call.m;
  out->k = call.k;
  out->lda = call.ldb;
  out->ldb = call.lda;
  out->ldc = call.ldc;
  if (!fits_int(out->m) || !fits_int(out->n) || !fits_int(out->k) ||
      !fits_int(out->lda) || !fits_int(out->ldb) || !fits_int(out->ldc))
    return false;
  /* Batch axes with strides in cuBLAS's operand order (C, A, B). */
  ein_loop_axes b = {0};
  for (int i = 0; i < g->nbatch; i++) {
    const ein_loop_axis *ax = &g->batch[i];
    if (ax->size == 1)
      continue;
    if (ax->stride[0] == 0)
      return false; /* C would be written twice */
    if (b.n == EIN_LOOP_MAXAX)
      return false;
    b.size[b.n] = ax->size;
    b.st[b.n][0] = ax->stride[0];
    b.st[b.n][1] = out->a_is_step_a ? ax->stride[1] : ax->stride[2];
    b.st[b.n][2] = out->a_is_step_a ? ax->stride[2] : ax->stride[1];
    b.n++;
  }
  ein_loop_axes_sort(&b, 0);
  ein_loop_axes_fuse(&b);
  out->count = 1;
  out->loops = b;
  if (b.n > 0) { /* the largest batch axis is cuBLAS's; the rest loop */
    int big = 0;
    for (int i = 1; i < b.n; i++)
      if (b.size[i] > b.size[big])
        big = i;
    if (!fits_int(b.size[big]))
      return false;
    int64_t st[3];
    ein_loop_axes_take(&out->loops, big, &out->count, st);
    out->stride_c = st[0];
    out->stride_a = st[1];
    out->stride_b = st[2];
  }
  return true;
}

bool ein_cublaslt_map(const ein_step *s, ein_cublas_gemm *out) {
  memset(out, 0, sizeof *out);
  const ein_gemm *g = &s->gemm;
  if (!g->scaled || !ein_fp8_gemm_fits(g, (int64_t)ein_dtype_size(s->dst_dtype)))
    return false;
  out->lt_fp8 = true;
  out->ab_dtype = s->src_dtype[1];
  out->b_dtype = s->src_dtype[0];
  out->c_dtype = s->dst_dtype;
  out->compute = EIN_GEMM_COMPUTE_32F;
  out->trans_a = true;
  out->m = g->n, out->n = g->m, out->k = g->k;
  out->lda = g->b_ns, out->ldb = g->a_ms, out->ldc = g->c_ms;
  out->scale_input[0] = g->scale_input[1];
  out->scale_input[1] = g->scale_input[0];
  out->count = g->nbatch ? g->batch[0].size : 1;
  if (g->nbatch) {
    out->stride_c = g->batch[0].stride[0];
    out->stride_b = g->batch[0].stride[1];
    out->stride_a = g->batch[0].stride[2];
  }
  return fits_int(out->m) && fits_int(out->n) && fits_int(out->k) &&
         fits_int(out->count);
}

const char *ein_cublas_call_name(const ein_cublas_gemm *g) {
  return g->lt_fp8 ? "cublasLtMatmul" : "cublasGemmStridedBatchedEx";
}

bool ein_cublas_pointer_array(const ein_cublas_gemm *g) {
  return g->loops.n > 0 &&
         ein_loop_axes_volume(&g->loops) >= EIN_CUBLAS_POINTER_ARRAY_MIN;
}

const void **ein_cublas_pointer_arrays(const ein_cublas_gemm *g, char *c,
                                       const char *a, const char *b,
                                       int64_t *total, ein_error_rec *err) {
  int64_t outer = ein_loop_axes_volume(&g->loops);
  *total = outer * g->count;
  if (*total > INT32_MAX) {
    ein_fail_limit(err, "a GEMM batch of %lld exceeds cuBLAS's int count",
                   (long long)*total);
    return NULL;
  }
  const void **ptr = ein_malloc((size_t)*total * 3 * sizeof *ptr);
  if (!ptr) {
    ein_fail_memory(err, "out of memory for %lld GEMM pointers",
                    (long long)*total);
    return NULL;
  }
  int64_t csz = (int64_t)ein_dtype_size(g->c_dtype),
          absz = (int64_t)ein_dtype_size(g->ab_dtype), n = 0, t = *total;
  for (int64_t i = 0; i < outer; i++) {
    int64_t off[3];
    ein_loop_axes_offsets(&g->loops, i, off);
    for (int64_t j = 0; j < g->count; j++, n++) {
      ptr[n] = c + (off[0] + j * g->stride_c) * csz;
      ptr[t + n] = a + (off[1] + j * g->stride_a) * absz;
      ptr[2 * t + n] = b + (off[2] + j * g->stride_b) * absz;
    }
  }
  return ptr;
}

void ein_cuda_program_free(void *program) {
  ein_cuda_program *p = program;
  if (!p)
    return;
  for (int i = 0; i < p->nsteps; i++) {
    ein_kernel_src_free(&p->steps[i].kernel);
    ein_kernel_src_free(&p->steps[i].finish);
  }
  ein_free(p->steps);
  ein_free(p);
}

/* The kernels of a LOOP or FILL step, or of a GEMM step cuBLAS cannot
 * express (as the equivalent direct contraction). */
static ein_status step_kernels(const ein_step *s, ein_cuda_step *cs) {
  ein_step_kernels k;
  ein_status st;
  if (s->kind == EIN_STEP_GEMM) {
    ein_loop_axis *axes =
        ein_malloc(sizeof *axes * (size_t)(s->gemm.nbatch + 3));
    if (!axes)
      return EIN_ERR_NO_MEMORY;
    ein_step loop;
    ein_gemm_as_loop(s, &loop, axes);
    st = ein_codegen_step(&loop, &k);
    ein_free(axes);
  } else {
    st = ein_codegen_step(s, &k);
  }
  if (st)
    return st;
  cs->kernel = k.main;
  cs->finish = k.finish;
  cs->scratch_bytes = k.scratch_bytes;
  return EIN_OK;
}

ein_status ein_cuda_program_build(const ein_plan_ir *plan,
                                  ein_cuda_program **out) {
  *out = NULL;
  ein_cuda_program *p = ein_calloc(1, sizeof *p);
  if (!p)
    return EIN_ERR_NO_MEMORY;
  p->steps =
      ein_calloc((size_t)(plan->nsteps ? plan->nsteps : 1), sizeof *p->steps);
  if (!p->steps) {
    ein_free(p);
    return EIN_ERR_NO_MEMORY;
  }
  p->nsteps = plan->nsteps;
  for (int i = 0; i < plan->nsteps; i++) {
    const ein_step *s = &plan->steps[i];
    ein_cuda_step *cs = &p->steps[i];
    ein_status st = EIN_OK;
    if (s->kind == EIN_STEP_GEMM && (s->gemm.m == 0 || s->gemm.n == 0))
      continue; /* nothing to write */
    if (s->kind == EIN_STEP_GEMM && s->gemm.scaled) {
      /* no kernel fallback: a direct contraction knows no scales */
      cs->cublas = ein_cublaslt_map(s, &cs->gemm);
      st = cs->cublas ? EIN_OK : EIN_ERR_INTERNAL;
    } else if (s->kind == EIN_STEP_GEMM) {
      cs->cublas = ein_cublas_map(s, plan->allow_tf32, &cs->gemm);
    }
    if (!cs->cublas && !st)
      st = step_kernels(s, cs);
    if (st) {
      ein_cuda_program_free(p);
      return st;
    }
    if (cs->scratch_bytes > p->scratch_bytes)
      p->scratch_bytes = cs->scratch_bytes;
  }
  *out = p;
  return EIN_OK;
}

/* The vector variant in words: "16-byte" (a map's copies or 8 halves a
 * thread), "4-byte pairs" (the 2-byte transpose), "16-byte loads, 4
 * outputs a thread" (reduce_thread). */
static const char *vec_form(const ein_kernel_src *k, char *buf, size_t cap) {
  if (k->kind == EIN_KERNEL_TRANSPOSE)
    snprintf(buf, cap, "%u-byte pairs", k->vec_bytes);
  else if (k->kind == EIN_KERNEL_REDUCE_THREAD)
    snprintf(buf, cap, "%u-byte loads, %u output%s a thread", k->vec_bytes,
             k->vec_items, k->vec_items == 1 ? "" : "s");
  else if (k->vec_staged)
    snprintf(buf, cap, "%u-byte staged", k->vec_bytes);
  else
    snprintf(buf, cap, "%u-byte", k->vec_bytes);
  return buf;
}

/* "kernel map grid (...) block (...)", with the vector variant and a
 * split reduction's pass 2. */
static void describe_kernels(const ein_cuda_step *cs, const ein_step *s,
                             ein_strbuf *sb) {
  const ein_kernel_src *k = &cs->kernel;
  bool split = cs->finish.kind != EIN_KERNEL_NONE;
  ein_strbuf_printf(sb, "kernel %s%s%s grid (%u,%u,%u) block (%u,%u,%u)",
                    ein_kernel_kind_name(k->kind),
                    s->kind == EIN_STEP_GEMM ? " (direct contraction)" : "",
                    split ? " pass 1" : "", k->grid[0], k->grid[1], k->grid[2],
                    k->block[0], k->block[1], k->block[2]);
  char form[64];
  if (k->staged_src)
    ein_strbuf_printf(sb, ", source %u staged in shared memory (%u bytes)",
                      k->staged_src, k->staged_bytes);
  if (k->lanes_moved)
    ein_strbuf_printf(sb, ", lanes off dst's contiguous axis");
  if (k->has_vec)
    ein_strbuf_printf(sb, ", %s variant grid (%u,%u,%u)",
                      vec_form(k, form, sizeof form), k->grid_vec[0],
                      k->grid_vec[1], k->grid_vec[2]);
  if (split) {
    const ein_kernel_src *f = &cs->finish;
    ein_strbuf_printf(sb,
                      " + pass 2 %s grid (%u,%u,%u) block (%u,%u,%u), "
                      "scratch %lld bytes",
                      ein_kernel_kind_name(f->kind), f->grid[0], f->grid[1],
                      f->grid[2], f->block[0], f->block[1], f->block[2],
                      (long long)cs->scratch_bytes);
  }
  ein_strbuf_printf(sb, "\n");
}

void ein_cuda_program_describe(const ein_cuda_program *prog,
                               const ein_plan_ir *plan, ein_strbuf *sb) {
  ein_strbuf_printf(sb, "cuda:\n");
  for (int i = 0; i < prog->nsteps; i++) {
    const ein_cuda_step *cs = &prog->steps[i];
    const ein_step *s = &plan->steps[i];
    ein_strbuf_printf(sb, "  %2d  ", i + 1);
    if (cs->cublas) {
      const ein_cublas_gemm *g = &cs->gemm;
      ein_strbuf_printf(sb,
                        "%s %s,%s->%s compute %s "
                        "%s%s m=%lld n=%lld k=%lld lda=%lld ldb=%lld "
                        "ldc=%lld batch=%lld",
                        ein_cublas_call_name(g), ein_dtype_name(g->ab_dtype),
                        ein_dtype_name(g->lt_fp8 ? g->b_dtype : g->ab_dtype),
                        ein_dtype_name(g->c_dtype),
                        ein_gemm_compute_name(g->compute),
                        g->trans_a ? "T" : "N",
                        g->trans_b ? "T" : "N", (long long)g->m,
                        (long long)g->n, (long long)g->k, (long long)g->lda,
                        (long long)g->ldb, (long long)g->ldc,
                        (long long)g->count);
      if (g->loops.n)
        ein_strbuf_printf(sb, " x %lld (%s)",
                          (long long)ein_loop_axes_volume(&g->loops),
                          ein_cublas_pointer_array(g) ? "pointer-array batched"
                                                      : "host loop");
      if (g->lt_fp8) /* inputs counted from 1, as reports do */
        ein_strbuf_printf(sb, " scales: inputs %d, %d (f32)",
                          g->scale_input[0] + 1, g->scale_input[1] + 1);
      ein_strbuf_printf(sb, "\n");
    } else if (cs->kernel.kind == EIN_KERNEL_NONE) {
      ein_strbuf_printf(sb, "(nothing to do: empty)\n");
    } else {
      describe_kernels(cs, s, sb);
    }
  }
}

ein_status ein_cuda_prepare(const ein_plan_ir *plan, void **program,
                            ein_error_rec *err) {
  ein_cuda_program *prog;
  ein_status st = ein_cuda_program_build(plan, &prog);
  *program = st ? NULL : prog;
  if (st)
    ein_fail(err, st,
             st == EIN_ERR_NO_MEMORY ? "out of memory generating CUDA kernels"
             : st == EIN_ERR_INTERNAL
                 ? "an FP8 GEMM step breaks cuBLASLt's FP8 layout rules "
                   "(fp8_gemm.h should have copied its operands)"
                 : "a step has more axes than a generated kernel takes");
  return st;
}

void ein_cuda_describe(const ein_plan_ir *plan, const void *program,
                       ein_strbuf *sb) {
  ein_cuda_program_describe(program, plan, sb);
}

const struct ein_cuda_program *ein_cuda_program_of(const void *program) {
  return program;
}

/* {"call":"cublasGemmStridedBatchedEx",...} (or "cublasLtMatmul"): the
 * fields of the text line,
 * with the loops around the call and their form. */
static void json_cublas(const ein_cublas_gemm *g, ein_strbuf *sb) {
  const char *ab = ein_dtype_name(g->ab_dtype);
  const char *form = !g->loops.n                   ? "none"
                     : ein_cublas_pointer_array(g) ? "pointer-array batched"
                                                   : "host loop";
  ein_strbuf_printf(
      sb,
      "{\"call\":\"%s\",\"a_dtype\":\"%s\","
      "\"b_dtype\":\"%s\",\"c_dtype\":\"%s\",\"compute\":\"%s\","
      "\"trans_a\":%s,\"trans_b\":%s,\"m\":%lld,\"n\":%lld,\"k\":%lld,"
      "\"lda\":%lld,\"ldb\":%lld,\"ldc\":%lld,\"stride_a\":%lld,"
      "\"stride_b\":%lld,\"stride_c\":%lld,\"batch\":%lld,\"loops\":%lld,"
      "\"loops_form\":\"%s\"}",
      ein_cublas_call_name(g), ab,
      g->lt_fp8 ? ein_dtype_name(g->b_dtype) : ab, ein_dtype_name(g->c_dtype),
      ein_gemm_compute_name(g->compute),
      g->trans_a ? "true" : "false", g->trans_b ? "true" : "false",
      (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->lda,
      (long long)g->ldb, (long long)g->ldc, (long long)g->stride_a,
      (long long)g->stride_b, (long long)g->stride_c, (long long)g->count,
      (long long)(g->loops.n ? ein_loop_axes_volume(&g->loops) : 1), form);
}

/* One kernel launch: kind, pass, grid, block, reduce_outer's staged
 * source and lanes (outer_layout.h), and the vector variant. */
static void json_kernel(const ein_kernel_src *k, int pass, ein_strbuf *sb) {
  ein_strbuf_printf(sb,
                    "{\"kind\":\"%s\",\"pass\":%d,\"grid\":[%u,%u,%u],"
                    "\"block\":[%u,%u,%u],\"staged_source\":%u,"
                    "\"staged_bytes\":%u,\"lanes_moved\":%s,"
                    "\"vector_variant\":",
                    ein_kernel_kind_name(k->kind), pass, k->grid[0],
                    k->grid[1], k->grid[2], k->block[0], k->block[1],
                    k->block[2], k->staged_src, k->staged_bytes,
                    k->lanes_moved ? "true" : "false");
  char form[64];
  if (k->has_vec)
    ein_strbuf_printf(
        sb,
        "{\"form\":\"%s\",\"access_bytes\":%u,\"per_thread\":%u,"
        "\"grid\":[%u,%u,%u]}}",
        vec_form(k, form, sizeof form), k->vec_bytes, k->vec_items,
        k->grid_vec[0], k->grid_vec[1], k->grid_vec[2]);
  else
    ein_strbuf_printf(sb, "null}");
}

void ein_cuda_describe_step_json(const ein_plan_ir *plan, const void *program,
                                 int step, ein_strbuf *sb) {
  const ein_cuda_step *cs = &((const ein_cuda_program *)program)->steps[step];
  ein_strbuf_printf(sb, "\"cuda\":{\"cublas\":");
  if (cs->cublas)
    json_cublas(&cs->gemm, sb);
  else
    ein_strbuf_printf(sb, "null");
  ein_strbuf_printf(sb, ",\"kernels\":[");
  if (!cs->cublas && cs->kernel.kind != EIN_KERNEL_NONE) {
    json_kernel(&cs->kernel, 1, sb);
    if (cs->finish.kind != EIN_KERNEL_NONE) {
      ein_strbuf_printf(sb, ",");
      json_kernel(&cs->finish, 2, sb);
    }
  }
  /* empty: a GEMM with m or n of 0, which writes nothing */
  ein_strbuf_printf(sb, "],\"direct_contraction\":%s,\"scratch_bytes\":%lld,"
                        "\"empty\":%s},",
                    !cs->cublas && plan->steps[step].kind == EIN_STEP_GEMM
                        ? "true" : "false",
                    (long long)cs->scratch_bytes,
                    !cs->cublas && cs->kernel.kind == EIN_KERNEL_NONE
                        ? "true" : "false");
}
