/*
 * test_path_device.c - a contraction order given by the caller
 * (ein_options.path, src/planner/path/path_given.c) and the device models of
 * predicted times (ein_device_model_get, src/api/device_models.c).
 *
 * Paths: random contractions evaluated with a random linear path and with
 * the searched one agree with the naive reference; the plan shows the
 * order it was given; the searched plan's linear path fed back gives the
 * same plan; malformed, short, long and out-of-range paths fail with
 * EIN_ERR_INVALID_ARGUMENT and a message that says why, without a caret.
 * Models: the "cpu" model is measured once and then read from the disk
 * cache (the measurement counter, not a clock, tells); a damaged entry and
 * one with a valid checksum but impossible rates are measured again; the
 * built-in and "cuda" models and unknown names; each built-in GPU model's
 * peaks, bandwidth and name against its data sheet's figures. A report
 * asked for twice (its length, then its text) is the same text on a
 * process's first use of the model, when the rates are measured in between.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cost.h"
#include "cpu_rates.h"
#include "device_models.h"
#include "disk_cache.h"
#include "harness.h"
#include "reference.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static int below(int n) {
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return (int)((rng * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)n);
}

/* A random contraction in the numpy dialect over axes a..f. */
typedef struct rcase {
  char expr[128];
  int n;
  int ndim[6];
  int64_t dims[6][4];
  int64_t size[6];
} rcase;

static void random_case(rcase *c) {
  memset(c, 0, sizeof *c);
  c->n = 2 + below(4);
  for (int a = 0; a < 6; a++) c->size[a] = 1 + below(4);
  bool used[6] = {false};
  char *e = c->expr;
  for (int i = 0; i < c->n; i++) {
    int want = 1 + below(3);
    bool here[6] = {false};
    for (int k = 0; k < want; k++) {
      int a = below(6);
      if (here[a]) continue;
      here[a] = used[a] = true;
      *e++ = (char)('a' + a);
      c->dims[i][c->ndim[i]++] = c->size[a];
    }
    *e++ = i + 1 < c->n ? ',' : '-';
  }
  *e++ = '>';
  for (int a = 0; a < 6; a++)
    if (used[a] && below(2)) *e++ = (char)('a' + a);
}

/* A random linear path for n operands, in one of the spellings allowed. */
static void random_path(int n, char *buf, size_t cap, int (*lin)[2]) {
  int style = below(3), len = 0;
  len += snprintf(buf + len, cap - (size_t)len, "[");
  for (int k = 0; k < n - 1; k++) {
    int live = n - k, i = below(live), j = below(live - 1);
    if (j >= i) j++;
    lin[k][0] = i, lin[k][1] = j;
    const char *fmt = style == 0   ? "%s(%d, %d)"
                      : style == 1 ? "%s[%d,%d]"
                                   : "%s ( %d ,%d ) ";
    len += snprintf(buf + len, cap - (size_t)len, fmt, k ? ", " : "", i, j);
  }
  snprintf(buf + len, cap - (size_t)len, "]");
}

typedef struct tensors {
  DLTensor t[6];
  const DLTensor *p[6];
  double *data[6];
} tensors;

static void make_inputs(const rcase *c, tensors *x) {
  for (int i = 0; i < c->n; i++) {
    int64_t count = 1;
    for (int d = 0; d < c->ndim[i]; d++) count *= c->dims[i][d];
    x->data[i] = malloc((size_t)count * sizeof(double) + 8);
    for (int64_t k = 0; k < count; k++) x->data[i][k] = below(2001) / 1000.0 - 1;
    x->t[i] = (DLTensor){x->data[i], {kDLCPU, 0}, c->ndim[i],
                         {kDLFloat, 64, 1}, (int64_t *)c->dims[i], NULL, 0};
    x->p[i] = &x->t[i];
  }
}

/* Evaluates the case with `path` (NULL: searched) into out (numel doubles). */
static ein_status eval_with(ein_ctx *ctx, const rcase *c, const tensors *x,
                            const char *path, double *out, int64_t *shape,
                            int ndim) {
  ein_options o = {.dialect = EIN_DIALECT_NUMPY, .path = path};
  DLTensor y = {out, {kDLCPU, 0}, ndim, {kDLFloat, 64, 1}, shape, NULL, 0};
  return ein_eval(ctx, c->expr, x->p, c->n, &y, &o);
}

static bool close_to(const double *a, const double *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (fabs(a[i] - b[i]) > 1e-9 * (1 + fabs(b[i]))) return false;
  return true;
}

/* The plan's JSON for the case with `path`. */
static void plan_json(ein_ctx *ctx, const rcase *c, const tensors *x,
                      const char *path, char *buf, size_t cap) {
  ein_options o = {.dialect = EIN_DIALECT_NUMPY, .path = path};
  ein_plan *p = NULL;
  buf[0] = '\0';
  if (ein_plan_create(ctx, c->expr, x->p, c->n, NULL, &o, &p) == EIN_OK)
    (void)ein_plan_describe(p, EIN_DESCRIBE_JSON, NULL, buf, cap);
  ein_plan_destroy(p);
}

/* The JSON array after "key": in json, as text ("[[0,1],[0,1]]"). */
static void json_array(const char *json, const char *key, char *out,
                       size_t cap) {
  out[0] = '\0';
  const char *s = strstr(json, key);
  if (!s) return;
  s += strlen(key);
  int depth = 0;
  size_t n = 0;
  do {
    depth += (*s == '[') - (*s == ']');
    if (n + 1 < cap) out[n++] = *s;
  } while (*s++ && depth > 0);
  out[n] = '\0';
}

/* Searched and given paths agree with the reference; the plan names the
 * order given; the searched plan's path fed back gives the same plan. */
static void random_paths(ein_ctx *ctx, int cases) {
  int bad_result = 0, bad_shown = 0, bad_trip = 0;
  for (int r = 0; r < cases; r++) {
    rcase c;
    random_case(&c);
    tensors x;
    make_inputs(&c, &x);
    ein_binding *b;
    ein_options numpy = {.dialect = EIN_DIALECT_NUMPY};
    REQUIRE_OK(ein_bind(ctx, c.expr, x.p, c.n, &numpy, &b));
    int64_t numel = 1, shape[8];
    int ndim = ein_binding_output_ndim(b);
    for (int d = 0; d < ndim; d++)
      numel *= shape[d] = ein_binding_output_shape(b)[d];
    double *ref = calloc((size_t)numel + 1, 8), *got = calloc((size_t)numel + 1, 8);
    ref_eval(ein_binding_problem(b), x.p, ref, numel);
    ein_binding_destroy(b);
    char path[512], json[65536], shown[512], want[512];
    int lin[8][2];
    random_path(c.n, path, sizeof path, lin);
    ein_status st = eval_with(ctx, &c, &x, path, got, shape, ndim);
    if (st || !close_to(got, ref, numel))
      bad_result++, fprintf(stderr, "given path %s on %s: %s\n", path, c.expr,
                            ein_status_name(st));
    st = eval_with(ctx, &c, &x, NULL, got, shape, ndim);
    if (st || !close_to(got, ref, numel))
      bad_result++, fprintf(stderr, "searched path on %s\n", c.expr);
    /* the plan shows the order given, as given */
    plan_json(ctx, &c, &x, path, json, sizeof json);
    json_array(json, "\"path_linear\":", shown, sizeof shown);
    int len = snprintf(want, sizeof want, "[");
    for (int k = 0; k < c.n - 1; k++) {
      len += snprintf(want + len, sizeof want - (size_t)len, "%s[%d,%d]",
                      k ? "," : "", lin[k][0], lin[k][1]);
    }
    snprintf(want + len, sizeof want - (size_t)len, "]");
    if (strcmp(shown, want) != 0 || !strstr(json, "\"path_method\":\"given\""))
      bad_shown++, fprintf(stderr, "%s on %s shows %s\n", path, c.expr, shown);
    /* round trip: the searched plan's linear path gives the same plan */
    char searched[65536], again[65536];
    plan_json(ctx, &c, &x, NULL, searched, sizeof searched);
    json_array(searched, "\"path_linear\":", shown, sizeof shown);
    plan_json(ctx, &c, &x, shown, again, sizeof again);
    char *m1 = strstr(searched, "\"path_method\":\""),
         *m2 = strstr(again, "\"path_method\":\"given\"");
    if (!m1 || !m2 || strcmp(strchr(m1 + 15, '"'), strchr(m2 + 15, '"')) ||
        m1 - searched != m2 - again ||
        strncmp(searched, again, (size_t)(m1 - searched)))
      bad_trip++, fprintf(stderr, "round trip of %s on %s:\n%s\n%s\n", shown,
                          c.expr, searched, again);
    for (int i = 0; i < c.n; i++) free(x.data[i]);
    free(ref), free(got);
  }
  CHECK(bad_result == 0, "%d of %d cases differ from the reference",
        bad_result, cases);
  CHECK(bad_shown == 0, "%d of %d plans do not show the path given",
        bad_shown, cases);
  CHECK(bad_trip == 0, "%d of %d round trips give another plan", bad_trip,
        cases);
}

/* A path that must fail: status, a message holding `says`, no caret. */
static void bad_path(ein_ctx *ctx, const char *path, const char *says) {
  int64_t s[3][2] = {{2, 3}, {3, 4}, {4, 5}};
  DLTensor t[3];
  const DLTensor *p[3];
  for (int i = 0; i < 3; i++) {
    t[i] = (DLTensor){NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s[i], NULL, 0};
    p[i] = &t[i];
  }
  ein_options o = {.path = path};
  ein_plan *plan = NULL;
  ein_status st = ein_plan_create(ctx, "i j, j k, k l -> i l", p, 3, NULL, &o,
                                  &plan);
  ein_plan_destroy(plan);
  const ein_error *e = ein_last_error(ctx);
  CHECK(st == EIN_ERR_INVALID_ARGUMENT, "path %s: %s", path,
        ein_status_name(st));
  CHECK(e->message && strstr(e->message, says), "path %s: message '%s' "
        "lacks '%s'", path, e->message ? e->message : "", says);
  char text[1024];
  ein_error_format(e, text, sizeof text);
  CHECK(!strchr(text, '^'), "path %s: a caret in\n%s", path, text);
}

static void bad_paths(ein_ctx *ctx) {
  bad_path(ctx, "[(0, 1)]", "has 1 contraction, but 3 operands need 2");
  bad_path(ctx, "[(0, 1), (0, 1), (0, 1)]", "has 3 contractions");
  bad_path(ctx, "[(0, 3), (0, 1)]", "names operand 3, but only 3 operands");
  bad_path(ctx, "[(0, 1), (0, 2)]", "names operand 2, but only 2 operands");
  bad_path(ctx, "[(1, 1), (0, 1)]", "names operand 1 twice");
  bad_path(ctx, "[(0, 1, 2)]", "names 3 operands");
  bad_path(ctx, "[(0,), (0, 1)]", "names 1 operand;");
  bad_path(ctx, "[(0, 1), (0, 1)", "expected ',' or ']' at character 16");
  bad_path(ctx, "(0, 1), (0, 1)", "expected '(' or '[' opening a contraction");
  bad_path(ctx, "[(0, 1)] (0, 1)", "expected the end of the path");
  bad_path(ctx, "[(a, 1), (0, 1)]", "expected an operand position");
  bad_path(ctx, "optimal", "expected '[' opening");
  bad_path(ctx, "[(0, 99999999999), (0, 1)]", "names operand 99999");
  /* the accepted spellings */
  int64_t s[3][2] = {{2, 3}, {3, 4}, {4, 5}};
  const char *good[] = {"[(0, 1), (0, 1)]", "[[0,1],[0,1]]", "((1,2),(0,1))",
                        " [ (2 , 0) , (1,0), ] ", "[(0,1),(0,1),]"};
  for (size_t g = 0; g < sizeof good / sizeof *good; g++) {
    DLTensor t[3];
    const DLTensor *p[3];
    for (int i = 0; i < 3; i++) {
      t[i] = (DLTensor){NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s[i], NULL, 0};
      p[i] = &t[i];
    }
    ein_options o = {.path = good[g]};
    ein_plan *plan = NULL;
    ein_status st = ein_plan_create(ctx, "i j, j k, k l -> i l", p, 3, NULL,
                                    &o, &plan);
    CHECK(st == EIN_OK, "path %s: %s", good[g], ein_last_error(ctx)->message);
    ein_plan_destroy(plan);
  }
}

/* The "cpu" model: measured once into the cache, then read; damaged or
 * impossible entries measured again. */

/* Writes `entry` as the cache's record of the CPU's rates (key, keylen),
 * loads the "cpu" model from dir into *m and returns how many times the
 * load measured the rates. */
static int load_entry(const char *dir, const char *key, size_t keylen,
                      const char *entry, ein_device_model *m) {
  CHECK(ein_disk_cache_store(dir, key, keylen, entry, strlen(entry)),
        "store");
  int before = ein_cpu_rates_measure_count();
  REQUIRE_OK(ein_cpu_model_in(dir, m));
  return ein_cpu_rates_measure_count() - before;
}
static void cpu_model_cache(void) {
  char dir[] = "/tmp/einc-model-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  ein_device_model m1, m2;
  int n0 = ein_cpu_rates_measure_count();
  REQUIRE_OK(ein_cpu_model_in(dir, &m1));
  CHECK(ein_cpu_rates_measure_count() == n0 + 1, "first use measures");
  CHECK_STR(m1.source, "measured", "first use");
  CHECK(m1.peak[EIN_PEAK_F32] > 0 && m1.peak[EIN_PEAK_F64] > 0 &&
            m1.bytes_per_s > 0 &&
            m1.peak[EIN_PEAK_BF16] >= m1.peak[EIN_PEAK_F32] &&
            m1.peak[EIN_PEAK_TF32] == m1.peak[EIN_PEAK_F32] &&
            m1.measured_at[EIN_PEAK_F32] > 1.7e9 &&
            m1.measured[EIN_PEAK_F32] == m1.peak[EIN_PEAK_F32] &&
            m1.measured_bytes_per_s == m1.bytes_per_s &&
            m1.backend == EIN_BACKEND_CPU,
        "rates %g %g %g %g", m1.peak[EIN_PEAK_BF16], m1.peak[EIN_PEAK_F32],
        m1.peak[EIN_PEAK_F64], m1.bytes_per_s);
  CHECK(strstr(m1.description, "thread") != NULL, "%s", m1.description);
  /* the first 3 uses measure, each keeping the best of every rate; the
   * 4th reads them */
  for (int use = 2; use <= 3; use++) {
    ein_device_model prev = m1;
    REQUIRE_OK(ein_cpu_model_in(dir, &m1));
    CHECK(ein_cpu_rates_measure_count() == n0 + use, "use %d measures", use);
    CHECK_STR(m1.source, "measured", "uses 2 and 3");
    CHECK(m1.peak[EIN_PEAK_F32] >= prev.peak[EIN_PEAK_F32] &&
              m1.peak[EIN_PEAK_F64] >= prev.peak[EIN_PEAK_F64] &&
              m1.bytes_per_s >= prev.bytes_per_s,
          "use %d keeps the best rates", use);
  }
  REQUIRE_OK(ein_cpu_model_in(dir, &m2));
  CHECK(ein_cpu_rates_measure_count() == n0 + 3, "the 4th use reads the cache");
  CHECK_STR(m2.source, "cache", "4th use");
  CHECK(m2.peak[EIN_PEAK_F32] == m1.peak[EIN_PEAK_F32] && m2.peak[EIN_PEAK_F64] == m1.peak[EIN_PEAK_F64] &&
            m2.bytes_per_s == m1.bytes_per_s,
        "the cache gives back the rates measured");
  /* a flipped byte: the cache's checksum fails */
  char key[256], path[4096];
  size_t keylen = ein_cpu_model_key(key, sizeof key);
  ein_disk_cache_path(dir, key, keylen, path, sizeof path);
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL, "the entry is at %s", path);
  if (f) {
    fseek(f, -5, SEEK_END);
    int ch = fgetc(f);
    fseek(f, -5, SEEK_END);
    fputc(ch ^ 0x11, f);
    fclose(f);
  }
  REQUIRE_OK(ein_cpu_model_in(dir, &m2));
  CHECK(ein_cpu_rates_measure_count() == n0 + 4, "a damaged entry is measured");
  CHECK_STR(m2.source, "measured", "after damage");
  /* a whole entry with impossible rates: not trusted */
  const char *liars[] = {"einc cpu rates 1\nf32 -5\nf64 1e9\ncopy 1e9\n",
                         "einc cpu rates 1\nf32 nan\nf64 1e9\ncopy 1e9\n",
                         "einc cpu rates 1\nf32 1e9\nf64 1e9\n",
                         "einc cpu rates 2\nf32 1e9\nf64 1e9\ncopy 1e9\n",
                         "einc cpu rates 1\nf32 1e9\nf64 1e9\ncopy 1e9\nx",
                         "einc cpu rates 3\nruns 3\nf32 1e9\nf64 1e9\ncopy 1e9\n",
                         "einc cpu rates 2\nruns 0\nf32 1e9\nf64 1e9\ncopy 1e9\n",
                         "einc cpu rates 4\nruns 3\nf32 1e9 5\nf64 1e9 5\n"
                         "bf16 1e9 5\nf16 1e9 5\ncopy 1e9 -1\n",
                         "einc cpu rates 4\nruns 3\nf32 1e9 5\nf64 1e9 5\n"
                         "f16 1e9 5\nbf16 1e9 5\ncopy 1e9 5\n"};
  for (int i = 0; i < 9; i++) {
    int measured = load_entry(dir, key, keylen, liars[i], &m2);
    CHECK(measured == 1 && strcmp(m2.source, "measured") == 0 &&
              m2.peak[EIN_PEAK_F32] > 0,
          "entry %d is measured again, not trusted", i);
  }
  /* a low entry of one run (measured under load): the next use measures
   * and keeps the better rates; a version-1 entry counts as one run */
  const char *low[] = {"einc cpu rates 2\nruns 1\nf32 1e3\nf64 1e3\ncopy 1e3\n",
                       "einc cpu rates 1\nf32 1e3\nf64 1e3\ncopy 1e3\n"};
  for (int i = 0; i < 2; i++) {
    int measured = load_entry(dir, key, keylen, low[i], &m2);
    CHECK(measured == 1 &&
              m2.peak[EIN_PEAK_F32] > 1e3 && m2.peak[EIN_PEAK_F64] > 1e3 &&
              m2.bytes_per_s > 1e3,
          "low entry %d measured again, better rates kept: %g %g %g", i,
          m2.peak[EIN_PEAK_F32], m2.peak[EIN_PEAK_F64], m2.bytes_per_s);
  }
  /* a high entry of one run: a new (lower) measurement does not replace
   * it: the best of each rate is kept */
  const char *high =
      "einc cpu rates 2\nruns 1\nf32 1e15\nf64 1e15\ncopy 1e15\n";
  load_entry(dir, key, keylen, high, &m2);
  CHECK(m2.peak[EIN_PEAK_F32] == 1e15 && m2.peak[EIN_PEAK_F64] == 1e15 &&
            m2.bytes_per_s == 1e15 && strcmp(m2.source, "measured") == 0,
        "the best rates kept: %g %g %g", m2.peak[EIN_PEAK_F32],
        m2.peak[EIN_PEAK_F64], m2.bytes_per_s);
  /* a version-2 entry of 3 runs has no half rates: measured again */
  const char *old = "einc cpu rates 2\nruns 3\nf32 1e3\nf64 1e3\ncopy 1e3\n";
  CHECK(load_entry(dir, key, keylen, old, &m2) == 1 &&
            strcmp(m2.source, "measured") == 0 && m2.peak[EIN_PEAK_F32] > 1e3,
        "an old entry is measured again");
  /* and a good one of 3 runs written by hand is read as it is */
  const char *good =
      "einc cpu rates 4\nruns 3\nf32 1e11 1795913070\nf64 5e10 1795913070\n"
      "bf16 3e11 1795913070\nf16 1e11 1795913070\ncopy 2e10 1795913070\n";
  load_entry(dir, key, keylen, good, &m2);
  CHECK(m2.peak[EIN_PEAK_F32] == 1e11 && m2.peak[EIN_PEAK_F64] == 5e10 && m2.bytes_per_s == 2e10 &&
            m2.peak[EIN_PEAK_BF16] == 3e11 && m2.peak[EIN_PEAK_TF32] == 1e11 &&
            m2.measured_at[EIN_PEAK_BF16] == 1795913070 &&
            strcmp(m2.source, "cache") == 0,
        "a good entry is read: %g %g %g", m2.peak[EIN_PEAK_F32], m2.peak[EIN_PEAK_F64],
        m2.bytes_per_s);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "cleanup");
}

/* Seconds of the best of three runs of plan on x and y. */
static double best_run(ein_ctx *ctx, ein_plan *plan, const DLTensor *const *x,
                       DLTensor *y) {
  double best = 1e300;
  for (int r = 0; r < 3; r++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    REQUIRE_OK(ein_plan_execute(ctx, plan, x, 2, y));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double t = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (t < best) best = t;
  }
  return best;
}

/* Issue 35: a cached peak below what a run reaches (measured under load)
 * is raised by the run, in the model and in the cache entry, so MFU stays
 * at most 1; rates not above the peak, other models and a caller's
 * figures are left alone. */
static void cpu_peak_raise(ein_ctx *ctx) {
  char dir[] = "/tmp/einc-raise-XXXXXX", key[256];
  if (!mkdtemp(dir)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  size_t keylen = ein_cpu_model_key(key, sizeof key);
  int64_t s[2] = {384, 384};
  float *buf = calloc(3 * 384 * 384, sizeof *buf);
  DLTensor t[3];
  for (int i = 0; i < 3; i++)
    t[i] = (DLTensor){buf + i * 384 * 384, {kDLCPU, 0}, 2, {kDLFloat, 32, 1},
                      s, NULL, 0};
  const DLTensor *x[] = {&t[0], &t[1]};
  ein_plan *plan;
  REQUIRE_OK(ein_plan_create(ctx, "i j, j k -> i k", x, 2, &t[2], NULL, &plan));
  double sec = best_run(ctx, plan, x, &t[2]);
  double rate = ein_plan_flops(plan) / sec;
  /* a good entry whose f32 peak is half what the run just did */
  char entry[512];
  snprintf(entry, sizeof entry,
           "einc cpu rates 4\nruns 3\nf32 %.17g 1000\nf64 1e9 1000\n"
           "bf16 %.17g 1000\nf16 %.17g 1000\ncopy 1e10 1000\n",
           rate / 2, rate / 2, rate / 2);
  ein_device_model m, m2;
  CHECK(load_entry(dir, key, keylen, entry, &m) == 0 &&
            strcmp(m.source, "cache") == 0 && m.peak[EIN_PEAK_F32] == rate / 2 &&
            m.measured_at[EIN_PEAK_F32] == 1000,
        "the low entry is read: %g", m.peak[EIN_PEAK_F32]);
  double before = ein_plan_mfu(plan, sec, &m);
  CHECK(before > 1.9, "MFU against the low peak %g", before);
  CHECK(!ein_cpu_model_raise_in(dir, &m, EIN_PEAK_F32, rate / 4),
        "a rate below the peak raises nothing");
  CHECK(ein_cpu_model_raise_in(dir, &m, EIN_PEAK_F32, rate), "raised");
  double mfu = ein_plan_mfu(plan, sec, &m);
  CHECK(mfu <= 1 && mfu > 0.99, "MFU after the raise %g", mfu);
  CHECK(m.peak[EIN_PEAK_F32] == rate && m.measured[EIN_PEAK_F32] == rate &&
            m.peak[EIN_PEAK_TF32] == rate && m.peak[EIN_PEAK_BF16] == rate &&
            m.peak[EIN_PEAK_F64] == 1e9 && m.measured_at[EIN_PEAK_F32] > 1.7e9,
        "the model's f32 peak and those that follow it raised: %g %g %g",
        m.peak[EIN_PEAK_F32], m.peak[EIN_PEAK_BF16], m.peak[EIN_PEAK_F64]);
  int n0 = ein_cpu_rates_measure_count();
  REQUIRE_OK(ein_cpu_model_in(dir, &m2));
  CHECK(ein_cpu_rates_measure_count() == n0 && strcmp(m2.source, "cache") == 0 &&
            m2.peak[EIN_PEAK_F32] == rate && m2.peak[EIN_PEAK_BF16] == rate &&
            m2.peak[EIN_PEAK_F64] == 1e9 &&
            m2.measured_at[EIN_PEAK_F32] == m.measured_at[EIN_PEAK_F32] &&
            m2.measured_at[EIN_PEAK_F64] == 1000,
        "the cache entry was rewritten: %g (%g)", m2.peak[EIN_PEAK_F32],
        m2.measured_at[EIN_PEAK_F32]);
  CHECK(ein_plan_mfu(plan, sec, &m2) <= 1, "MFU from the rewritten entry");
  /* a caller's figure and a data sheet's are not the machine's to raise */
  REQUIRE_OK(ein_device_model_set_peak(&m2, EIN_PEAK_F32, 1e3));
  CHECK(!ein_cpu_model_raise_in(dir, &m2, EIN_PEAK_F32, rate) &&
            m2.peak[EIN_PEAK_F32] == 1e3,
        "a given peak stays");
  REQUIRE_OK(ein_device_model_get("h100", &m2));
  CHECK(!ein_cpu_model_raise_in(dir, &m2, EIN_PEAK_F32, 1e15), "h100 stays");
  ein_plan_destroy(plan);
  free(buf);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "cleanup");
}

/* Named models, and a describe on each: its name and rates in the JSON. */
static void named_models(ein_ctx *ctx) {
  ein_device_model m;
  REQUIRE_OK(ein_device_model_get("h100", &m));
  CHECK(strcmp(m.name, "h100") == 0 && m.bytes_per_s == 3.35e12 &&
            m.measured_bytes_per_s == 2.96e12 &&
            m.peak[EIN_PEAK_BF16] == 989.5e12 &&
            m.measured[EIN_PEAK_BF16] == 780e12,
        "h100");
  REQUIRE_OK(ein_device_model_get("h200", &m));
  CHECK(strcmp(m.name, "h200") == 0 && m.bytes_per_s == 4.8e12 &&
            m.measured_bytes_per_s == 0,
        "h200");
  REQUIRE_OK(ein_device_model_get("cuda", &m));
  CHECK(ein_device_model_find(m.name) != NULL && m.description[0],
        "cuda: %s (%s)", m.name, m.description);
  CHECK(ein_device_model_get("tpu", &m) == EIN_ERR_INVALID_ARGUMENT, "tpu");
  CHECK(ein_device_model_get(NULL, &m) == EIN_ERR_INVALID_ARGUMENT, "NULL");
  /* a caller's model: its rates make the prediction */
  int64_t s[2][2] = {{256, 256}, {256, 256}};
  DLTensor t[2];
  const DLTensor *p[2];
  for (int i = 0; i < 2; i++) {
    t[i] = (DLTensor){NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s[i], NULL, 0};
    p[i] = &t[i];
  }
  ein_plan *plan;
  REQUIRE_OK(ein_plan_create(ctx, "i j, j k -> i k", p, 2, NULL, NULL, &plan));
  ein_device_model mine = {.name = "mine", .description = "a test device",
                           .peak = {1e9, 1e9, 1e9, 1e9, 1e9, 1e9},
                           .bytes_per_s = 1e15};
  char json[8192];
  (void)ein_plan_describe_model(plan, EIN_DESCRIBE_JSON, &mine, json,
                                sizeof json);
  /* 2*256^3 FLOPs at 1 GFLOP/s: compute bound, 33.5 ms */
  CHECK(strstr(json, "\"name\":\"mine\",\"description\":\"a test device\","
                     "\"source\":\"caller\",") &&
            strstr(json, "\"flops_per_s\":1e+09,") &&
            strstr(json, "\"predicted_seconds\":0.0335544,"),
        "%s", json);
  mine.bytes_per_s = 0; /* unusable: nothing described */
  CHECK(ein_plan_describe_model(plan, EIN_DESCRIBE_JSON, &mine, json,
                                sizeof json) == 0 &&
            json[0] == 0,
        "%s", json);
  ein_plan_destroy(plan);
}

/* The snprintf-style contract of ein_plan_describe: the length asked for
 * first is the length of the text written next. It must run before anything
 * resolves the "cpu" model, with a cache of its own, so that the first call
 * measures (the Python layer's first Plan.path once got a shorter second
 * text, a NUL and stale bytes). */
static void describe_first_use(ein_ctx *ctx) {
  char dir[] = "/tmp/einc-first-XXXXXX";
  if (!mkdtemp(dir) || setenv("EINC_CACHE_DIR", dir, 1) != 0) {
    CHECK(false, "mkdtemp/setenv failed");
    return;
  }
  ein_plan *plan;
  int64_t s88[] = {8, 8};
  DLTensor t = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s88, NULL, 0};
  const DLTensor *p[] = {&t, &t};
  REQUIRE_OK(ein_plan_create(ctx, "i j, j k -> i k", p, 2, NULL, NULL, &plan));
  int before = ein_cpu_rates_measure_count();
  for (int json = 1; json >= 0; json--) { /* JSON names the source */
    ein_describe_format fmt = json ? EIN_DESCRIBE_JSON : EIN_DESCRIBE_TEXT;
    size_t len = ein_plan_describe(plan, fmt, "cpu", NULL, 0);
    char *buf = malloc(len + 8);
    memset(buf, 'Z', len + 8);
    size_t len2 = ein_plan_describe(plan, fmt, "cpu", buf, len + 1);
    CHECK(len > 0 && len2 == len && strlen(buf) == len,
          "%s: asked %zu, wrote %zu, text of %zu", json ? "json" : "text", len,
          len2, strlen(buf));
    CHECK(len > 2 && buf[len - 1] == '\n' &&
              buf[len - 2] == (json ? '}' : buf[len - 2]),
          "the text ends as a whole report: ...%s", buf + (len > 8 ? len - 8 : 0));
    free(buf);
  }
  CHECK(ein_cpu_rates_measure_count() == before + 1,
        "the first use measured (%d measurements)",
        ein_cpu_rates_measure_count() - before);
  ein_plan_destroy(plan);
  unsetenv("EINC_CACHE_DIR");
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "cleanup");
}

/* The built-in GPU models against their vendors' data sheets, the figures
 * written here as the sheets print them (TFLOP/s; the tensor-core rates
 * with sparsity, which the models halve to dense; the HGX B200's for eight
 * GPUs, which the model divides by 8): a figure typed wrong in cost.c's
 * table fails here. */
static void data_sheet_models(void) {
  static const struct {
    const char *name, *said; /* what the description names */
    double f64, f32, tf32_sparse, bf16_sparse, f16_sparse, fp8_sparse, tb_s;
    int gpus;
  } sheet[] = {
      {"h100", "H100 SXM5", 67, 67, 989, 1979, 1979, 3958, 3.35, 1},
      {"h100-pcie", "H100 PCIe", 51, 51, 756, 1513, 1513, 3026, 2.0, 1},
      {"h200", "H200 SXM", 67, 67, 989, 1979, 1979, 3958, 4.8, 1},
      {"a100", "A100 SXM4 80GB", 19.5, 19.5, 312, 624, 624, 0, 2.039, 1},
      {"l4", "L4", 30.3 / 64, 30.3, 120, 242, 242, 485, 0.3, 1},
      {"b200", "B200", 296, 600, 18e3, 36e3, 36e3, 72e3, 64, 8},
  };
  for (size_t i = 0; i < sizeof sheet / sizeof *sheet; i++) {
    ein_device_model m;
    REQUIRE_OK(ein_device_model_get(sheet[i].name, &m));
    double g = sheet[i].gpus, want[EIN_NPEAK] = {
        sheet[i].f64 / g, sheet[i].f32 / g, sheet[i].tf32_sparse / 2 / g,
        sheet[i].bf16_sparse / 2 / g, sheet[i].f16_sparse / 2 / g,
        sheet[i].fp8_sparse / 2 / g};
    for (int k = 0; k < EIN_NPEAK; k++)
      CHECK(fabs(m.peak[k] - want[k] * 1e12) <= 0.005 * want[k] * 1e12,
            "%s %s: %g FLOP/s, the data sheet %g", sheet[i].name,
            ein_cost_kind_name((ein_peak_kind)k), m.peak[k], want[k] * 1e12);
    CHECK(fabs(m.bytes_per_s - sheet[i].tb_s / g * 1e12) <=
              0.005 * sheet[i].tb_s / g * 1e12,
          "%s: %g B/s, the data sheet %g TB/s", sheet[i].name, m.bytes_per_s,
          sheet[i].tb_s / g);
    CHECK(strstr(m.description, sheet[i].said) &&
              strncmp(m.description, "NVIDIA ", 7) == 0,
          "%s: \"%s\" names the %s", sheet[i].name, m.description,
          sheet[i].said);
  }
}

int main(void) {
  ein_ctx *ctx;
  REQUIRE_OK(ein_ctx_create(&ctx));
  describe_first_use(ctx);
  random_paths(ctx, 300);
  bad_paths(ctx);
  cpu_model_cache();
  cpu_peak_raise(ctx);
  named_models(ctx);
  data_sheet_models();
  ein_ctx_destroy(ctx);
  return test_summary("path_device");
}
