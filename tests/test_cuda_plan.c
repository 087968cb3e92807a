/*
 * test_cuda_plan.c - what the CUDA backend's plans promise about GEMMs,
 * checked on plans alone (no GPU, no NVRTC): every benchmark case of
 * bench/cases.tsv (both its GPU and its CPU shapes) and random expressions
 * from the evaluation tests' generator (gen_expr.h), in bf16, f16 and
 * f32 (with and without TF32), planned with the real CUDA caps and with
 * every contraction a GEMM (gemm_min_flops 0).
 *
 *   1. No GEMM step with output is lowered to a direct-contraction kernel:
 *      each runs on cuBLAS (issue 16: half chains used to fall back
 *      because an f32 intermediate met a bf16 operand).
 *   2. Each cuBLAS call's (A/B type, C type, compute type) is a row of
 *      cublasGemmEx's table, written out here rather than taken from the
 *      library, and matches the step's own dtypes.
 *   3. Half plans follow the storage rule (docs/design.md, "Half precision
 *      on cuBLAS"): a temporary a GEMM reads is in the half dtype; one a
 *      LOOP reads (other than a layout copy for a GEMM) is in f32.
 *   4. No kernel over 16 MiB runs on fewer blocks than two waves of 132
 *      SMs (issue 16), unless it is a split reduction's pass (pass 1 is
 *      sized by the split rule, pass 2 reads only the partials).
 *   5. The memory-bound bench cases on their GPU shapes get the access
 *      width issue 16 asks for (items 2 and 3): pool_mean's thread
 *      reduction 16-byte loads in every dtype; the 2-byte permutes,
 *      outer products and repeats at least 4-byte accesses (ACCESS).
 *
 * argv[1]: the path of bench/cases.tsv (meson passes it). EIN_CASES=N sets
 * the number of random seeds (default 6000).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "codegen.h"
#include "ctx_internal.h"
#include "cuda_program.h"
#include "ein.h"
#include "gen_expr.h"
#include "harness.h"
#include "plan.h"

enum { WAVE_BLOCKS = 2 * 132 };
#define WAVE_MIN_BYTES (16.0 * 1024 * 1024)

static int wave_checks, plans_checked, gemms_seen, gemm_steps_half_to_f32;

/* cublasGemmEx's rows einc may use (cuBLAS documentation, "cublasGemmEx"):
 * A and B share a type; half types accumulate in f32. */
static bool legal_row(ein_dtype ab, ein_dtype c, ein_gemm_compute ct) {
  if (ab == EIN_DT_BF16 || ab == EIN_DT_F16)
    return (c == ab || c == EIN_DT_F32) && ct == EIN_GEMM_COMPUTE_32F;
  if (ab == EIN_DT_F32)
    return c == EIN_DT_F32 &&
           (ct == EIN_GEMM_COMPUTE_32F || ct == EIN_GEMM_COMPUTE_32F_TF32);
  if (ab == EIN_DT_F64)
    return c == EIN_DT_F64 && ct == EIN_GEMM_COMPUTE_64F;
  return false;
}

/* Checks 1 and 2 for one GEMM step. */
static void check_gemm(const ein_plan_ir *ir, const ein_step *s,
                       const ein_cuda_step *cs, int i, const char *what) {
  if (s->gemm.m == 0 || s->gemm.n == 0)
    return; /* nothing to write: no call at all */
  gemms_seen++;
  CHECK(cs->cublas, "%s: step %d, a GEMM (%s,%s->%s), runs as a direct "
        "contraction kernel", what, i + 1, ein_dtype_name(s->src_dtype[0]),
        ein_dtype_name(s->src_dtype[1]), ein_dtype_name(s->dst_dtype));
  if (!cs->cublas)
    return;
  const ein_cublas_gemm *g = &cs->gemm;
  CHECK(legal_row(g->ab_dtype, g->c_dtype, g->compute),
        "%s: step %d: %s,%s->%s compute %s is no cublasGemmEx row", what,
        i + 1, ein_dtype_name(g->ab_dtype), ein_dtype_name(g->ab_dtype),
        ein_dtype_name(g->c_dtype), ein_gemm_compute_name(g->compute));
  CHECK(g->ab_dtype == s->src_dtype[0] && g->ab_dtype == s->src_dtype[1] &&
            g->c_dtype == s->dst_dtype,
        "%s: step %d: the call's types differ from the step's", what, i + 1);
  bool tf32 = ir->allow_tf32 && g->ab_dtype == EIN_DT_F32;
  CHECK((g->compute == EIN_GEMM_COMPUTE_32F_TF32) == tf32,
        "%s: step %d: compute %s; TF32 is for f32 GEMMs of plans that "
        "allow it", what, i + 1, ein_gemm_compute_name(g->compute));
  gemm_steps_half_to_f32 +=
      g->ab_dtype != g->c_dtype && g->c_dtype == EIN_DT_F32;
}

/* Check 3: the dtype of every temporary of a half plan, by its readers. */
static void check_storage(const ein_plan_ir *ir, const char *what) {
  if (ein_dtype_compute(ir->dtype) == ir->dtype)
    return;
  for (int i = 0; i < ir->nsteps; i++) {
    const ein_step *s = &ir->steps[i];
    for (int k = 0; k < s->nsrc; k++) {
      const ein_plan_buffer *b = &ir->buffers[s->src[k].buffer];
      if (b->kind != EIN_BUF_TEMP)
        continue;
      bool gemm = s->kind == EIN_STEP_GEMM;
      if (!gemm && s->role == EIN_ROLE_LAYOUT)
        continue; /* a copy on its way into a GEMM */
      ein_dtype want = gemm ? ir->dtype : EIN_DT_F32;
      CHECK(b->dtype == want, "%s: step %d (%s %s) reads a %s temporary; "
            "want %s", what, i + 1, ein_step_name(s),
            ein_step_role_name(s->role), ein_dtype_name(b->dtype),
            ein_dtype_name(want));
    }
  }
}

/* Check 4: a large kernel on enough blocks. */
static void check_waves(const ein_step *s, const ein_kernel_src *k, int i,
                        const char *what) {
  double bytes = s->bytes_read + s->bytes_written;
  if (k->kind == EIN_KERNEL_NONE || k->kind == EIN_KERNEL_REDUCE_SPLIT ||
      bytes <= WAVE_MIN_BYTES)
    return;
  unsigned blocks = k->grid[0] * k->grid[1] * k->grid[2];
  unsigned vec = k->has_vec ? k->grid_vec[0] * k->grid_vec[1] * k->grid_vec[2]
                            : blocks;
  unsigned fewest = blocks < vec ? blocks : vec;
  wave_checks++;
  CHECK(fewest >= WAVE_BLOCKS,
        "%s: step %d, %s kernel over %.0f MiB on %u "
        "blocks (< %d)",
        what, i + 1, ein_kernel_kind_name(k->kind), bytes / (1024 * 1024),
        fewest, WAVE_BLOCKS);
}

/* Check 5: per bench case and dtype, the kernel kind that carries the
 * data and the fewest bytes per access its vector variant must move. */
static const struct access_rule {
  const char *name;
  ein_dtype dt;
  ein_kernel_kind kind;
  unsigned min_bytes;
} ACCESS[] = {
    {"pool_mean", EIN_DT_BF16, EIN_KERNEL_REDUCE_THREAD, 16},
    {"pool_mean", EIN_DT_F16, EIN_KERNEL_REDUCE_THREAD, 16},
    {"pool_mean", EIN_DT_F32, EIN_KERNEL_REDUCE_THREAD, 16},
    {"nchw_nhwc", EIN_DT_BF16, EIN_KERNEL_TRANSPOSE, 4},
    {"nchw_nhwc", EIN_DT_F16, EIN_KERNEL_TRANSPOSE, 4},
    {"outer", EIN_DT_BF16, EIN_KERNEL_MAP, 16},
    {"outer", EIN_DT_F16, EIN_KERNEL_MAP, 16},
    {"repeat_kv", EIN_DT_BF16, EIN_KERNEL_MAP, 16},
    {"repeat_kv", EIN_DT_F16, EIN_KERNEL_MAP, 16},
    {"patchify", EIN_DT_BF16, EIN_KERNEL_MAP, 8},
    {"patchify", EIN_DT_F16, EIN_KERNEL_MAP, 8},
    {"patchify", EIN_DT_F32, EIN_KERNEL_MAP, 8},
};
static int access_checks;

static void check_access(const ein_cuda_program *prog, const char *name,
                         ein_dtype dt, const char *what) {
  for (size_t r = 0; r < sizeof ACCESS / sizeof ACCESS[0]; r++) {
    const struct access_rule *a = &ACCESS[r];
    if (strcmp(a->name, name) != 0 || a->dt != dt)
      continue;
    access_checks++;
    const ein_kernel_src *k = NULL;
    for (int i = 0; i < prog->nsteps && !k; i++)
      if (prog->steps[i].kernel.kind == a->kind)
        k = &prog->steps[i].kernel;
    CHECK(k != NULL, "%s: no %s kernel", what, ein_kernel_kind_name(a->kind));
    if (k)
      CHECK(k->has_vec && k->vec_bytes >= a->min_bytes,
            "%s: %s kernel moves %u bytes per access (vector variant: %s), "
            "want >= %u",
            what, ein_kernel_kind_name(k->kind),
            k->has_vec ? k->vec_bytes : (unsigned)ein_dtype_size(dt),
            k->has_vec ? "yes" : "none", a->min_bytes);
  }
}

static void check_plan(const ein_plan *plan, const char *what,
                       bool report_waves) {
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  CHECK(prog && prog->nsteps == ir->nsteps, "%s: no CUDA program", what);
  if (!prog)
    return;
  plans_checked++;
  for (int i = 0; i < ir->nsteps; i++) {
    const ein_step *s = &ir->steps[i];
    const ein_cuda_step *cs = &prog->steps[i];
    if (s->kind == EIN_STEP_GEMM)
      check_gemm(ir, s, cs, i, what);
    else if (report_waves)
      check_waves(s, &cs->kernel, i, what);
  }
  check_storage(ir, what);
}

/* The tensors of a case on device 0 (no data: planning reads none). `perm`
 * stores operand dims in reversed order (Fortran layout) when set. */
static void make_tensors(int n, const int *ndims, const int64_t (*shapes)[EIN_MAX_DIMS],
                         ein_dtype dt, const bool *fortran, DLTensor *t,
                         int64_t (*strides)[EIN_MAX_DIMS], const DLTensor **p) {
  for (int i = 0; i < n; i++) {
    memset(&t[i], 0, sizeof t[i]);
    t[i].device = (DLDevice){kDLCUDA, 0};
    t[i].ndim = ndims[i];
    t[i].shape = (int64_t *)shapes[i];
    t[i].dtype = ein_dtype_to_dl(dt);
    if (fortran && fortran[i]) {
      int64_t s = 1;
      for (int d = 0; d < ndims[i]; d++) {
        strides[i][d] = s;
        s *= shapes[i][d] ? shapes[i][d] : 1;
      }
      t[i].strides = strides[i];
    }
    p[i] = &t[i];
  }
}

/* --------------------------------------------------- bench/cases.tsv */

/* The "einc flags" column ("-D h=16 --reduce mean") as cases.h options
 * ("h=16,reduce=mean"). */
static void flags_to_opts(const char *flags, char *out, size_t cap) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", flags);
  out[0] = 0;
  size_t w = 0;
  bool reduce = false;
  for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
    if (strcmp(tok, "-D") == 0 || strcmp(tok, "--reduce") == 0) {
      reduce = strcmp(tok, "--reduce") == 0;
      continue;
    }
    w += (size_t)snprintf(out + w, cap - w, "%s%s%s", w ? "," : "",
                          reduce ? "reduce=" : "", tok);
    reduce = false;
  }
}

static const ein_dtype DTYPES[] = {EIN_DT_BF16, EIN_DT_F16, EIN_DT_F32};

/* Plans one case in every dtype, with and without allow_tf32 (which only
 * f32 GEMMs may take up), on ctx. */
static void plan_case(ein_ctx *ctx, const char *name, const char *expr,
                      const char *shapes, const char *opts, bool waves) {
  static case_input in;
  memset(&in, 0, sizeof in);
  parse_case_shapes(shapes, &in);
  for (int v = 0; v < 6; v++) {
    ein_dtype dt = DTYPES[v / 2];
    bool tf32 = v % 2;
    parse_case_opts(opts, &in);
    in.options.backend = EIN_BACKEND_CUDA;
    in.options.allow_tf32 = tf32;
    DLTensor t[TEST_MAX_OPERANDS];
    const DLTensor *p[TEST_MAX_OPERANDS];
    int64_t strides[TEST_MAX_OPERANDS][EIN_MAX_DIMS];
    make_tensors(in.n, in.ndims, (const int64_t(*)[EIN_MAX_DIMS])in.dims, dt,
                 NULL, t, strides, p);
    char what[512];
    snprintf(what, sizeof what, "%s '%s' %s %s%s", name, expr, shapes,
             ein_dtype_name(dt), tf32 ? " tf32" : "");
    ein_plan *plan;
    ein_status st = ein_plan_create(ctx, expr, p, in.n, NULL, &in.options,
                                    &plan);
    CHECK(st == EIN_OK, "%s: %s", what, ein_last_error(ctx)->message);
    if (st)
      continue;
    check_plan(plan, what, waves && !tf32);
    if (waves && !tf32)
      check_access(ein_plan_cuda_program(plan), name, dt, what);
    ein_plan_destroy(plan);
  }
}

/* Every row of the table: name, expression, GPU shapes, CPU shapes, flags
 * (and the CPU dtypes, not read here). */
static int bench_cases(ein_ctx *const ctxs[2], const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "cannot open %s", path);
  if (!f)
    return 0;
  char line[1024];
  int rows = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (line[0] == '#' || line[0] == 0)
      continue;
    char *col[6] = {line, NULL, NULL, NULL, "", ""};
    for (int c = 1; c < 6; c++) {
      char *tab = col[c - 1] ? strchr(col[c - 1], '\t') : NULL;
      if (!tab)
        break;
      *tab = 0;
      col[c] = tab + 1;
    }
    CHECK(col[3] != NULL, "%s: a row of %s without 4 columns", col[0], path);
    if (!col[3])
      continue;
    char opts[256];
    flags_to_opts(col[4], opts, sizeof opts);
    for (int k = 0; k < 2; k++) {
      if (strcmp(col[2], "-") != 0) /* '-': a CPU-only case */
        plan_case(ctxs[k], col[0], col[1], col[2], opts, k == 0);
      plan_case(ctxs[k], col[0], col[1], col[3], opts, false);
    }
    rows++;
  }
  fclose(f);
  return rows;
}

/* ------------------------------------------------ random expressions */

/* One generated case in one dtype; false when it cannot be planned for a
 * reason the generator invites (an unbindable split, max over nothing). */
static bool random_case(ein_ctx *ctx, uint64_t seed, ein_dtype dt) {
  gen_seed(seed);
  gen_case c;
  generate(&c);
  c.dt = dt;
  bool fortran[TEST_MAX_OPERANDS];
  for (int i = 0; i < c.n; i++)
    fortran[i] = rnd_int(2);
  const int64_t *shp[TEST_MAX_OPERANDS];
  for (int i = 0; i < c.n; i++)
    shp[i] = c.shapes[i];
  ein_binding *b;
  if (ein_bind_shapes(ctx, c.expr, shp, c.ndims, c.n, &c.opt, &b))
    return false;
  ein_binding_destroy(b);
  DLTensor t[TEST_MAX_OPERANDS];
  const DLTensor *p[TEST_MAX_OPERANDS];
  int64_t strides[TEST_MAX_OPERANDS][EIN_MAX_DIMS];
  make_tensors(c.n, c.ndims, (const int64_t(*)[EIN_MAX_DIMS])c.shapes, dt,
               fortran, t, strides, p);
  c.opt.backend = EIN_BACKEND_CUDA;
  c.opt.allow_tf32 = rnd_int(2);
  ein_plan *plan;
  ein_status st = ein_plan_create(ctx, c.expr, p, c.n, NULL, &c.opt, &plan);
  if (st == EIN_ERR_BAD_REDUCTION)
    return false;
  char what[1200];
  snprintf(what, sizeof what, "seed %llu %s as %s%s",
           (unsigned long long)seed, c.desc, ein_dtype_name(dt),
           c.opt.allow_tf32 ? " tf32" : "");
  CHECK(st == EIN_OK, "%s: %s", what, ein_last_error(ctx)->message);
  if (st)
    return false;
  check_plan(plan, what, false);
  ein_plan_destroy(plan);
  return true;
}

static int random_cases(ein_ctx *const ctxs[2], int count, uint64_t seed0) {
  int planned = 0;
  for (int k = 0; k < count; k++) {
    large_cases = k % 4 == 3;
    for (int d = 0; d < 3; d++)
      planned += random_case(ctxs[k % 2], seed0 + (uint64_t)k, DTYPES[d]);
  }
  return planned;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "bench/cases.tsv";
  const char *cenv = getenv("EIN_CASES");
  int count = cenv ? atoi(cenv) : 6000;
  /* The real caps, and caps that make every contraction with a K a GEMM
   * (the generator's sizes are far below the real threshold). */
  ein_ctx *ctx, *gemm_ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  REQUIRE_OK(ein_ctx_create(&gemm_ctx));
  gemm_ctx->caps[EIN_BACKEND_CUDA] = *ein_cuda_caps();
  gemm_ctx->caps[EIN_BACKEND_CUDA].gemm_min_flops = 0;
  gemm_ctx->caps_set[EIN_BACKEND_CUDA] = true;
  ein_ctx *const ctxs[2] = {ctx, gemm_ctx};
  int rows = bench_cases(ctxs, path);
  printf("bench cases: %d rows of %s\n", rows, path);
  CHECK(rows >= 10, "only %d rows read from %s", rows, path);
  int planned = random_cases(ctxs, count, 20261122);
  printf("random cases: %d plans from %d seeds\n", planned, count);
  CHECK(count < 100 || planned >= count, "only %d random plans", planned);
  printf("%d plans, %d GEMMs with output (%d half->f32), %d kernels over "
         "16 MiB checked for %d blocks\n",
         plans_checked, gemms_seen, gemm_steps_half_to_f32, wave_checks,
         WAVE_BLOCKS);
  CHECK(gemms_seen > 0, "no GEMM planned at all");
  CHECK(wave_checks > 0, "no kernel over 16 MiB planned: check 4 idle");
  printf("%d access-width checks (bench cases on GPU shapes)\n",
         access_checks);
  CHECK(access_checks == (int)(sizeof ACCESS / sizeof ACCESS[0]),
        "%d access-width checks, want one per rule", access_checks);
  ein_ctx_destroy(ctx);
  ein_ctx_destroy(gemm_ctx);
  return test_summary("cuda_plan");
}
