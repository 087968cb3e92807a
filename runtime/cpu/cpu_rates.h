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
 * short runs of one size at the threads the backend's calls use, and the
 * copy the best of three, so load from other processes (which only ever
 * slows a run) must hold through every run to lower it. False when memory
 * for the buffers runs out. */
bool ein_cpu_rates_measure(ein_cpu_rates *out);

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
