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

typedef struct ein_cpu_rates {
  double gemm_f32, gemm_f64; /* FLOP/s of an n^3 GEMM */
  double copy;               /* bytes read + written per second */
} ein_cpu_rates;

/* Measures the rates: about 0.1 s (short GEMMs and copies, the best of a
 * few runs, so a busy machine reads low rather than taking long). False
 * when memory for the buffers runs out. */
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
 * fallback): row-major, no transposes, alpha 1. */
void ein_cpu_gemm_square(ein_dtype dt, int64_t n, const char *a,
                         const char *b, char *c);

#endif
