/*
 * cpu_rates.c - measuring this host's GEMM rate and copy bandwidth (see
 * cpu_rates.h).
 *
 * A GEMM too small for the machine understates its peak, one too large
 * wastes the user's time: each dtype starts at n = 256 and doubles while a
 * run takes under 5 ms (up to 2048), and the best rate seen counts (a
 * quick size runs twice). The copy moves twice the last-level cache each
 * way (at least 32 MiB), so it measures memory rather than cache, split
 * across the backend's threads as its own copies are: the best of three
 * after a run that faults the pages in. About 0.1 s in all on two cores.
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

/* An n^3 GEMM in dt, in seconds: the best of two runs when the first is
 * quick (under 2 ms, where noise weighs most); < 0 without memory. */
static double gemm_seconds(ein_dtype dt, int64_t n) {
  size_t bytes = (size_t)(n * n) * ein_dtype_size(dt);
  char *a = ein_calloc(1, bytes), *c = ein_malloc(bytes);
  double best = -1;
  if (a && c) {
    memset(c, 0, bytes); /* its page faults are not the GEMM's */
    for (size_t i = 0; i < bytes; i += 64) a[i] = 1; /* any finite values */
    for (int r = 0; r < 2 && (best < 0 || best < 2e-3); r++) {
      double t0 = now_s();
      ein_cpu_gemm_square(dt, n, a, a, c);
      double t = now_s() - t0;
      if (best < 0 || t < best) best = t;
    }
  }
  ein_free(a);
  ein_free(c);
  return best;
}

/* FLOP/s of the largest GEMM that is still quick (see the top). */
static bool gemm_rate(ein_dtype dt, double *rate) {
  *rate = 0;
  if (gemm_seconds(dt, 192) < 0) return false; /* wakes the BLAS threads */
  for (int64_t n = 256; n <= 2048; n *= 2) {
    double t = gemm_seconds(dt, n);
    if (t < 0) return false;
    double r = 2.0 * (double)n * (double)n * (double)n / (t > 0 ? t : 1e-9);
    if (r > *rate) *rate = r;
    if (t >= 5e-3) break;
  }
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

bool ein_cpu_rates_measure(ein_cpu_rates *out) {
  atomic_fetch_add(&measure_count, 1);
  memset(out, 0, sizeof *out);
  return gemm_rate(EIN_DT_F32, &out->gemm_f32) &&
         gemm_rate(EIN_DT_F64, &out->gemm_f64) && copy_rate(&out->copy);
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
