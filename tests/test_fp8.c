/*
 * test_fp8.c - float8_e4m3fn and float8_e5m2 (docs/design.md, "fp8
 * dtypes"): the conversions against a brute-force nearest-value search,
 * ein_eval with fp8 inputs and per-input scales against an f64 reference
 * computed on the decoded inputs times their scales (random shapes and
 * values, strided inputs, every output dtype, the CPU and the emulated
 * device, and CUDA where a GPU is usable: EIN_FP8_REQUIRE_CUDA=1, as
 * scripts/gpu_check.sh sets it, makes a missing GPU a failure), and the
 * errors the fp8 rules give.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
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

/* Random fp8 values: gaussians of a random spread, rounded. */
static void fill_fp8(tensor *x) {
  double spread = ldexp(1, (int)(uniform() * 6) - 3);
  uint8_t *p = x->data;
  for (int64_t i = 0; i < numel(x); i++)
    p[i] = ein_fp8_encode(format_of(x->dt), gaussian() * spread);
}

/* The f64 twin of an fp8 input: decoded x scale, same strides. */
static void twin(const tensor *x, double scale, tensor *y) {
  make(y, EIN_DT_F64, x->t.ndim, x->shape, COMPACT);
  memcpy(y->strides, x->strides, sizeof y->strides);
  const uint8_t *p = x->data;
  for (int64_t i = 0; i < numel(x); i++) /* make() gave x no gaps */
    ((double *)y->data)[i] = ein_fp8_decode(format_of(x->dt), p[i]) * scale;
}

/* Runs on a device backend (emu, CUDA) through device copies of the
 * tensors. */
static ein_status eval_dev(ein_ctx *ctx, ein_backend_kind k, const char *expr,
                           tensor *in, int n, tensor *out,
                           const ein_options *o) {
  DLTensor dev[4];
  const DLTensor *ptrs[3];
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
  ein_ctx_destroy(ctx);
  return test_summary("fp8");
}
