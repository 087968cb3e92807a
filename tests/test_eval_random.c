/*
 * test_eval_random.c - random expressions evaluated by einc and by the
 * naive reference (reference.h), compared with the tolerance of their
 * dtype. Each case draws: 1 to 5 operands, named axes in random orders,
 * splits on inputs and merges on the output, diagonals, an ellipsis with
 * broadcasting, repeats, every reduction, every dtype, odd and size-0
 * axes, strided (permuted, sliced, offset) inputs and outputs, the numpy
 * dialect. EIN_SEED=N reproduces a run; EIN_CASES=N sets the count
 * (default 1500). A failing case prints its seed, expression and shapes.
 * The same generator's cases run once more in c64 and c128
 * (EIN_COMPLEX_CASES, default 400, and EIN_COMPLEX_LARGE_CASES, default
 * 40, of the large sizes) against the reference in complex double; max, min, any and all there must fail with a dtype error.
 *
 * With --cuda the same cases run on GPU 0 (inputs and outputs copied to
 * device buffers with the same layouts); without a GPU that run reports
 * itself skipped (exit 77).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctx_internal.h"
#include "codegen.h"
#include "cuda_program.h"
#include "ein.h"
#include "gen_expr.h"
#include "harness.h"
#include "reference.h"

typedef struct tensor {
  DLTensor t;
  int64_t shape[EIN_MAX_DIMS], strides[EIN_MAX_DIMS];
  void *alloc;
  size_t alloc_bytes;
} tensor;

/* --backend cuda|emu (or --cuda): the cases run on that backend's device
 * 0; CPU otherwise. */
static ein_backend_kind device_kind = EIN_BACKEND_CPU;

/* What the device runs, counted over every evaluation (CUDA-program
 * backends): kernels by kind, their 16-byte variants, cuBLAS calls by
 * form and by (A/B, C) type. The emulated device must see each. */
enum { COV_KINDS = EIN_KERNEL_KINDS };
static struct {
  long kernel[COV_KINDS], vec, strided, host_loop, pointer_array;
  long gemm_type[EIN_DT_COUNT][EIN_DT_COUNT];
  long dtype[EIN_DT_COUNT];
} cov;

static void count_program(ein_ctx *ctx, const char *expr,
                          const DLTensor *const *ins, int n,
                          const DLTensor *out, const ein_options *o) {
  ein_plan *plan;
  if (ein_plan_create(ctx, expr, ins, n, out, o, &plan) != EIN_OK) return;
  const ein_cuda_program *prog = ein_plan_cuda_program(plan);
  const ein_plan_ir *ir = ein_plan_ir_of(plan);
  for (int i = 0; prog && i < prog->nsteps; i++) {
    const ein_cuda_step *cs = &prog->steps[i];
    cov.dtype[ir->steps[i].dst_dtype]++;
    if (cs->cublas) {
      const ein_cublas_gemm *g = &cs->gemm;
      cov.gemm_type[g->ab_dtype][g->c_dtype]++;
      if (ein_cublas_pointer_array(g))
        cov.pointer_array++;
      else if (g->loops.n)
        cov.host_loop++;
      else
        cov.strided++;
    } else {
      cov.kernel[cs->kernel.kind]++;
      cov.kernel[cs->finish.kind]++;
      cov.vec += cs->kernel.has_vec;
    }
  }
  ein_plan_destroy(plan);
}

/* Prints the coverage and checks that a long run saw every kind. */
static void check_coverage(int cases) {
  printf("device coverage:");
  for (int k = 1; k < COV_KINDS; k++)
    printf(" %s %ld,", ein_kernel_kind_name((ein_kernel_kind)k),
           cov.kernel[k]);
  printf(" 16-byte variants %ld, cuBLAS strided %ld, host loop %ld, "
         "pointer array %ld\n  cuBLAS types:",
         cov.vec, cov.strided, cov.host_loop, cov.pointer_array);
  for (int a = 0; a < EIN_DT_COUNT; a++)
    for (int c = 0; c < EIN_DT_COUNT; c++)
      if (cov.gemm_type[a][c])
        printf(" %s->%s %ld", ein_dtype_name((ein_dtype)a),
               ein_dtype_name((ein_dtype)c), cov.gemm_type[a][c]);
  printf("\n");
  if (cases < 1000) return; /* short runs: no claim */
  for (int k = 1; k < COV_KINDS; k++)
    CHECK(cov.kernel[k] > 0, "no %s kernel ran",
          ein_kernel_kind_name((ein_kernel_kind)k));
  CHECK(cov.vec > 0 && cov.strided > 0 && cov.host_loop > 0 &&
            cov.pointer_array > 0,
        "a form of kernel or cuBLAS call never ran");
  static const ein_dtype types[][2] = {
      {EIN_DT_F32, EIN_DT_F32}, {EIN_DT_F64, EIN_DT_F64},
      {EIN_DT_F16, EIN_DT_F16}, {EIN_DT_BF16, EIN_DT_BF16},
      {EIN_DT_F16, EIN_DT_F32}, {EIN_DT_BF16, EIN_DT_F32},
      {EIN_DT_C64, EIN_DT_C64}, {EIN_DT_C128, EIN_DT_C128}};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    CHECK(cov.gemm_type[types[t][0]][types[t][1]] > 0,
          "no %s->%s cuBLAS call ran", ein_dtype_name(types[t][0]),
          ein_dtype_name(types[t][1]));
  for (int d = 0; d < EIN_DT_COUNT; d++)
    if (d == EIN_DT_F16 || d == EIN_DT_BF16 || d == EIN_DT_F32 ||
        d == EIN_DT_F64 || d == EIN_DT_I32 || d == EIN_DT_I64 ||
        d == EIN_DT_I8 || d == EIN_DT_U8 || d == EIN_DT_BOOL ||
        d == EIN_DT_C64 || d == EIN_DT_C128)
      CHECK(cov.dtype[d] > 0, "no %s step ran", ein_dtype_name((ein_dtype)d));
}

/* A tensor of `shape` whose layout is random: dims stored in a permuted
 * order, some dims with a gap (a slice with step 2), a random offset. */
static void make_tensor(tensor *x, ein_dtype dt, int ndim,
                        const int64_t *shape, bool strided) {
  memset(x, 0, sizeof *x);
  int perm[EIN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) perm[d] = d;
  if (strided)
    for (int d = ndim - 1; d > 0; d--) {
      int j = rnd_int(d + 1), t = perm[d];
      perm[d] = perm[j];
      perm[j] = t;
    }
  int64_t s = 1;
  for (int k = ndim - 1; k >= 0; k--) {
    int d = perm[k];
    int step = strided && rnd_int(4) == 0 ? 2 : 1;
    x->strides[d] = s * step;
    s *= (shape[d] > 0 ? shape[d] : 1) * step;
  }
  int64_t offset = strided ? rnd_int(3) : 0;
  size_t esz = ein_dtype_size(dt);
  x->alloc_bytes = (size_t)(s + offset + 1) * esz;
  x->alloc = calloc((size_t)(s + offset + 1), esz);
  for (int d = 0; d < ndim; d++) x->shape[d] = shape[d];
  x->t.data = x->alloc;
  x->t.byte_offset = (uint64_t)offset * esz;
  x->t.device = (DLDevice){kDLCPU, 0};
  x->t.ndim = ndim;
  x->t.dtype = ein_dtype_to_dl(dt);
  x->t.shape = x->shape;
  x->t.strides = strided || rnd_int(2) ? x->strides : NULL;
  if (!x->t.strides) { /* compact strides, for the reference */
    int64_t c = 1;
    for (int d = ndim - 1; d >= 0; d--) {
      x->strides[d] = c;
      c *= shape[d] > 0 ? shape[d] : 1;
    }
  }
}

static int64_t numel(const tensor *x) {
  int64_t n = 1;
  for (int d = 0; d < x->t.ndim; d++) n *= x->shape[d];
  return n;
}

/* Fills every element the tensor's view covers with random values. */
static void fill_random(tensor *x, ein_dtype dt, ein_reduction r) {
  int64_t n = numel(x), idx[EIN_MAX_DIMS] = {0};
  char *base = (char *)x->t.data + x->t.byte_offset;
  for (int64_t e = 0; e < n; e++) {
    int64_t off = 0;
    for (int d = 0; d < x->t.ndim; d++) off += idx[d] * x->strides[d];
    double v;
    if (ein_dtype_is_complex(dt)) { /* prod: magnitudes near 1 */
      double mag = r == EIN_REDUCE_PROD ? 0.6 + 0.8 * rnd_unit() : rnd_unit();
      double arg = 6.283185307179586 * rnd_unit();
      ref_store_complex(dt, base, off, CMPLX(mag * cos(arg), mag * sin(arg)));
      goto next;
    }
    if (dt == EIN_DT_BOOL)
      v = rnd_int(3) != 0;
    else if (!ein_dtype_is_float(dt))
      v = rnd_int(7) - (ein_dtype_is_signed_int(dt) ? 3 : 0);
    else if (r == EIN_REDUCE_PROD)
      v = (0.5 + rnd_unit()) * (rnd_int(2) ? 1 : -1);
    else
      v = 2 * rnd_unit() - 1;
    ref_store(dt, base, off, v);
  next:
    for (int d = x->t.ndim - 1; d >= 0; d--) {
      if (++idx[d] < x->shape[d]) break;
      idx[d] = 0;
    }
  }
}


static double tolerance(ein_dtype dt) {
  switch (dt) {
  case EIN_DT_F64: case EIN_DT_C128: return 1e-12;
  case EIN_DT_F32: case EIN_DT_C64: return 1e-5;
  case EIN_DT_F16: case EIN_DT_BF16: return 2e-2;
  default: return 0;
  }
}

/* The case on the device backend: every tensor copied into a device
 * buffer with the same layout, evaluated, and the output's buffer copied
 * back. */
static ein_status eval_on_device(ein_ctx *ctx, const gen_case *c, tensor *in,
                                 tensor *out) {
  DLTensor dev[TEST_MAX_OPERANDS + 1];
  const DLTensor *ptrs[TEST_MAX_OPERANDS];
  void *buf[TEST_MAX_OPERANDS + 1] = {0};
  ein_backend_kind k = device_kind;
  ein_status st = EIN_OK;
  for (int i = 0; i <= c->n && !st; i++) {
    tensor *x = i < c->n ? &in[i] : out;
    st = ein_device_alloc(ctx, k, 0, x->alloc_bytes, &buf[i]);
    if (!st)
      st = ein_device_copy(ctx, k, 0, buf[i], x->alloc, x->alloc_bytes,
                           EIN_COPY_HOST_TO_DEVICE);
    dev[i] = x->t;
    dev[i].data = buf[i];
    dev[i].device = ein_backend_dl_device(k, 0);
    if (i < c->n) ptrs[i] = &dev[i];
  }
  if (!st) st = ein_eval(ctx, c->expr, ptrs, c->n, &dev[c->n], &c->opt);
  if (!st) count_program(ctx, c->expr, ptrs, c->n, &dev[c->n], &c->opt);
  if (!st)
    st = ein_device_copy(ctx, k, 0, out->alloc, buf[c->n], out->alloc_bytes,
                         EIN_COPY_DEVICE_TO_HOST);
  if (st == EIN_ERR_BACKEND || st == EIN_ERR_DEVICE ||
      st == EIN_ERR_INTERNAL || st == EIN_ERR_DEVICE_MEMORY) {
    char msg[2048];
    ein_error_format(ein_last_error(ctx), msg, sizeof msg);
    fprintf(stderr, "%s: %s\n", ein_backend_name(k), msg);
  }
  for (int i = 0; i <= c->n; i++) ein_device_free(ctx, k, 0, buf[i]);
  return st;
}

/* Binds, evaluates and compares case c; layouts and values are drawn from
 * the generator's stream, which the caller has seeded. */
/* The relative error of the last case check_case compared (-1: none). */
static double last_rel_err;

static int check_case(ein_ctx *ctx, gen_case c, uint64_t seed, int *skipped) {
  last_rel_err = -1;
  const int64_t *shp[TEST_MAX_OPERANDS];
  for (int i = 0; i < c.n; i++) shp[i] = c.shapes[i];
  ein_binding *b;
  /* Bind first: cases the generator made invalid (a split the binder
   * cannot solve, a length that contradicts) are skipped, not failures;
   * test_shapes covers binding. */
  if (ein_bind_shapes(ctx, c.expr, shp, c.ndims, c.n, &c.opt, &b)) {
    (*skipped)++;
    return 0;
  }
  const ein_problem *p = ein_binding_problem(b);
  double vol = 1;
  for (int a = 0; a < p->naxes; a++) vol *= (double)(p->axes[a].size ? p->axes[a].size : 1);
  if (vol > 4e5) {
    ein_binding_destroy(b);
    (*skipped)++;
    return 0;
  }
  tensor in[TEST_MAX_OPERANDS], out;
  const DLTensor *ins[TEST_MAX_OPERANDS];
  for (int i = 0; i < c.n; i++) {
    make_tensor(&in[i], c.dt, c.ndims[i], c.shapes[i], rnd_int(2));
    fill_random(&in[i], c.dt, c.opt.reduction);
    ins[i] = &in[i].t;
  }
  int ond = ein_binding_output_ndim(b);
  make_tensor(&out, c.dt, ond, ein_binding_output_shape(b), rnd_int(3) == 0);
  int64_t on = numel(&out);
  bool cplx = ein_dtype_is_complex(c.dt);
  /* want holds doubles, or complex doubles for c64 and c128 */
  void *want = malloc(sizeof(double complex) * (size_t)(on ? on : 1));
  int ref = cplx ? ref_eval_complex(p, ins, want, on)
                 : ref_eval(p, ins, want, on);
  ein_status st = device_kind != EIN_BACKEND_CPU ? eval_on_device(ctx, &c, in, &out)
                        : ein_eval(ctx, c.expr, ins, c.n, &out.t, &c.opt);
  int failed = 0;
  if (cplx && ref < 0) {
    /* max, min, any, all: no order on complex numbers */
    const char *name = ein_reduction_name(c.opt.reduction);
    if (st != EIN_ERR_DTYPE || !strstr(ein_last_error(ctx)->message, name)) {
      fprintf(stderr, "FAIL seed %llu: %s: want a dtype error naming '%s', "
              "got %s\n", (unsigned long long)seed, c.desc, name,
              ein_status_name(st));
      failed = 1;
    }
  } else if (ref < 0) {
    if (st != EIN_ERR_BAD_REDUCTION) {
      fprintf(stderr, "FAIL seed %llu: %s: want 'bad reduction', got %s\n",
              (unsigned long long)seed, c.desc, ein_status_name(st));
      failed = 1;
    }
  } else if (st) {
    fprintf(stderr, "FAIL seed %llu: %s: %s: %s\n", (unsigned long long)seed,
            c.desc, ein_status_name(st), ein_last_error(ctx)->message);
    failed = 1;
  } else {
    /* Compare in the output's layout: err norm / ref norm. */
    double err = 0, norm = 0, worst = 0;
    int64_t idx[EIN_MAX_DIMS] = {0}, worst_at = -1;
    char *base = (char *)out.t.data + out.t.byte_offset;
    bool nan_mismatch = false;
    for (int64_t e = 0; e < on; e++) {
      int64_t off = 0;
      for (int d = 0; d < ond; d++) off += idx[d] * out.strides[d];
      double complex got, wr;
      if (cplx) {
        got = ref_load_complex(c.dt, base, off);
        wr = ((double complex *)want)[e];
      } else {
        got = ref_load(c.dt, base, off);
        wr = ((double *)want)[e];
      }
      if (!cplx && !ein_dtype_is_float(c.dt)) { /* integers wrap to the dtype */
        int64_t cell = 0;
        ref_store(c.dt, &cell, 0, creal(wr));
        wr = ref_load(c.dt, &cell, 0);
      }
      for (int part = 0; part < 2; part++) {
        double g = part ? cimag(got) : creal(got);
        double w = part ? cimag(wr) : creal(wr);
        if (isnan(w) || isnan(g)) {
          nan_mismatch |= isnan(w) != isnan(g);
        } else if (isinf(w) || isinf(g)) {
          nan_mismatch |= w != g;
        } else {
          double dlt = fabs(g - w);
          err += dlt * dlt;
          norm += w * w;
          if (dlt > worst) {
            worst = dlt;
            worst_at = e;
          }
        }
      }
      for (int d = ond - 1; d >= 0; d--) {
        if (++idx[d] < out.shape[d]) break;
        idx[d] = 0;
      }
    }
    double rel = norm > 0 ? sqrt(err / norm) : sqrt(err);
    last_rel_err = nan_mismatch ? -1 : rel;
    if (nan_mismatch || rel > tolerance(c.dt)) {
      fprintf(stderr,
              "FAIL seed %llu: %s: relative error %.3g (tolerance %.1g), "
              "worst element %lld off by %.3g%s\n",
              (unsigned long long)seed, c.desc, rel, tolerance(c.dt),
              (long long)worst_at, worst, nan_mismatch ? ", NaN/Inf mismatch" : "");
      failed = 1;
    }
  }
  free(want);
  for (int i = 0; i < c.n; i++) free(in[i].alloc);
  free(out.alloc);
  ein_binding_destroy(b);
  return failed;
}

/* Set for the complex pass: every case's dtype becomes c64 (even seeds)
 * or c128 (odd ones), whatever the generator drew. */
static bool force_complex;

static int run_case(ein_ctx *ctx, uint64_t seed, int *skipped) {
  gen_seed(seed);
  gen_case c;
  generate(&c);
  if (force_complex) {
    c.dt = seed % 2 ? EIN_DT_C128 : EIN_DT_C64;
    size_t w = strlen(c.desc);
    snprintf(c.desc + w, sizeof c.desc - w, " (as %s)", ein_dtype_name(c.dt));
  }
  return check_case(ctx, c, seed, skipped);
}

/* Half precision against torch's rounding model (issue 16): each f16/bf16
 * case runs once as planned and once with every intermediate rounded to
 * the half dtype (round_intermediates: what torch.einsum does, with f32
 * accumulation in both), on the same path, inputs and layouts. einc's
 * error may exceed that model's by 10% plus a quarter of the dtype's unit
 * roundoff: where both round at the same points (a single step), only
 * accumulation order separates them, and one output's final rounding can
 * flip either way. Over all such cases einc's total error must be no
 * larger than the model's. */
static void compare_rounding(ein_ctx *const ctxs[2],
                             ein_ctx *const torch_ctxs[2], uint64_t seed0,
                             int count) {
  int n = 0, worse = 0, skipped = 0;
  double sum_einc = 0, sum_torch = 0, worst = 0;
  for (int k = 0; k < count; k++) {
    uint64_t seed = seed0 + (uint64_t)k;
    gen_case c;
    gen_seed(seed);
    generate(&c);
    if (c.dt != EIN_DT_F16 && c.dt != EIN_DT_BF16) continue;
    for (int g = 0; g < 2; g++) {
      double e[2];
      for (int t = 0; t < 2; t++) {
        gen_seed(seed);
        generate(&c);
        check_case(t ? torch_ctxs[g] : ctxs[g], c, seed, &skipped);
        e[t] = last_rel_err;
      }
      if (e[0] < 0 || e[1] < 0) continue;
      double u = c.dt == EIN_DT_BF16 ? 0x1p-8 : 0x1p-11;
      n++;
      sum_einc += e[0];
      sum_torch += e[1];
      if (e[0] > 1.1 * e[1] + 0.25 * u) {
        worse++;
        fprintf(stderr, "rounding: seed %llu %s: einc %.3g, torch model %.3g\n",
                (unsigned long long)seed, c.desc, e[0], e[1]);
      }
      if (e[1] > 0 && e[0] / e[1] > worst) worst = e[0] / e[1];
    }
  }
  printf("half precision vs torch's rounding model: %d evaluations, mean "
         "error einc %.3g, model %.3g (ratio %.3f), largest ratio %.2f\n",
         n, n ? sum_einc / n : 0, n ? sum_torch / n : 0,
         sum_torch > 0 ? sum_einc / sum_torch : 0, worst);
  CHECK(worse == 0, "%d half cases past torch's rounding model's error + 10%%",
        worse);
  CHECK(sum_einc <= sum_torch, "einc's total half error %.4g exceeds the "
        "model's %.4g", sum_einc, sum_torch);
}

/* Named cases: the benchmark suite's expressions (bench/cases.tsv) at test
 * sizes, and shapes the generator rarely makes (GEMM batches that neither
 * collapse nor stay short: cuBLAS's pointer-array form). Each runs in
 * every float dtype, on the CPU and once more on a device backend. */
static const struct named_case {
  const char *name, *expr, *shapes, *lengths, *reduce;
} named_cases[] = {
    {"gemm", "m k, k n -> m n", "24x40 40x16", "", NULL},
    {"attn_scores", "b h i d, b h j d -> b h i j", "2x3x8x16 2x3x8x16", "",
     NULL},
    {"attn_merge", "b h i j, b h j d -> b i (h d)", "2x3x8x8 2x3x8x16", "",
     NULL},
    {"qkv_split", "b s e, e (h d) -> b h s d", "2x8x32 32x32", "h=4", NULL},
    {"gqa_scores", "b g r i d, b g j d -> b g r i j", "2x2x2x8x16 2x2x8x16",
     "", NULL},
    {"bilinear", "b i, i j k, b j -> b k", "16x6 6x5x7 16x5", "", NULL},
    {"moe", "e c d, e d f -> e c f", "3x8x16 3x16x24", "", NULL},
    {"outer", "b i, b j -> b i j", "4x33 4x17", "", NULL},
    {"tn5", "e a, f b, a b c d, g c, h d -> e f g h",
     "4x4 4x4 4x4x4x4 4x4 4x4", "", NULL},
    {"nchw_nhwc", "b c h w -> b h w c", "2x16x8x8", "", NULL},
    {"patchify", "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "2x3x16x16",
     "p1=4 p2=4", NULL},
    {"pool_mean", "b c (h h2) (w w2) -> b c h w", "2x4x16x16", "h2=2 w2=2",
     "mean"},
    {"rowsum", "b s d -> b s", "4x16x300", "", "sum"},
    {"colmax", "b s d -> d", "4x300x16", "", "max"},
    {"diag", "b i i -> b i", "4x32x32", "", NULL},
    {"repeat_kv", "b h s d -> b (h r) s d", "2x2x8x16", "r=4", NULL},
    /* the kernel paths of issue 16: a split reduction in the inner layout
     * (to a scalar, and a mean over few long rows), the 2-byte vector map
     * (the outer product's inner axis a multiple of 8) */
    {"sum_all", "a b ->", "300x200", "", "sum"},
    {"long_rows_mean", "a b -> a", "3x20000", "", "mean"},
    {"outer_vec", "b i, b j -> b i j", "4x33 4x64", "", NULL},
    /* reduce_thread's vector variant: 16-byte rows of a 2x2 window, and
     * (g r) groups of 4 (8 bytes in half types where g is odd) */
    {"pool_vec", "b c (h h2) (w w2) -> b c h w", "2x3x8x16", "h2=2 w2=2",
     "mean"},
    {"group4_vec", "b (g r) -> b g", "6x36", "r=4", "max"},
    {"pointer_array", "a b c i k, c b a k j -> a b c i j",
     "9x9x10x5x7 10x9x9x7x6", "", NULL},
    /* issue 18: elementwise-product-then-sum forms and tiny batched
     * matrices (the CPU's tiny-matrix kernel: k 3 and 5 unrolled or not,
     * C written transposed), a quadratic form */
    {"bmm3", "b i j, b j k -> b i k", "300x3x3 300x3x3", "", NULL},
    {"bmm_t", "b i j, b k j -> b k i", "200x4x5 200x6x5", "", NULL},
    {"trace_prod", "i j, j i ->", "40x40 40x40", "", NULL},
    {"chscale", "b c h w, c -> b c h w", "2x5x6x7 5", "", NULL},
    {"rowdot", "b i, b i -> b", "30x40 30x40", "", NULL},
    {"quadform", "i j, j k, i k -> i", "20x30 30x25 20x25", "", NULL},
    /* issue 18's copy rows at sizes that reach their fast paths: three
     * channels interleaved over a p2 of two blocks of 8 and a tail, long
     * prefetched diagonals, outer-product rows past a ROW chunk */
    {"patchify_vec", "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", "2x3x6x38",
     "p1=3 p2=19", NULL},
    {"diag_long", "b i i -> b i", "2x100x100", "", NULL},
    {"outer_long", "b i, b j -> b i j", "2x5 2x1100", "", NULL},
    /* issue 18's CPU row kernels: a max over rows longer than their
     * 512-value blocks, windows of 2 (the pair kernel: 13 results a row)
     * and of 3, a mean over long columns */
    {"spatial_max", "b c h w -> b c", "2x3x37x29", "", "max"},
    {"pool_max", "b c (h h2) (w w2) -> b c h w", "2x3x10x26", "h2=2 w2=2",
     "max"},
    {"pool3_min", "b (h h2) (w w2) -> b h w", "2x9x33", "h2=3 w2=3", "min"},
    {"seq_mean", "b s d -> b d", "3x700x21", "", "mean"},
    /* issue 34 item 5: reductions over a transposed plane of under 8
     * terms fold them in a transpose's tile (odd edges, a max's
     * identity); from 8 terms the planes are past these sizes
     * (eval_cli_test.py checks one) */
    {"sum_transposed", "b j i -> i j", "4x40x36", "", "sum"},
    {"max_transposed", "b j i -> i j", "5x33x70", "", "max"},
    /* issue 34 item 5: reduce_outer's layouts (outer_layout.h), tn5's
     * three kinds of step at 16 terms (tn5 itself is past these sizes;
     * eval_cli_test.py checks it): a 16x16 factor staged with 16 outputs
     * a warp row, staged with 32, the lanes moved off dst's contiguous
     * axis; then odd sizes with a staged operand and with moved lanes */
    {"tn5_step2", "c d, h d -> c h", "64x16 16x16", "", NULL},
    {"tn5_step3", "x c h, g c -> x h g", "8x16x16 16x16", "", NULL},
    {"tn5_step4", "x b h g, f b -> x f g h", "2x16x16x16 16x16", "", NULL},
    {"staged_odd", "c d, h d -> c h", "37x12 13x12", "", NULL},
    {"lanes_moved", "b h g, f b -> f g h", "10x9x13 7x10", "", NULL},
    /* issue 34 item 5: transposes of odd pitch; from RUNS_MIN_TILES
     * tiles of 64 the 2-byte ones move runs of 64 in aligned windows
     * (transpose.cuh's ein_transpose_runs; the first stays under it):
     * edge tiles on a and b with an odd rest stride, a thin source (runs
     * of 5 read, of 64 and 40 written), odd strides on a rest axis only */
    {"odd_transpose", "i j -> j i", "37x129", "", NULL},
    {"odd_transpose_runs", "b i j -> b j i", "50x37x129", "", NULL},
    {"odd_transpose_thin", "b i j -> b j i", "40x1000x5", "", NULL},
    {"odd_transpose3", "a b c -> c b a", "33x70x97", "", NULL},
};

/* Fills c from a named case in dtype dt. */
static void named_case_fill(const struct named_case *nc, ein_dtype dt,
                            gen_case *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->expr, sizeof c->expr, "%s", nc->expr);
  snprintf(c->desc, sizeof c->desc, "%s '%s' %s %s %s", nc->name, nc->expr,
           nc->shapes, nc->lengths, ein_dtype_name(dt));
  c->dt = dt;
  const char *p = nc->shapes;
  while (*p) {
    int d = 0;
    char *end;
    do {
      c->shapes[c->n][d++] = strtoll(p, &end, 10);
      p = *end == 'x' ? end + 1 : end;
    } while (*end == 'x');
    c->ndims[c->n++] = d;
    while (*p == ' ') p++;
  }
  static char names_buf[4][8];
  p = nc->lengths;
  for (int l = 0; *p && l < 4; l++) {
    size_t k = strcspn(p, "=");
    snprintf(names_buf[l], sizeof names_buf[l], "%.*s", (int)k, p);
    c->len[l].name = names_buf[l];
    c->len[l].size = strtoll(p + k + 1, (char **)&p, 10);
    c->opt.nlengths = l + 1;
    while (*p == ' ') p++;
  }
  c->opt.lengths = c->len;
  if (nc->reduce) REQUIRE_OK(ein_reduction_parse(nc->reduce, &c->opt.reduction));
}

/* Every named case in every float and complex dtype on both contexts
 * (colmax in complex checks the dtype error). */
static void run_named_cases(ein_ctx *const ctxs[2]) {
  static const ein_dtype dts[] = {EIN_DT_F32, EIN_DT_F64, EIN_DT_F16,
                                  EIN_DT_BF16, EIN_DT_C64, EIN_DT_C128};
  int n = 0, skipped = 0;
  for (size_t i = 0; i < sizeof named_cases / sizeof named_cases[0]; i++)
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
      for (int k = 0; k < 2; k++) {
        gen_case c;
        named_case_fill(&named_cases[i], dts[d], &c);
        uint64_t seed = 7000000 + i * 16 + d * 2 + (uint64_t)k;
        gen_seed(seed);
        int before = skipped;
        int f = check_case(ctxs[k], c, seed, &skipped);
        CHECK(!f && skipped == before, "named case %s in %s (%s)",
              named_cases[i].name, ein_dtype_name(dts[d]),
              k ? "every contraction a GEMM" : "default caps");
        n++;
      }
  printf("named cases: %d evaluations\n", n);
}

/* Large cases take their seeds from seed0 + LARGE_SEED_OFFSET on, so they
 * never repeat a small case's seed. */
enum { LARGE_SEED_OFFSET = 1000000, COMPLEX_SEED_OFFSET = 2000000 };

/* Runs `count` cases with seeds seed0 + offset + k, alternating the two
 * contexts (or, with `both`, each case on both), and checks each bindable
 * one against the reference; a failure names the environment that repeats
 * it alone. Returns how many were compared (the rest could not be
 * bound). */
static int run_cases(ein_ctx *const ctxs[2], bool both, uint64_t seed0,
                     uint64_t offset, int count, const char *what,
                     const char *repeat_env, int *skipped) {
  int compared = 0;
  for (int k = 0; k < count; k++) {
    int before = *skipped;
    uint64_t seed = seed0 + offset + (uint64_t)k;
    int f = run_case(ctxs[both ? 0 : k % 2], seed, skipped);
    if (both && *skipped == before) f |= run_case(ctxs[1], seed, skipped);
    if (*skipped == before) {
      compared++;
      CHECK(!f, "%s %d (EIN_SEED=%llu %s)", what, k,
            (unsigned long long)(seed0 + (uint64_t)k), repeat_env);
    }
  }
  return compared;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--cuda") == 0)
    device_kind = EIN_BACKEND_CUDA;
  else if (argc > 2 && strcmp(argv[1], "--backend") == 0 &&
           ein_backend_parse(argv[2], &device_kind) != EIN_OK) {
    fprintf(stderr, "unknown backend %s\n", argv[2]);
    return 2;
  }
  if (device_kind != EIN_BACKEND_CPU) {
    ein_ctx *probe;
    REQUIRE_OK(ein_ctx_create(&probe));
    ein_status st = ein_backend_check(probe, device_kind, 0);
    if (st) {
      char msg[1024];
      ein_error_format(ein_last_error(probe), msg, sizeof msg);
      printf("%s backend unavailable: %s: skipped\n",
             ein_backend_name(device_kind), msg);
    }
    ein_ctx_destroy(probe);
    if (st) return 77;
  }
  const char *env = getenv("EIN_SEED");
  uint64_t seed0 = env ? strtoull(env, NULL, 10) : 20261122;
  const char *cenv = getenv("EIN_CASES");
  /* The emulated device runs each case twice (direct kernels, then every
   * contraction on its cuBLAS) over more cases: it is where CI runs the
   * CUDA path. */
  bool both = device_kind == EIN_BACKEND_EMU;
  int cases = cenv ? atoi(cenv) : both ? 2100 : 1500;
  printf("random evaluation: seed %llu, %d cases (EIN_SEED=N to repeat)\n",
         (unsigned long long)seed0, cases);
  /* Two contexts: the default one, and one whose CPU backend turns every
   * contraction with a K into a GEMM (sizes here are too small to cross
   * the real threshold), so both the GEMM and the loop paths are checked
   * on every kind of expression. */
  ein_ctx *ctx, *gemm_ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  REQUIRE_OK(ein_ctx_create(&gemm_ctx));
  for (int k = EIN_BACKEND_CPU; k < EIN_BACKEND_KINDS; k++) {
    const ein_backend_entry *e = ein_backend_find((ein_backend_kind)k);
    if (!e) continue;
    gemm_ctx->caps[k] = *e->caps();
    gemm_ctx->caps[k].gemm_min_flops = 0;
    gemm_ctx->caps[k].gemm_min_call_flops = 0;
    gemm_ctx->caps_set[k] = true;
  }
  ein_ctx *const ctxs[2] = {ctx, gemm_ctx};
  int skipped = 0;
  int compared = run_cases(ctxs, both, seed0, 0, cases, "case",
                           "EIN_CASES=1 EIN_LARGE_CASES=0", &skipped);
  printf("compared %d cases with the reference, skipped %d unbindable\n",
         compared, skipped);
  /* Most generated cases bind (about 94%); a run where far fewer do has
   * stopped testing much. Relative, so short runs (EIN_CASES=100 under a
   * sanitizer) pass too. */
  CHECK(compared >= cases * 4 / 5, "only %d of %d cases compared", compared,
        cases);
  const char *lenv = getenv("EIN_LARGE_CASES");
  int large = lenv ? atoi(lenv) : 120;
  large_cases = true;
  int large_compared =
      run_cases(ctxs, both, seed0, LARGE_SEED_OFFSET, large, "large case",
                "EIN_CASES=0 EIN_LARGE_CASES=1", &skipped);
  printf("compared %d large cases with the reference\n", large_compared);
  CHECK(large == 0 || large_compared >= large / 2,
        "only %d large cases compared", large_compared);
  large_cases = false;
  const char *xenv = getenv("EIN_COMPLEX_CASES");
  int ncomplex = xenv ? atoi(xenv) : 400;
  force_complex = true;
  int complex_compared =
      run_cases(ctxs, both, seed0, COMPLEX_SEED_OFFSET, ncomplex,
                "complex case",
                "EIN_CASES=0 EIN_LARGE_CASES=0 EIN_COMPLEX_CASES=1", &skipped);
  /* large ones too: the threaded and split row kernels */
  const char *xlenv = getenv("EIN_COMPLEX_LARGE_CASES");
  int nxlarge = xlenv ? atoi(xlenv) : 40;
  large_cases = true;
  int xlarge_compared = run_cases(
      ctxs, both, seed0, COMPLEX_SEED_OFFSET + LARGE_SEED_OFFSET, nxlarge,
      "large complex case",
      "EIN_CASES=0 EIN_LARGE_CASES=0 EIN_COMPLEX_CASES=0 "
      "EIN_COMPLEX_LARGE_CASES=1",
      &skipped);
  large_cases = false;
  force_complex = false;
  printf("compared %d c64/c128 cases (%d large) with the complex reference\n",
         complex_compared + xlarge_compared, xlarge_compared);
  CHECK(complex_compared >= ncomplex * 4 / 5, "only %d of %d complex cases "
        "compared", complex_compared, ncomplex);
  CHECK(nxlarge == 0 || xlarge_compared >= nxlarge / 2,
        "only %d large complex cases compared", xlarge_compared);
  run_named_cases(ctxs);
  if (device_kind != EIN_BACKEND_CPU) {
    ein_ctx *torch_ctxs[2];
    for (int g = 0; g < 2; g++) {
      REQUIRE_OK(ein_ctx_create(&torch_ctxs[g]));
      for (int k = EIN_BACKEND_CPU; k < EIN_BACKEND_KINDS; k++) {
        const ein_backend_entry *e = ein_backend_find((ein_backend_kind)k);
        if (!e) continue;
        torch_ctxs[g]->caps[k] = g ? gemm_ctx->caps[k] : *e->caps();
        torch_ctxs[g]->caps[k].round_intermediates = true;
        torch_ctxs[g]->caps_set[k] = true;
      }
    }
    large_cases = false;
    compare_rounding(ctxs, torch_ctxs, seed0, cases);
    for (int g = 0; g < 2; g++) ein_ctx_destroy(torch_ctxs[g]);
  }
  ein_ctx_destroy(ctx);
  if (device_kind != EIN_BACKEND_CPU) check_coverage(cases);
  ein_ctx_destroy(gemm_ctx);
  char name[64];
  snprintf(name, sizeof name, "eval_random%s%s",
           device_kind != EIN_BACKEND_CPU ? "_" : "",
           device_kind != EIN_BACKEND_CPU ? ein_backend_name(device_kind) : "");
  return test_summary(name);
}
