/*
 * cpu_rates.c - measuring this host's GEMM rate and copy bandwidth (see
 * cpu_rates.h).
 *
 * A GEMM too small for the machine understates its peak, one too large
 * wastes the user's time: each dtype starts at n = 256 and doubles (to
 * 2048 at most) until the best of three runs takes 3 ms and the rate
 * stopped growing; the rate is the best any run reached, at any size,
 * two more runs at the last size included (one short measurement under
 * load halved the peak and MFU read 199%; a search sized by one run stopped at 256 under load and read 0.002
 * TFLOP/s for bf16 against 0.66). The GEMMs run through the backend's
 * own routine, so on the path and threads its calls use. The copy moves
 * twice the last-level cache each way (at least 32 MiB), so it measures
 * memory rather than cache, split across the backend's threads as its
 * own copies are: the best of seven after a run that faults the pages in.
 * About 0.3 s in all on two idle cores.
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

/* Runs each size is timed for (the best counts), and runs in all at the
 * size the search ends on. */
enum { SIZE_RUNS = 3, GEMM_RUNS = 5 };

/* A size whose best run takes this long is big enough: the call's fixed
 * costs and the threads' start are noise, and a run fits between another
 * process's bursts. */
#define GEMM_RUN_S 3e-3

/* Past this a larger size is not tried (2048^3 in f64 at 30 GFLOP/s is
 * 0.6 s a run). */
#define GEMM_LONG_S 25e-3

/* A larger size is tried while the rate still grows by this factor: a
 * team thread descheduled by another process costs the whole team a
 * scheduler quantum (4 to 16 ms on the bench machine under load, whatever
 * the size), so under steady load the rate keeps growing with the size. */
#define GEMM_GROWTH 1.25

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

/* The best of `runs` n^3 GEMMs in dt (a ein_cpu_gemm_timer), in
 * seconds; < 0 without memory or where the backend has no GEMM for dt. */
static double gemm_seconds(void *ctx, int64_t n, int runs) {
  ein_dtype dt = *(const ein_dtype *)ctx;
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

static double flops_per_s(int64_t n, double seconds) {
  return 2.0 * (double)n * (double)n * (double)n /
         (seconds > 0 ? seconds : 1e-9);
}

bool ein_cpu_gemm_rate_by(ein_cpu_gemm_timer time, void *ctx,
                          double *rate) {
  *rate = 0;
  if (time(ctx, 192, 1) < 0) return false; /* wakes the threads */
  int64_t n = 256;
  double best = 0, t = -1;
  for (;; n *= 2) {
    if ((t = time(ctx, n, SIZE_RUNS)) < 0) return false;
    double r = flops_per_s(n, t), before = best;
    best = r > best ? r : best;
    bool grows = r > GEMM_GROWTH * before && t < GEMM_LONG_S;
    if (n >= 2048 || (t >= GEMM_RUN_S && !grows)) break;
  }
  if ((t = time(ctx, n, GEMM_RUNS - SIZE_RUNS)) < 0) return false;
  double r = flops_per_s(n, t);
  *rate = r > best ? r : best;
  return true;
}

bool ein_cpu_gemm_rate(ein_dtype dt, double *rate) {
  return ein_cpu_gemm_rate_by(gemm_seconds, &dt, rate);
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
size_t ein_cpu_llc_bytes(void) {
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  long kib = 0;
  char unit = 0;
  int got = f ? fscanf(f, "%ld%c", &kib, &unit) : 0;
  if (f) fclose(f);
  if (got >= 1 && kib > 0) return (size_t)kib << (unit == 'M' ? 20 : 10);
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return llc > 0 ? (size_t)llc : (size_t)32 << 20;
}

/* Copies the copy rate is the best of (after one that faults the pages
 * in). */
enum { COPY_RUNS = 7 };

bool ein_cpu_copy_rate(double *rate) {
  size_t bytes = 2 * ein_cpu_llc_bytes(), lo = (size_t)32 << 20,
         hi = (size_t)1 << 30;
  bytes = bytes < lo ? lo : bytes > hi ? hi : bytes;
  char *a = ein_malloc(bytes), *b = ein_malloc(bytes);
  bool ok = a && b;
  if (ok) {
    int threads = ein_cpu_threads_now(ein_cpu_threads());
    memset(a, 1, bytes);
    parallel_copy(b, a, bytes, threads); /* faults b's pages in */
    double best = 1e300;
    for (int r = 0; r < COPY_RUNS; r++) {
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
  *rate = ein_cpu_gemm_rate(dt, &own) && own > f32 ? own : f32;
}

bool ein_cpu_rates_measure(ein_cpu_rates *out) {
  atomic_fetch_add(&measure_count, 1);
  memset(out, 0, sizeof *out);
  double *r = out->rate;
  bool ok = ein_cpu_gemm_rate(EIN_DT_F32, &r[EIN_RATE_F32]) &&
            ein_cpu_gemm_rate(EIN_DT_F64, &r[EIN_RATE_F64]) &&
            ein_cpu_copy_rate(&r[EIN_RATE_COPY]);
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
