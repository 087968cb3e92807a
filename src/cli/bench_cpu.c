/*
 * bench_cpu.c - the host as a bench_device: wall-clock timing, and the
 * GEMM rate and copy bandwidth as the CPU backend measures them
 * (cpu_rates.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_device.h"
#include "cpu_rates.h"

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

/* The floors are the CPU backend's own measurements (cpu_rates.h), the
 * ones the device model "cpu" is made of: one way of measuring the host.
 * A half dtype's GEMM floor is its own GEMM's where the backend has one
 * (oneDNN on bf16 units), else f32's, as plans compute it; integers run
 * in loops whose floor is f32's GEMM too. Without BLAS there is no GEMM
 * floor (the fallback's loops are no peak to compare with). */
static bool cpu_gemm_rate(bench_device *dev, ein_dtype dt, double *rate,
                          char *msg, size_t cap) {
  (void)dev;
  *rate = 0;
  if ((dt == EIN_DT_BF16 || dt == EIN_DT_F16) && ein_cpu_gemm_rate(dt, rate))
    return true;
#ifdef EIN_HAVE_CBLAS
  if (ein_cpu_gemm_rate(dt == EIN_DT_F64 ? EIN_DT_F64 : EIN_DT_F32, rate))
    return true;
  snprintf(msg, cap, "out of memory for the GEMM floor");
  return false;
#else
  (void)msg, (void)cap;
  return true;
#endif
}

static bool cpu_copy_rate(bench_device *dev, double *rate, char *msg,
                          size_t cap) {
  (void)dev;
  if (ein_cpu_copy_rate(rate)) return true;
  snprintf(msg, cap, "out of memory for the copy floor");
  return false;
}

static void cpu_close(bench_device *dev) { free(dev); }

bench_device *bench_cpu_open(char *msg, size_t cap) {
  bench_device *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(msg, cap, "out of memory");
    return NULL;
  }
  *d = (bench_device){.name = "cpu",
                      .dl = {kDLCPU, 0},
                      .cache_bytes = (int64_t)ein_cpu_llc_bytes(),
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
