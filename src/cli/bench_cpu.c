/*
 * bench_cpu.c - the host as a bench_device: wall-clock timing, the BLAS
 * GEMM rate (n = 2048, the CPU backend's GEMM path) and memcpy bandwidth.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_device.h"
#include "cpu_rates.h"
#ifdef EIN_HAVE_CBLAS
#include <cblas.h>
#endif

static void *cpu_upload(bench_device *dev, const void *src, size_t bytes,
                        char *msg, size_t cap) {
  (void)dev;
  /* 2 MiB aligned (huge-page friendly), and touched, so the first timed run pays no page
   * faults. */
  void *p = NULL;
  if (posix_memalign(&p, (size_t)2 << 20, bytes ? bytes : 64) != 0) {
    snprintf(msg, cap, "out of memory for %zu bytes", bytes);
    return NULL;
  }
#ifdef MADV_HUGEPAGE
  /* Large buffers on huge pages, as NumPy allocates its large arrays, so
   * both sides of a comparison see the same TLB reach. */
  if (bytes >= (size_t)4 << 20) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  if (src)
    memcpy(p, src, bytes);
  else
    memset(p, 0, bytes);
  return p;
}

static void cpu_release(bench_device *dev, void *p) {
  (void)dev;
  free(p);
}

static bool cpu_time(bench_device *dev, bench_work_fn work, void *arg,
                     int warmup, int runs, double *ms, char *msg,
                     size_t cap) {
  (void)dev, (void)msg, (void)cap;
  for (int r = 0; r < warmup; r++)
    if (!work(arg, r)) return false;
  for (int r = 0; r < runs; r++) {
    double t0 = bench_now_ms();
    if (!work(arg, warmup + r)) return false;
    ms[r] = bench_now_ms() - t0;
  }
  return true;
}

/* The clock at each mark of one run: at[i] before step i, at[n] after. */
typedef struct cpu_marks {
  double *at;
} cpu_marks;

static void cpu_mark(void *arg, int step) {
  ((cpu_marks *)arg)->at[step] = bench_now_ms();
}

static bool cpu_time_steps(bench_device *dev, bench_marked_fn work,
                           void *arg, int runs, int nsteps, double *ms,
                           char *msg, size_t cap) {
  (void)dev;
  cpu_marks m = {calloc((size_t)nsteps + 1, sizeof *m.at)};
  if (!m.at) {
    snprintf(msg, cap, "out of memory");
    return false;
  }
  bool ok = true;
  for (int r = 0; r < runs && ok; r++) {
    ok = work(arg, r, cpu_mark, &m);
    for (int i = 0; i < nsteps && ok; i++)
      ms[r * nsteps + i] = m.at[i + 1] - m.at[i];
  }
  if (!ok) *msg = '\0'; /* the work printed its failure */
  free(m.at);
  return ok;
}

/* A half dtype's floor on its own GEMM where the backend has one (issue
 * 35: oneDNN on bf16 units), the best of three after a first run that
 * makes the primitive; false where it has none (f32's floor then). */
static bool half_gemm_rate(ein_dtype dt, int n, double *rate) {
  if (dt != EIN_DT_BF16 && dt != EIN_DT_F16) return false;
  size_t count = (size_t)n * n;
  char *a = bench_random_data(dt, count, 88172645463325252ull);
  char *c = malloc(count * 4);
  double best = 1e300;
  bool ok = a && c;
  for (int r = 0; r < 4 && ok; r++) {
    double t0 = bench_now_ms();
    ok = ein_cpu_gemm_square(dt, n, a, a, c);
    double t = bench_now_ms() - t0;
    if (r > 0 && t < best) best = t;
  }
  free(a), free(c);
  if (ok) *rate = 2.0 * n * (double)n * n / (best * 1e-3);
  return ok;
}

static bool cpu_gemm_rate(bench_device *dev, ein_dtype dt, double *rate,
                          char *msg, size_t cap) {
  (void)dev;
  *rate = 0;
  if (half_gemm_rate(dt, 2048, rate)) return true;
#ifdef EIN_HAVE_CBLAS
  /* f16 and bf16 without a GEMM of their own are computed in f32 on the
   * host, integers in int64 loops: their floor is the f32 GEMM. */
  bool f64 = dt == EIN_DT_F64;
  const int n = 2048;
  size_t elem = f64 ? 8 : 4, count = (size_t)n * n;
  char *a = bench_random_data(f64 ? EIN_DT_F64 : EIN_DT_F32, count,
                              88172645463325252ull);
  char *c = malloc(count * elem);
  if (!a || !c) {
    free(a), free(c);
    snprintf(msg, cap, "out of memory for the GEMM floor");
    return false;
  }
  double best = 1e300;
  for (int r = 0; r < 4; r++) { /* the first run warms BLAS's threads */
    double t0 = bench_now_ms();
    if (f64)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0,
                  (double *)a, n, (double *)a, n, 0.0, (double *)c, n);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                  (float *)a, n, (float *)a, n, 0.0f, (float *)c, n);
    double t = bench_now_ms() - t0;
    if (r > 0 && t < best) best = t;
  }
  free(a), free(c);
  *rate = 2.0 * n * (double)n * n / (best * 1e-3);
#else
  (void)dt, (void)msg, (void)cap;
#endif
  return true;
}

static bool cpu_copy_rate(bench_device *dev, double *rate, char *msg,
                          size_t cap) {
  (void)dev;
  size_t bytes = (size_t)256 << 20;
  char *a = malloc(bytes), *b = malloc(bytes);
  if (!a || !b) {
    free(a), free(b);
    snprintf(msg, cap, "out of memory for the copy floor");
    return false;
  }
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double t[7];
  for (int r = 0; r < 7; r++) {
    double t0 = bench_now_ms();
    memcpy(r % 2 ? a : b, r % 2 ? b : a, bytes);
    t[r] = bench_now_ms() - t0;
  }
  double med = bench_median(t, 7);
  free(a), free(b);
  *rate = 2.0 * (double)bytes / (med * 1e-3);
  return true;
}

static void cpu_close(bench_device *dev) { free(dev); }

/* The last-level cache this core sees: sysfs's index3 size (glibc's
 * sysconf reports a whole-package figure on some virtual machines), else
 * sysconf, else 32 MiB. */
static int64_t llc_bytes(void) {
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  if (f) {
    long kib = 0;
    char unit = 0;
    int got = fscanf(f, "%ld%c", &kib, &unit);
    fclose(f);
    if (got >= 1 && kib > 0)
      return (int64_t)kib * (unit == 'M' ? 1 << 20 : 1 << 10);
  }
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return llc > 0 ? llc : 32 << 20;
}

bench_device *bench_cpu_open(char *msg, size_t cap) {
  bench_device *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(msg, cap, "out of memory");
    return NULL;
  }
  *d = (bench_device){.name = "cpu",
                      .dl = {kDLCPU, 0},
                      .cache_bytes = llc_bytes(),
                      .upload = cpu_upload,
                      .release = cpu_release,
                      .time = cpu_time,
                      .time_steps = cpu_time_steps,
                      .gemm_rate = cpu_gemm_rate,
                      .copy_rate = cpu_copy_rate,
                      .close = cpu_close};
  snprintf(d->description, sizeof d->description, "%ld cores",
           sysconf(_SC_NPROCESSORS_ONLN));
  return d;
}
