/*
 * cpu_rates.c - measuring this host's GEMM rate and copy bandwidth (see
 * cpu_rates.h).
 *
 * A GEMM too small for the machine understates its peak, one too large
 * wastes the user's time: each dtype starts at n = 256 and doubles until
 * a run takes 3 ms (up to 2048), then the best of five runs of that size
 * counts (issue 35: one short measurement under load halved the peak and
 * MFU read 199%). The GEMMs run through the backend's own routine, so on
 * the threads its calls use. The copy moves twice the last-level cache
 * each way (at least 32 MiB), so it measures memory rather than cache,
 * split across the backend's threads as its own copies are: the best of
 * three after a run that faults the pages in. About 0.3 s in all on two
 * cores.
 */
#include "cpu_rates.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cpu_threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static atomic_int measure_count;

int ein_cpu_rates_measure_count(void) { return atomic_load(&measure_count); }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs of one size a GEMM rate is the best of: a process on the other
 * core(s) only ever slows a run, so it must last through all of them to
 * lower the rate (one run under a build read 97 GFLOP/s against 193). */
enum { GEMM_RUNS = 5 };

/* A run this long is the size measured: long enough that the call's
 * fixed costs and the threads' start are noise, short enough that five
 * of them fit between another process's bursts. */
#define GEMM_RUN_S 3e-3

/* n*n ones in dt: finite, normal values (zeros or denormals could take
 * another path through a kernel). */
static void fill_ones(ein_dtype dt, char *a, int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    if (dt == EIN_DT_F64) {
      ((double *)a)[i] = 1.0;
    } else if (dt == EIN_DT_F32) {
      ((float *)a)[i] = 1.0f;
    } else {
      uint16_t one = dt == EIN_DT_BF16 ? 0x3f80 : 0x3c00;
      memcpy(a + 2 * i, &one, 2);
    }
  }
}

/* The best of `runs` n^3 GEMMs in dt, in seconds; < 0 without memory or
 * where the backend has no GEMM for dt. */
static double gemm_seconds(ein_dtype dt, int64_t n, int runs) {
  size_t count = (size_t)(n * n), out = dt == EIN_DT_F64 ? 8 : 4;
  char *a = ein_malloc(count * ein_dtype_size(dt)),
       *c = ein_malloc(count * out);
  double best = -1;
  if (a && c) {
    memset(c, 0, count * out); /* its page faults are not the GEMM's */
    fill_ones(dt, a, (int64_t)count);
    for (int r = 0; r < runs; r++) {
      double t0 = now_s();
      if (!ein_cpu_gemm_square(dt, n, a, a, c)) break;
      double t = now_s() - t0;
      if (best < 0 || t < best) best = t;
    }
  }
  ein_free(a);
  ein_free(c);
  return best;
}

/* FLOP/s in dt: the size doubles from 256 until a run takes GEMM_RUN_S
 * (2048 at most), then the best of GEMM_RUNS runs of that size. False
 * where the backend has no GEMM for dt (or no memory). */
static bool gemm_rate(ein_dtype dt, double *rate) {
  *rate = 0;
  if (gemm_seconds(dt, 192, 1) < 0) return false; /* wakes the threads */
  int64_t n = 256;
  for (; n < 2048; n *= 2) {
    double t = gemm_seconds(dt, n, 1);
    if (t < 0) return false;
    if (t >= GEMM_RUN_S) break;
  }
  double t = gemm_seconds(dt, n, GEMM_RUNS);
  if (t < 0) return false;
  *rate = 2.0 * (double)n * (double)n * (double)n / (t > 0 ? t : 1e-9);
  return true;
}

/* One copy of `bytes` split into a chunk per thread. */
static void parallel_copy(char *dst, const char *src, size_t bytes,
                          int threads) {
  size_t chunk = (bytes + (size_t)threads - 1) / (size_t)threads;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
  for (int t = 0; t < threads; t++) {
    size_t lo = (size_t)t * chunk;
    if (lo < bytes)
      memcpy(dst + lo, src + lo, bytes - lo < chunk ? bytes - lo : chunk);
  }
}

/* The last-level cache: sysfs's index3 (glibc's sysconf reports a whole
 * package on some virtual machines), else sysconf, else 32 MiB. */
static size_t llc_bytes(void) {
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  long kib = 0;
  char unit = 0;
  int got = f ? fscanf(f, "%ld%c", &kib, &unit) : 0;
  if (f) fclose(f);
  if (got >= 1 && kib > 0) return (size_t)kib << (unit == 'M' ? 20 : 10);
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return llc > 0 ? (size_t)llc : (size_t)32 << 20;
}

static bool copy_rate(double *rate) {
  size_t bytes = 2 * llc_bytes(), lo = (size_t)32 << 20, hi = (size_t)1 << 30;
  bytes = bytes < lo ? lo : bytes > hi ? hi : bytes;
  char *a = ein_malloc(bytes), *b = ein_malloc(bytes);
  bool ok = a && b;
  if (ok) {
    int threads = ein_cpu_threads_now(ein_cpu_threads());
    memset(a, 1, bytes);
    parallel_copy(b, a, bytes, threads); /* faults b's pages in */
    double best = 1e300;
    for (int r = 0; r < 3; r++) {
      double t0 = now_s();
      parallel_copy(r % 2 ? a : b, r % 2 ? b : a, bytes, threads);
      double t = now_s() - t0;
      if (t < best) best = t;
    }
    *rate = 2.0 * (double)bytes / (best > 0 ? best : 1e-9);
  }
  ein_free(a);
  ein_free(b);
  return ok;
}

/* A half dtype's rate: its own GEMM's where the backend has one and it is
 * faster, else f32's (plans convert to f32 and run that GEMM). */
static void half_rate(ein_dtype dt, double f32, double *rate) {
  double own;
  *rate = gemm_rate(dt, &own) && own > f32 ? own : f32;
}

bool ein_cpu_rates_measure(ein_cpu_rates *out) {
  atomic_fetch_add(&measure_count, 1);
  memset(out, 0, sizeof *out);
  double *r = out->rate;
  bool ok = gemm_rate(EIN_DT_F32, &r[EIN_RATE_F32]) &&
            gemm_rate(EIN_DT_F64, &r[EIN_RATE_F64]) &&
            copy_rate(&r[EIN_RATE_COPY]);
  if (ok) {
    half_rate(EIN_DT_BF16, r[EIN_RATE_F32], &r[EIN_RATE_BF16]);
    half_rate(EIN_DT_F16, r[EIN_RATE_F32], &r[EIN_RATE_F16]);
  }
  double t = (double)time(NULL);
  for (int i = 0; i < EIN_NRATE; i++) out->when[i] = t;
  return ok;
}

void ein_cpu_model_name(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !colon) continue;
    char *v = colon + 1 + (colon[1] == ' ');
    v[strcspn(v, "\n")] = '\0';
    if (*v) snprintf(buf, cap, "%s", v);
    break;
  }
  fclose(f);
}
