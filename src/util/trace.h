/*
 * trace.h - where the time of a call goes, phase by phase, for the first
 * call of a process (its one-time steps: libraries loaded, devices opened,
 * kernels compiled), which no per-call timer shows.
 *
 * Off unless a program turns it on (ein_trace_enable; `einc eval -v`
 * does) or the environment has EINC_TRACE=1. When on, the library's slow
 * one-time steps record (phase, seconds): loading the CUDA libraries,
 * opening the device, creating the cuBLAS handle, planning and code
 * generation, each kernel's memory-cache hit, disk-cache load, NVRTC
 * compile or module load, the emulated device's compile or disk hit, and
 * each run. The library never prints: a program reads the records
 * (ein_trace_get) and prints them. When off, a phase costs one relaxed
 * atomic load.
 *
 * Owns: a process-wide log of up to EIN_TRACE_MAX records (later ones are
 * dropped), guarded by a mutex. Phase names are static strings.
 */
#ifndef EIN_TRACE_H
#define EIN_TRACE_H

#include <stdbool.h>

enum { EIN_TRACE_MAX = 128 };

/* Turns recording on or off (overrides EINC_TRACE). */
void ein_trace_enable(bool on);

/* Whether records are being kept (reads EINC_TRACE on first use). */
bool ein_trace_on(void);

/* A monotonic clock in seconds; 0 when tracing is off (so a phase that
 * was not timed is not recorded). */
double ein_trace_now(void);

/* Records `phase` as having taken from t0 (ein_trace_now's value) to now;
 * nothing when tracing is off or t0 is 0. */
void ein_trace_end(const char *phase, double t0);

/* The records so far: how many (kept ones), and record i: its phase,
 * when it began (ein_trace_now's clock) and how long it took. Records
 * are kept in the order phases ended, so a phase that encloses others
 * (a run that compiles) comes after them; a reader orders by start and
 * nests by interval. */
int ein_trace_count(void);
bool ein_trace_get(int i, const char **phase, double *start,
                   double *seconds);

/* Forgets the records. */
void ein_trace_clear(void);

#endif
