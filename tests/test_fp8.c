/*
 * test_fp8.c - float8_e4m3fn and float8_e5m2 (docs/design.md, "fp8
 * dtypes"): the conversions against a brute-force nearest-value search,
 * ein_eval with fp8 inputs and per-input scales against an f64 reference
 * computed on the decoded inputs times their scales (random shapes and
 * values, strided inputs, every output dtype, the CPU and the emulated
 * device, and CUDA where a GPU is usable: EIN_FP8_REQUIRE_CUDA=1, as
 * scripts/gpu_check.sh sets it, makes a missing GPU a failure), and the
 * errors the fp8 rules give. Then the FP8 GEMM (fp8_gemm.h): which
 * operands its plan copies and pads, its price at the fp8 peak, GEMMs of
 * every fp8 pair and output dtype, batched, transposed, padded and odd
 * sizes on the emulated device (and a GPU) against the f64 reference with
 * the backend's FP8 GEMM counter saying which path ran, e5m2 x e5m2 on
 * the decode path, and an emulated sm_80 (EINC_EMU_SM): the decode path
 * for ein_eval, EIN_ERR_DEVICE for an FP8 step run there.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "codegen.h"
#include "cost.h"
#include "ctx_internal.h"
#include "fp8.h"
#include "fp8_gemm.h"
#include "harness.h"
#include "reference.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static double gaussian(void) {
  return sqrt(-2 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform());
}

static const ein_fp8_format *format_of(ein_dtype dt) {
  return dt == EIN_DT_F8E4M3 ? &ein_fp8_e4m3fn : &ein_fp8_e5m2;
}

/* --------------------------------------------------------- conversions */

static void test_decode_points(void) {
  const ein_fp8_format *a = &ein_fp8_e4m3fn, *b = &ein_fp8_e5m2;
  CHECK(ein_fp8_decode(a, 0x38) == 1.0, "e4m3 1.0");
  CHECK(ein_fp8_decode(a, 0x7e) == 448.0, "e4m3 max");
  CHECK(ein_fp8_decode(a, 0xfe) == -448.0, "e4m3 -max");
  CHECK(isnan(ein_fp8_decode(a, 0x7f)) && isnan(ein_fp8_decode(a, 0xff)),
        "e4m3 NaN");
  CHECK(ein_fp8_decode(a, 0x78) == 256.0, "e4m3 has no inf: 0x78 is 256");
  CHECK(ein_fp8_decode(a, 0x01) == ldexp(1, -9), "e4m3 smallest subnormal");
  CHECK(ein_fp8_decode(a, 0x08) == ldexp(1, -6), "e4m3 smallest normal");
  CHECK(ein_fp8_decode(b, 0x3c) == 1.0, "e5m2 1.0");
  CHECK(ein_fp8_decode(b, 0x7b) == 57344.0, "e5m2 max");
  CHECK(ein_fp8_decode(b, 0x7c) == INFINITY, "e5m2 inf");
  CHECK(ein_fp8_decode(b, 0xfc) == -INFINITY, "e5m2 -inf");
  CHECK(isnan(ein_fp8_decode(b, 0x7d)), "e5m2 NaN");
  CHECK(ein_fp8_decode(b, 0x01) == ldexp(1, -16), "e5m2 smallest subnormal");
  CHECK(signbit(ein_fp8_decode(a, 0x80)) && ein_fp8_decode(a, 0x80) == 0,
        "-0");
}

/* The bits of the finite value nearest x (ties: even mantissa), found by
 * trying every pattern; the saturating/overflow rule outside the range. */
static uint8_t nearest_brute(const ein_fp8_format *f, double x) {
  int best = -1;
  double bd = INFINITY;
  for (int b = 0; b < 256; b++) {
    double v = ein_fp8_decode(f, (uint8_t)b);
    if (!isfinite(v) || (v == 0 && signbit(v) != signbit(x))) continue;
    double d = fabs(v - x);
    if (d < bd || (d == bd && (b & 1) == 0)) bd = d, best = b;
  }
  return (uint8_t)best;
}

static void test_encode(void) {
  for (int k = 0; k < 2; k++) {
    const ein_fp8_format *f = k ? &ein_fp8_e5m2 : &ein_fp8_e4m3fn;
    int bad = 0;
    for (int b = 0; b < 256; b++) {
      double v = ein_fp8_decode(f, (uint8_t)b);
      if (!isnan(v) && ein_fp8_encode(f, v) != b) bad++;
    }
    CHECK(bad == 0, "format %d: %d patterns do not round-trip", k, bad);
    bad = 0;
    for (int i = 0; i < 20000; i++) {
      /* values across the whole range, and exact midpoints */
      double x = gaussian() * ldexp(1, (int)(uniform() * 40) - 20);
      if (i % 4 == 0) {
        int b = (int)(uniform() * 126);
        double lo = ein_fp8_decode(f, (uint8_t)b);
        double hi = ein_fp8_decode(f, (uint8_t)(b + 1));
        if (isfinite(hi)) x = (lo + hi) / 2 * (i % 8 ? 1 : -1);
      }
      if (fabs(x) > f->max) continue;
      if (ein_fp8_encode(f, x) != nearest_brute(f, x)) bad++;
    }
    CHECK(bad == 0, "format %d: %d values not rounded to nearest even", k,
          bad);
  }
  const ein_fp8_format *a = &ein_fp8_e4m3fn, *b = &ein_fp8_e5m2;
  CHECK(ein_fp8_encode(a, 464.0) == 0x7e, "464 ties down to 448");
  CHECK(ein_fp8_encode(a, 1000.0) == 0x7e, "e4m3 saturates");
  CHECK(ein_fp8_encode(a, -INFINITY) == 0xfe, "e4m3 -inf saturates");
  CHECK(ein_fp8_encode(a, NAN) == 0x7f, "e4m3 NaN");
  CHECK(ein_fp8_encode(b, 61439.0) == 0x7b, "e5m2 61439 -> max");
  CHECK(ein_fp8_encode(b, 61440.0) == 0x7c, "e5m2 61440 -> inf");
  CHECK(ein_fp8_encode(b, -1e9) == 0xfc, "e5m2 -inf");
  CHECK(ein_fp8_encode(b, ldexp(1, -18)) == 0x00, "e5m2 tiny -> 0 (tie)");
}

/* ------------------------------------------------------------ evaluation */

typedef struct tensor {
  DLTensor t;
  int64_t shape[4], strides[4];
  void *data;
  size_t bytes; /* of data */
  ein_dtype dt;
} tensor;

enum { COMPACT, TRANSPOSED, PADDED }; /* layouts of make() */

/* A tensor on the host: compact, its last two dims' strides swapped, or
 * each row padded by one element (gaps einc must leave alone: filled with
 * GAP bytes). */
enum { GAP = 0x5a };

static void make(tensor *x, ein_dtype dt, int ndim, const int64_t *shape,
                 int layout) {
  memset(x, 0, sizeof *x);
  x->dt = dt;
  int64_t s = 1, pad = layout == PADDED && ndim > 0;
  for (int d = ndim - 1; d >= 0; d--) {
    x->shape[d] = shape[d];
    x->strides[d] = s;
    s *= shape[d] + (d == ndim - 1 ? pad : 0);
  }
  if (layout == TRANSPOSED && ndim >= 2) {
    int64_t a = shape[ndim - 1], b = shape[ndim - 2];
    x->strides[ndim - 1] = b;
    x->strides[ndim - 2] = 1;
    for (int d = ndim - 3, t = (int)(a * b); d >= 0; d--)
      x->strides[d] = t, t *= (int)shape[d];
  }
  x->bytes = (size_t)(s ? s : 1) * ein_dtype_size(dt);
  x->data = malloc(x->bytes);
  memset(x->data, layout == PADDED ? GAP : 0, x->bytes);
  x->t.data = x->data;
  x->t.device = (DLDevice){kDLCPU, 0};
  x->t.ndim = ndim;
  x->t.dtype = ein_dtype_to_dl(dt);
  x->t.shape = x->shape;
  x->t.strides = x->strides;
}

static int64_t numel(const tensor *x) {
  int64_t n = 1;
  for (int d = 0; d < x->t.ndim; d++) n *= x->shape[d];
  return n;
}

static int64_t offset_of(const tensor *x, int64_t i);

/* Random fp8 values: gaussians of a random spread, rounded (a padded
 * tensor's gaps keep their GAP bytes). */
static void fill_fp8(tensor *x) {
  double spread = ldexp(1, (int)(uniform() * 6) - 3);
  uint8_t *p = x->data;
  for (int64_t i = 0; i < numel(x); i++)
    p[offset_of(x, i)] = ein_fp8_encode(format_of(x->dt), gaussian() * spread);
}

/* The f64 twin of an fp8 input: decoded x scale, compact. */
static void twin(const tensor *x, double scale, tensor *y) {
  make(y, EIN_DT_F64, x->t.ndim, x->shape, COMPACT);
  const uint8_t *p = x->data;
  for (int64_t i = 0; i < numel(x); i++)
    ((double *)y->data)[i] =
        ein_fp8_decode(format_of(x->dt), p[offset_of(x, i)]) * scale;
}

/* Runs on a device backend (emu, CUDA) through device copies of the
 * tensors. */
static ein_status eval_dev(ein_ctx *ctx, ein_backend_kind k, const char *expr,
                           tensor *in, int n, tensor *out,
                           const ein_options *o) {
  DLTensor dev[4];
  const DLTensor *ptrs[3] = {0};
  void *buf[4] = {0};
  ein_status st = EIN_OK;
  for (int i = 0; i <= n && !st; i++) {
    tensor *x = i < n ? &in[i] : out;
    st = ein_device_alloc(ctx, k, 0, x->bytes, &buf[i]);
    if (!st) /* the output too: its gaps must come back unchanged */
      st = ein_device_copy(ctx, k, 0, buf[i], x->data, x->bytes,
                           EIN_COPY_HOST_TO_DEVICE);
    dev[i] = x->t;
    dev[i].data = buf[i];
    dev[i].device = ein_backend_dl_device(k, 0);
    if (i < n) ptrs[i] = &dev[i];
  }
  if (!st) st = ein_eval(ctx, expr, ptrs, n, &dev[n], o);
  if (!st)
    st = ein_device_copy(ctx, k, 0, out->data, buf[n], out->bytes,
                         EIN_COPY_DEVICE_TO_HOST);
  for (int i = 0; i <= n; i++)
    ein_device_free(ctx, k, 0, buf[i]);
  return st;
}

typedef struct fcase {
  const char *expr;
  int n;
  int ndim[3];
  const char *axes[3]; /* letters of each input, for sizes */
  ein_reduction red;
} fcase;

static const fcase cases[] = {
    {"i j, j k -> i k", 2, {2, 2}, {"ij", "jk"}, EIN_REDUCE_SUM},
    {"b i j, b j k -> b i k", 2, {3, 3}, {"bij", "bjk"}, EIN_REDUCE_SUM},
    {"i j, j k, k l -> i l", 3, {2, 2, 2}, {"ij", "jk", "kl"}, EIN_REDUCE_SUM},
    {"i j -> j", 1, {2}, {"ij"}, EIN_REDUCE_SUM},
    {"i j -> i", 1, {2}, {"ij"}, EIN_REDUCE_MEAN},
    {"i j -> i", 1, {2}, {"ij"}, EIN_REDUCE_MAX},
    {"i j -> j i", 1, {2}, {"ij"}, EIN_REDUCE_SUM},
    {"i j, i j -> i j", 2, {2, 2}, {"ij", "ij"}, EIN_REDUCE_SUM},
};

/* The storage offset of x's i-th element in C order. */
static int64_t offset_of(const tensor *x, int64_t i) {
  int64_t off = 0;
  for (int d = x->t.ndim - 1; d >= 0; d--) {
    off += (i % x->shape[d]) * x->strides[d];
    i /= x->shape[d];
  }
  return off;
}

static int compared;

/* ||got - want||_2 / ||want||_2, got read through its strides */
static double rel_norm_err(const tensor *got, const double *want,
                           int64_t n) {
  double e = 0, w = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = ref_load(got->dt, got->data, offset_of(got, i)) - want[i];
    e += d * d, w += want[i] * want[i];
  }
  return sqrt(e) / fmax(sqrt(w), 1e-300);
}


/* Whether every byte of a PADDED tensor outside its elements is GAP. */
static bool gaps_intact(const tensor *x) {
  size_t esz = ein_dtype_size(x->dt);
  unsigned char *mark = calloc(x->bytes, 1);
  for (int64_t i = 0; i < numel(x); i++)
    memset(mark + offset_of(x, i) * (int64_t)esz, 1, esz);
  bool ok = true;
  for (size_t b = 0; b < x->bytes; b++)
    ok &= mark[b] || ((unsigned char *)x->data)[b] == GAP;
  free(mark);
  return ok;
}

static void check_case(ein_ctx *ctx, const fcase *c, ein_dtype out_dt,
                       ein_backend_kind k) {
  int64_t size[26];
  for (int a = 0; a < 26; a++) size[a] = 1 + (int64_t)(uniform() * 40);
  tensor in[3], ref_in[3], out;
  const DLTensor *ptrs[3], *ref_ptrs[3];
  double scales[3];
  for (int i = 0; i < c->n; i++) {
    int64_t shape[4];
    for (int d = 0; d < c->ndim[i]; d++) shape[d] = size[c->axes[i][d] - 'a'];
    ein_dtype dt = uniform() < 0.5 ? EIN_DT_F8E4M3 : EIN_DT_F8E5M2;
    make(&in[i], dt, c->ndim[i], shape,
         i == 0 && uniform() < 0.5 ? TRANSPOSED : COMPACT);
    fill_fp8(&in[i]);
    scales[i] = ldexp(0.5 + uniform(), (int)(uniform() * 8) - 4);
    twin(&in[i], scales[i], &ref_in[i]);
    ptrs[i] = &in[i].t, ref_ptrs[i] = &ref_in[i].t;
  }
  ein_options o = {.reduction = c->red, .scales = scales, .nscales = c->n,
                   .backend = k};
  int64_t oshape[EIN_MAX_DIMS];
  int ondim;
  REQUIRE_OK(ein_output_shape(ctx, c->expr, ptrs, c->n, &o, oshape, &ondim));
  int layout = (int)(uniform() * 3);
  make(&out, out_dt, ondim, oshape, layout);
  ein_status st = k == EIN_BACKEND_CPU
                      ? ein_eval(ctx, c->expr, ptrs, c->n, &out.t, &o)
                      : eval_dev(ctx, k, c->expr, in, c->n, &out, &o);
  CHECK(st == EIN_OK, "%s (%s, %s): %s: %s", c->expr, ein_dtype_name(out_dt),
        ein_backend_name(k), ein_status_name(st), ein_last_error(ctx)->message);
  ein_binding *b;
  REQUIRE_OK(ein_bind(ctx, c->expr, ref_ptrs, c->n, &o, &b));
  double *want = malloc((size_t)numel(&out) * sizeof *want);
  ref_eval(ein_binding_problem(b), ref_ptrs, want, numel(&out));
  ein_binding_destroy(b);
  double tol = out_dt == EIN_DT_F32 ? 1e-5 : 2e-2;
  double err = rel_norm_err(&out, want, numel(&out));
  if (st == EIN_OK) {
    CHECK(err <= tol, "%s (%s, %s): relative error %.3g > %g", c->expr,
          ein_dtype_name(out_dt), ein_backend_name(k), err, tol);
    CHECK(layout != PADDED || gaps_intact(&out), "%s (%s, %s): a gap of "
          "the padded output was written", c->expr, ein_dtype_name(out_dt),
          ein_backend_name(k));
    compared++;
  }
  free(want);
  for (int i = 0; i < c->n; i++) free(in[i].data), free(ref_in[i].data);
  free(out.data);
}

/* The backends to compare: CPU, emu, and CUDA where it runs; the CPU
 * alone with EIN_FP8_CPU_ONLY=1 (scripts/valgrind.sh: valgrind cannot
 * follow the emulated device's fibers). */
static int backends(ein_ctx *ctx, ein_backend_kind *kinds) {
  kinds[0] = EIN_BACKEND_CPU, kinds[1] = EIN_BACKEND_EMU;
  const char *cpu_only = getenv("EIN_FP8_CPU_ONLY");
  if (cpu_only && *cpu_only == '1') return 1;
  bool cuda = ein_backend_check(ctx, EIN_BACKEND_CUDA, 0) == EIN_OK;
  const char *req = getenv("EIN_FP8_REQUIRE_CUDA");
  if (req && *req == '1')
    CHECK(cuda, "EIN_FP8_REQUIRE_CUDA: CUDA cannot run: %s",
          ein_last_error(ctx)->message);
  if (cuda) kinds[2] = EIN_BACKEND_CUDA;
  return cuda ? 3 : 2;
}

static int nkinds;

static void test_random(ein_ctx *ctx) {
  const ein_dtype outs[3] = {EIN_DT_F32, EIN_DT_BF16, EIN_DT_F16};
  ein_backend_kind kinds[3];
  nkinds = backends(ctx, kinds);
  /* the CPU four draws a case; a device one (each draw's sizes compile
   * new kernels, seconds apiece under the sanitizers) */
  for (int rep = 0; rep < 4; rep++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
      for (int d = 0; d < 3; d++)
        for (int k = 0; k < (rep ? 1 : nkinds); k++)
          check_case(ctx, &cases[c], outs[d], kinds[k]);
}

/* ------------------------------------------------------- the FP8 GEMM */

/* A context whose emulated device and GPU plan every contraction as a
 * GEMM (test-sized GEMMs reach cuBLAS(Lt) as large ones do). */
static ein_ctx *gemm_ctx(void) {
  ein_ctx *g;
  REQUIRE_OK(ein_ctx_create(&g));
  const ein_backend_kind k[2] = {EIN_BACKEND_EMU, EIN_BACKEND_CUDA};
  for (int i = 0; i < 2; i++) {
    g->caps[k[i]] = *ein_cuda_caps();
    g->caps[k[i]].gemm_min_flops = 0;
    g->caps_set[k[i]] = true;
  }
  return g;
}

static unsigned long long fp8_gemms(ein_ctx *ctx, ein_backend_kind k) {
  ein_backend_stats bs;
  ein_ctx_backend_stats(ctx, k, 0, &bs);
  return bs.fp8_gemms;
}

/* A contraction on the emulated device: axes b (batch), i, j, k. */
typedef struct gcase {
  const char *expr;
  const char *axes[2];
  int64_t b, m, n, k;
  ein_dtype dt[2], out;
  int layout[3]; /* of the inputs and the output (make()) */
  ein_reduction red;
  bool fp8; /* the FP8 GEMM path is expected */
} gcase;

static const gcase gcases[] = {
    /* TN as it is: no copy */
    {"i k, j k -> i j", {"ik", "jk"}, 1, 32, 16, 48,
     {EIN_DT_F8E4M3, EIN_DT_F8E4M3}, EIN_DT_F32, {0, 0, 0}, 0, true},
    /* B K-major: copied */
    {"i k, k j -> i j", {"ik", "kj"}, 1, 32, 32, 32,
     {EIN_DT_F8E4M3, EIN_DT_F8E5M2}, EIN_DT_BF16, {0, 0, 0}, 0, true},
    /* A transposed: copied */
    {"i k, j k -> i j", {"ik", "jk"}, 1, 16, 32, 64,
     {EIN_DT_F8E5M2, EIN_DT_F8E4M3}, EIN_DT_F16, {TRANSPOSED, 0, 0}, 0, true},
    /* batched, strided batch as it is */
    {"b i k, b j k -> b i j", {"bik", "bjk"}, 3, 16, 32, 32,
     {EIN_DT_F8E4M3, EIN_DT_F8E4M3}, EIN_DT_F32, {0, 0, 0}, 0, true},
    /* batched, the output transposed */
    {"b i k, b j k -> b j i", {"bik", "bjk"}, 2, 32, 16, 16,
     {EIN_DT_F8E5M2, EIN_DT_F8E4M3}, EIN_DT_BF16, {0, 0, 0}, 0, true},
    /* odd sizes: padded copies and a stored result */
    {"i k, j k -> i j", {"ik", "jk"}, 1, 17, 23, 5,
     {EIN_DT_F8E4M3, EIN_DT_F8E5M2}, EIN_DT_BF16, {0, 0, 0}, 0, true},
    {"b i k, b k j -> b i j", {"bik", "bkj"}, 2, 7, 9, 13,
     {EIN_DT_F8E4M3, EIN_DT_F8E4M3}, EIN_DT_F16, {0, TRANSPOSED, PADDED}, 0,
     true},
    {"i k, k j -> i j", {"ik", "kj"}, 1, 33, 1, 40,
     {EIN_DT_F8E4M3, EIN_DT_F8E4M3}, EIN_DT_F32, {PADDED, 0, 0}, 0, true},
    /* e5m2 x e5m2: no cuBLASLt row, the decode path */
    {"i k, j k -> i j", {"ik", "jk"}, 1, 32, 16, 48,
     {EIN_DT_F8E5M2, EIN_DT_F8E5M2}, EIN_DT_F32, {0, 0, 0}, 0, false},
    /* not a contraction: the decode path */
    {"i k, i k -> i k", {"ik", "ik"}, 1, 16, 1, 32,
     {EIN_DT_F8E4M3, EIN_DT_F8E4M3}, EIN_DT_F32, {0, 0, 0}, 0, false},
};

static int gemm_compared;

/* Runs c on ctx's device of kind k and compares with the f64 reference;
 * the FP8 path must be taken exactly when want_fp8. */
static void check_gemm(ein_ctx *ctx, const gcase *c, bool want_fp8,
                       ein_backend_kind k) {
  int64_t size[26] = {0};
  size['b' - 'a'] = c->b, size['i' - 'a'] = c->m, size['j' - 'a'] = c->n;
  size['k' - 'a'] = c->k;
  tensor in[2], ref_in[2], out;
  const DLTensor *ptrs[2], *ref_ptrs[2];
  double scales[2] = {0.375, 5.0};
  for (int i = 0; i < 2; i++) {
    int64_t shape[4];
    int nd = (int)strlen(c->axes[i]);
    for (int d = 0; d < nd; d++) shape[d] = size[c->axes[i][d] - 'a'];
    make(&in[i], c->dt[i], nd, shape, c->layout[i]);
    fill_fp8(&in[i]);
    twin(&in[i], scales[i], &ref_in[i]);
    ptrs[i] = &in[i].t, ref_ptrs[i] = &ref_in[i].t;
  }
  ein_options o = {.reduction = c->red, .scales = scales, .nscales = 2,
                   .backend = k};
  int64_t oshape[EIN_MAX_DIMS];
  int ondim;
  REQUIRE_OK(ein_output_shape(ctx, c->expr, ptrs, 2, &o, oshape, &ondim));
  make(&out, c->out, ondim, oshape, c->layout[2]);
  unsigned long long before = fp8_gemms(ctx, k);
  ein_status st = eval_dev(ctx, k, c->expr, in, 2, &out, &o);
  CHECK(st == EIN_OK, "%s (%s, %s): %s: %s", c->expr, ein_dtype_name(c->out),
        ein_backend_name(k), ein_status_name(st),
        ein_last_error(ctx)->message);
  bool took = fp8_gemms(ctx, k) > before;
  CHECK(took == want_fp8, "%s %s x %s -> %s (%s): the FP8 GEMM path was%s "
        "taken", c->expr, ein_dtype_name(c->dt[0]), ein_dtype_name(c->dt[1]),
        ein_dtype_name(c->out), ein_backend_name(k), took ? "" : " not");
  ein_binding *b;
  REQUIRE_OK(ein_bind(ctx, c->expr, ref_ptrs, 2, &o, &b));
  double *want = malloc((size_t)numel(&out) * sizeof *want);
  ref_eval(ein_binding_problem(b), ref_ptrs, want, numel(&out));
  ein_binding_destroy(b);
  double tol = c->out == EIN_DT_F32 ? 1e-5 : 2e-2;
  double err = rel_norm_err(&out, want, numel(&out));
  CHECK(st != EIN_OK || err <= tol, "%s %s x %s -> %s: relative error %.3g "
        "> %g", c->expr, ein_dtype_name(c->dt[0]), ein_dtype_name(c->dt[1]),
        ein_dtype_name(c->out), err, tol);
  CHECK(c->layout[2] != PADDED || gaps_intact(&out), "%s: a gap of the "
        "padded output was written", c->expr);
  gemm_compared += st == EIN_OK;
  free(want);
  for (int i = 0; i < 2; i++) free(in[i].data), free(ref_in[i].data);
  free(out.data);
}

/* The GEMM cases on the emulated device, and on a GPU where one runs
 * (the FP8 path expected there from sm_89 on). */
static void test_fp8_gemm(void) {
  ein_ctx *g = gemm_ctx();
  for (size_t i = 0; i < sizeof gcases / sizeof gcases[0]; i++)
    check_gemm(g, &gcases[i], gcases[i].fp8, EIN_BACKEND_EMU);
  if (nkinds == 3) {
    ein_thread_rec *me = ein_ctx_enter(g);
    ein_backend *be = ein_ctx_backend(me, EIN_BACKEND_CUDA, 0);
    bool fp8 = be && be->sm >= EIN_FP8_GEMM_MIN_SM;
    for (size_t i = 0; be && i < sizeof gcases / sizeof gcases[0]; i++)
      check_gemm(g, &gcases[i], gcases[i].fp8 && fp8, EIN_BACKEND_CUDA);
  }
  /* random sizes, dtypes and layouts of the GEMM cases, planned as GEMMs */
  for (int rep = 0; rep < 3; rep++)
    for (int c = 0; c < 2; c++)
      for (int d = 0; d < 3; d++) {
        const ein_dtype outs[3] = {EIN_DT_F32, EIN_DT_BF16, EIN_DT_F16};
        check_case(g, &cases[c], outs[d], EIN_BACKEND_EMU);
      }
  CHECK(fp8_gemms(g, EIN_BACKEND_EMU) > 0,
        "random GEMM cases took the FP8 path");
  ein_ctx_destroy(g);
}

/* The FP8 GEMM plan of a contraction of compact f32 stand-ins (the
 * planner needs shapes and strides only); NULL: none. */
static ein_plan_ir *fp8_plan_of(ein_ctx *ctx, const char *expr,
                                const int64_t sa[2], const int64_t sb[2],
                                const ein_dtype dt[2], bool aligned0) {
  int64_t sha[2] = {sa[0], sa[1]}, shb[2] = {sb[0], sb[1]};
  DLTensor t[2] = {{.data = NULL, .device = {kDLExtDev, 0}, .ndim = 2,
                    .dtype = {kDLFloat, 32, 1}, .shape = sha},
                   {.data = NULL, .device = {kDLExtDev, 0}, .ndim = 2,
                    .dtype = {kDLFloat, 32, 1}, .shape = shb}};
  const DLTensor *p[2] = {&t[0], &t[1]};
  ein_options o = {.backend = EIN_BACKEND_EMU};
  ein_plan *plan;
  REQUIRE_OK(ein_plan_create(ctx, expr, p, 2, NULL, &o, &plan));
  ein_plan_ir *ir = NULL;
  ein_error_rec err = {0};
  const bool aligned[3] = {aligned0, true, true};
  REQUIRE_OK(ein_fp8_gemm_plan(ein_plan_ir_of(plan), dt, EIN_DT_BF16, aligned,
                               &err, &ir));
  ein_plan_destroy(plan);
  return ir;
}

/* "gemm", "fill copy gemm store", ...: the plan's steps in order. */
static const char *step_kinds(const ein_plan_ir *ir, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 0; ir && i < ir->nsteps; i++) {
    const ein_step *s = &ir->steps[i];
    const char *k = s->kind == EIN_STEP_GEMM   ? "gemm"
                    : s->kind == EIN_STEP_FILL ? "fill"
                    : s->role == EIN_ROLE_STORE ? "store"
                                                : "copy";
    snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? " " : "", k);
  }
  return buf;
}

/* Which operands fp8_gemm.c copies (and pads), and the plan's price. */
static void test_fp8_plans(void) {
  ein_ctx *g = gemm_ctx();
  const ein_dtype e4[2] = {EIN_DT_F8E4M3, EIN_DT_F8E4M3},
                  e5[2] = {EIN_DT_F8E5M2, EIN_DT_F8E5M2};
  const int64_t a[2] = {32, 48}, b[2] = {16, 48}, bt[2] = {48, 16},
                odd[2] = {16, 40};
  char kinds[128];
  struct {
    const char *expr;
    const int64_t *sb;
    const int64_t *sa;
    bool aligned;
    const char *want;
  } rows[] = {
      {"i k, j k -> i j", b, a, true, "gemm"},
      {"i k, j k -> i j", b, a, false, "copy gemm"},
      {"i k, k j -> i j", bt, a, true, "copy gemm"},
      {"i k, j k -> i j", odd, (const int64_t[2]){32, 40}, true,
       "fill copy fill copy gemm"},
      {"i k, j k -> i j", (const int64_t[2]){20, 48}, a, true,
       "fill copy gemm store"},
      /* C column-major: the step transposed, C as it is */
      {"i k, j k -> j i", b, a, true, "gemm"},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    ein_plan_ir *ir =
        fp8_plan_of(g, rows[r].expr, rows[r].sa, rows[r].sb, e4, rows[r].aligned);
    step_kinds(ir, kinds, sizeof kinds);
    CHECK(strcmp(kinds, rows[r].want) == 0, "row %zu: steps '%s', not '%s'",
          r, kinds, rows[r].want);
    const ein_step *gs = NULL;
    for (int i = 0; ir && i < ir->nsteps; i++)
      if (ir->steps[i].kind == EIN_STEP_GEMM) gs = &ir->steps[i];
    CHECK(gs && ein_fp8_gemm_fits(&gs->gemm, 2), "row %zu: the GEMM fits", r);
    /* the transposed step reads B as its A: the report's operands too */
    bool swapped = r == sizeof rows / sizeof rows[0] - 1;
    CHECK(gs && gs->operand[0] == (swapped ? 1 : 0) &&
              gs->operand[1] == (swapped ? 0 : 1),
          "row %zu: the GEMM's operands %d,%d", r, gs ? gs->operand[0] : -9,
          gs ? gs->operand[1] : -9);
    if (r == 0) {
      /* priced at the fp8 peak: 2 m n k at the H100's 1979 TFLOP/s (a
       * bandwidth that makes the arithmetic the bound) */
      ein_device_model m = *ein_device_model_find("h100");
      REQUIRE_OK(ein_device_model_set_bandwidth(&m, 1e30));
      CHECK(ein_cost_plan_kind(ir) == EIN_PEAK_FP8, "plan kind fp8");
      CHECK(ein_cost_step_kind(ir, gs) == EIN_PEAK_FP8, "step kind fp8");
      double t = ein_cost_step_roofline(ir, gs, &m),
             want = 2.0 * 32 * 16 * 48 / 1979e12;
      CHECK(fabs(t - want) < 1e-6 * want, "roofline %g s, want %g", t, want);
    }
    ein_plan_ir_destroy(ir);
  }
  CHECK(fp8_plan_of(g, "i k, j k -> i j", a, b, e5, true) == NULL,
        "e5m2 x e5m2 has no FP8 GEMM plan");
  ein_ctx_destroy(g);
}

/* An emulated sm_80: ein_eval takes the decode path (correct results on
 * any GPU), and an FP8 GEMM step run there directly is EIN_ERR_DEVICE
 * naming both sms. */
static void test_old_gpu(void) {
  setenv("EINC_EMU_SM", "80", 1);
  ein_ctx *g = gemm_ctx();
  check_gemm(g, &gcases[0], false, EIN_BACKEND_EMU);
  ein_plan_ir *ir = fp8_plan_of(g, "i k, j k -> i j", (const int64_t[2]){32, 48},
                                (const int64_t[2]){16, 48},
                                (const ein_dtype[2]){EIN_DT_F8E4M3,
                                                     EIN_DT_F8E4M3}, true);
  ein_thread_rec *me = ein_ctx_enter(g);
  ein_backend *be = ein_ctx_backend(me, EIN_BACKEND_EMU, 0);
  CHECK(be && ir, "emulated device and plan");
  if (!be || !ir) return;
  CHECK(be->sm == 80, "EINC_EMU_SM gives sm %d", be->sm);
  void *prog = NULL, *buf[4] = {0};
  const size_t bytes[4] = {32 * 48, 16 * 48, 8, 32 * 16 * 2};
  for (int i = 0; i < 4; i++) REQUIRE_OK(be->alloc(be, bytes[i], &buf[i], &me->err));
  REQUIRE_OK(be->entry->prepare(ir, &prog, &me->err));
  char *inputs[4] = {buf[0], buf[1], buf[2], (char *)buf[2] + 4};
  ein_status st = be->run(be, ir, prog, inputs, buf[3], NULL, &me->err);
  const char *msg = me->err.pub.message ? me->err.pub.message : "";
  CHECK(st == EIN_ERR_DEVICE && strstr(msg, "sm_80") && strstr(msg, "sm_89"),
        "sm_80: %s: %s", ein_status_name(st), msg);
  be->entry->program_free(prog);
  for (int i = 0; i < 4; i++) be->free(be, buf[i]);
  ein_plan_ir_destroy(ir);
  ein_ctx_destroy(g);
  unsetenv("EINC_EMU_SM");
}

/* -------------------------------------------------- special values, errors */

static ein_status eval1(ein_ctx *ctx, const char *expr, tensor *a, tensor *b,
                        tensor *out, const double *scales, int nscales) {
  const DLTensor *p[2] = {&a->t, b ? &b->t : NULL};
  ein_options o = {.scales = scales, .nscales = nscales};
  return ein_eval(ctx, expr, p, b ? 2 : 1, &out->t, &o);
}

static void test_special(ein_ctx *ctx) {
  int64_t s4[1] = {4}, s1[1] = {1};
  tensor a, out, h;
  make(&a, EIN_DT_F8E5M2, 1, s4, COMPACT);
  make(&out, EIN_DT_F32, 1, s1, COMPACT);
  uint8_t *p = a.data;
  p[0] = 0x3c, p[1] = 0x7c, p[2] = 0x3c, p[3] = 0x3c; /* 1, inf, 1, 1 */
  double sc = 2.0;
  CHECK(eval1(ctx, "i -> ()", &a, NULL, &out, &sc, 1) == EIN_OK, "inf sum");
  CHECK(isinf(((float *)out.data)[0]), "e5m2 inf stays inf");
  p[1] = 0x3c;
  CHECK(eval1(ctx, "i -> ()", &a, NULL, &out, &sc, 1) == EIN_OK, "sum");
  CHECK(((float *)out.data)[0] == 8.0f, "4 x 1.0 x scale 2 = %g",
        ((float *)out.data)[0]);
  /* 4 x 448 x 40 = 71680 overflows f16 (max 65504): +inf */
  tensor e;
  make(&e, EIN_DT_F8E4M3, 1, s4, COMPACT);
  memset(e.data, 0x7e, 4);
  make(&h, EIN_DT_F16, 1, s1, COMPACT);
  sc = 40.0;
  CHECK(eval1(ctx, "i -> ()", &e, NULL, &h, &sc, 1) == EIN_OK, "f16 out");
  CHECK(((uint16_t *)h.data)[0] == 0x7c00, "f16 overflow is +inf: %04x",
        ((uint16_t *)h.data)[0]);
  ((uint8_t *)e.data)[2] = 0x7f; /* e4m3fn NaN */
  CHECK(eval1(ctx, "i -> ()", &e, NULL, &out, NULL, 0) == EIN_OK, "NaN");
  CHECK(isnan(((float *)out.data)[0]), "NaN propagates");
  free(e.data), free(h.data), free(a.data), free(out.data);
}

static void test_errors(ein_ctx *ctx) {
  int64_t s4[1] = {4}, s1[1] = {1};
  tensor a, f, out, o8;
  make(&a, EIN_DT_F8E4M3, 1, s4, COMPACT);
  make(&f, EIN_DT_F32, 1, s4, COMPACT);
  make(&out, EIN_DT_F32, 1, s1, COMPACT);
  make(&o8, EIN_DT_F8E4M3, 1, s1, COMPACT);
  double sc[2] = {1, 1}, bad = NAN;
  CHECK(eval1(ctx, "i, i -> ()", &a, &f, &out, NULL, 0) == EIN_ERR_DTYPE,
        "fp8 beside f32");
  CHECK(eval1(ctx, "i -> ()", &a, NULL, &o8, NULL, 0) == EIN_ERR_DTYPE,
        "fp8 output");
  CHECK(eval1(ctx, "i -> ()", &a, NULL, &out, sc, 2) ==
            EIN_ERR_INVALID_ARGUMENT,
        "two scales for one input");
  CHECK(eval1(ctx, "i -> ()", &a, NULL, &out, &bad, 1) ==
            EIN_ERR_INVALID_ARGUMENT,
        "NaN scale");
  CHECK(strstr(ein_last_error(ctx)->message, "finite") != NULL, "%s",
        ein_last_error(ctx)->message);
  CHECK(eval1(ctx, "i -> ()", &f, NULL, &out, sc, 1) == EIN_ERR_DTYPE,
        "scales on f32 inputs");
  const DLTensor *p[1] = {&a.t};
  ein_plan *plan = NULL;
  CHECK(ein_plan_create(ctx, "i -> ()", p, 1, NULL, NULL, &plan) ==
            EIN_ERR_DTYPE,
        "plans refuse fp8");
  free(a.data), free(f.data), free(out.data), free(o8.data);
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  test_decode_points();
  test_encode();
  test_special(ctx);
  test_errors(ctx);
  test_random(ctx);
  printf("fp8: %d evaluations compared with the f64 reference\n", compared);
  CHECK(compared == 8 * 3 * (3 + nkinds), "every case ran: %d", compared);
  const char *cpu_only = getenv("EIN_FP8_CPU_ONLY");
  if (!cpu_only || *cpu_only != '1') {
    test_fp8_plans();
    test_fp8_gemm();
    test_old_gpu();
    printf("fp8: %d GEMM-case evaluations compared\n", gemm_compared);
  }
  ein_ctx_destroy(ctx);
  return test_summary("fp8");
}
