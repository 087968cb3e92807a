/*
 * cpu_rates.h - this host's peaks as the CPU backend reaches them: the
 * GEMM rate (f32, f64) through the backend's own GEMM and the copy
 * bandwidth with its threads. The device model "cpu" (src/api) is built
 * from them and cached on disk, so a process measures at most once.
 *
 * Takes nothing; gives rates in FLOP/s and bytes/s. Owns nothing.
 */
#ifndef EIN_CPU_RATES_H
#define EIN_CPU_RATES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

/* The rates einc keeps for the host, by index into ein_cpu_rates. */
typedef enum ein_cpu_rate {
  EIN_RATE_F32,  /* FLOP/s of an n^3 GEMM in f32 */
  EIN_RATE_F64,
  EIN_RATE_BF16, /* through the backend's half GEMM where it has one
                    (cpu_dnnl.h), else f32's rate */
  EIN_RATE_F16,
  EIN_RATE_COPY, /* bytes read + written per second */
  EIN_NRATE
} ein_cpu_rate;

typedef struct ein_cpu_rates {
  double rate[EIN_NRATE];
  double when[EIN_NRATE]; /* Unix seconds the rate was measured at */
} ein_cpu_rates;

/* Measures the rates: about 0.3 s. Each GEMM rate is the best of several
 * short runs at the threads the backend's calls use, and the copy the
 * best of seven, so load from other processes (which only ever
 * slows a run) must hold through every run to lower it. False when memory
 * for the buffers runs out. */
bool ein_cpu_rates_measure(ein_cpu_rates *out);

/* The measurements ein_cpu_rates_measure makes, one rate each, and the
 * only place einc measures the host (einc bench's floor calls them too):
 * FLOP/s of dt's GEMM through ein_cpu_gemm_square, the path plans' GEMMs
 * take (oneDNN for f16/bf16 where the backend has it, oneDNN's or
 * OpenBLAS's sgemm for f32 as gemm calls pick), on the threads calls use,
 * the best run over a search of sizes (false where the backend has no
 * GEMM for dt, or no memory); and bytes read + written per second by a
 * copy of twice the last-level cache split across the backend's threads,
 * the best of seven. */
bool ein_cpu_gemm_rate(ein_dtype dt, double *rate);
bool ein_cpu_copy_rate(double *rate);

/* The best of `runs` n^3 GEMMs in seconds, < 0 on a failure. */
typedef double (*ein_cpu_gemm_timer)(void *ctx, int64_t n, int runs);

/* ein_cpu_gemm_rate's search over the sizes with `time` as the GEMM
 * (tests give a scripted timer: how the rate reads under load). */
bool ein_cpu_gemm_rate_by(ein_cpu_gemm_timer time, void *ctx, double *rate);

/* The last-level cache this core sees, in bytes: sysfs's index3 size
 * (glibc's sysconf reports a whole package on some virtual machines),
 * else sysconf, else 32 MiB. */
size_t ein_cpu_llc_bytes(void);

/* How many times this process measured (tests read it to tell a cache hit
 * from a measurement without timing anything). */
int ein_cpu_rates_measure_count(void);

/* The CPU's model name ("Intel(R) Xeon(R) ...", /proc/cpuinfo), or
 * "unknown CPU". */
void ein_cpu_model_name(char *buf, size_t cap);

/* Threads the CPU backend runs with: EINC_NUM_THREADS, else OpenMP's;
 * 1 in a forked child (cpu_threads.h, ein_cpu_threads_now, which work
 * goes through). */
int ein_cpu_threads(void);

/* One n x n x n GEMM through the CPU backend's own routine (BLAS or its
 * fallback; for f16/bf16 the half GEMM, C in f32): row-major, no
 * transposes, alpha 1. False for a half dtype the backend has no GEMM
 * for (plans then convert to f32) or when the call fails. */
bool ein_cpu_gemm_square(ein_dtype dt, int64_t n, const char *a,
                         const char *b, char *c);

#endif
