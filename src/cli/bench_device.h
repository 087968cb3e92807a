/*
 * bench_device.h - what `einc bench` needs from the machine it measures:
 * memory for inputs and outputs, a timer, and the floors (the GEMM rate and
 * the copy bandwidth, measured in the same run as the case).
 *
 * Two implementations: the host (wall clock, BLAS GEMM, memcpy) and a CUDA
 * device (CUDA events on a stream the bench gives the context, cuBLAS GEMM
 * 8192^3, a 1 GiB device-to-device copy). Builds without CUDA have a stub
 * that says so. Only the CLI includes this.
 */
#ifndef EINC_BENCH_DEVICE_H
#define EINC_BENCH_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "ein.h"

typedef struct bench_device bench_device;

/* Work to time: called once per run; returns false on failure, with the
 * reason already printed. */
typedef bool (*bench_work_fn)(void *arg, int run);

/* Work to time step by step: like bench_work_fn, passing mark and
 * mark_arg to ein_plan_execute_marked. */
typedef bool (*bench_marked_fn)(void *arg, int run, ein_step_mark_fn mark,
                                void *mark_arg);

struct bench_device {
  const char *name;      /* "cpu", "cuda:0" */
  char description[128]; /* "NVIDIA H100 80GB HBM3", "2 cores" */
  DLDevice dl;           /* where tensors live */
  int64_t cache_bytes;   /* last-level cache: inputs under 2x this rotate */
  /* Memory on the device holding a copy of `bytes` host bytes (src NULL:
   * uninitialised). NULL on failure, with the reason in msg. */
  void *(*upload)(bench_device *dev, const void *src, size_t bytes,
                  char *msg, size_t cap);
  void (*release)(bench_device *dev, void *ptr);
  /* Runs `work` warmup times untimed, then `runs` times, storing each
   * run's milliseconds in ms[]. */
  bool (*time)(bench_device *dev, bench_work_fn work, void *arg, int warmup,
               int runs, double *ms, char *msg, size_t cap);
  /* Runs `work` `runs` times with a mark around each of its `nsteps`
   * steps: ms[r * nsteps + i] is step i's milliseconds in run r (the host
   * clock between marks; on a GPU, events recorded at the marks). */
  bool (*time_steps)(bench_device *dev, bench_marked_fn work, void *arg,
                     int runs, int nsteps, double *ms, char *msg, size_t cap);
  /* FLOP/s of an n^3 GEMM in dtype dt (n = 8192 on a GPU, smaller on the
   * host); 0 when the device has no GEMM for dt. */
  bool (*gemm_rate)(bench_device *dev, ein_dtype dt, double *flops_per_s,
                    char *msg, size_t cap);
  /* Copy bandwidth, bytes read plus bytes written per second. */
  bool (*copy_rate)(bench_device *dev, double *bytes_per_s, char *msg,
                    size_t cap);
  void (*close)(bench_device *dev);
};

/* The host. */
bench_device *bench_cpu_open(char *msg, size_t cap);

/* CUDA device `device`; tells ctx to queue its work on the bench's stream.
 * NULL with the reason in msg when the build has no CUDA or no GPU. */
bench_device *bench_cuda_open(int device, ein_ctx *ctx, char *msg,
                              size_t cap);

/* Median of n values (sorts them). */
double bench_median(double *v, int n);

/* The monotonic clock in milliseconds. */
double bench_now_ms(void);

/* n random elements of dtype dt in a new host buffer (free() it): floats
 * in [-1, 1), integers in [-8, 8) (unsigned [0, 16)), bools half true.
 * NULL when out of memory. */
void *bench_random_data(ein_dtype dt, size_t n, uint64_t seed);

#endif
