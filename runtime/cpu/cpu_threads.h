/*
 * cpu_threads.h - how many threads the CPU backend gives a plan's LOOP
 * steps (defined in cpu_backend.c, where the reasons are; the fork rule
 * of ein_cpu_threads_now in cpu_threads.c).
 *
 * Takes a plan and the backend's thread count; gives the count for its
 * LOOP steps: 1 when the plan's OpenBLAS-threaded GEMMs take longer than
 * its loops (the two thread pools would spin on each other's cores), else
 * the count unchanged. Also how many threads of its own a GEMM step's
 * batch of small calls is split over, and how many threads work may start
 * at all in this process (fewer in a child forked after threaded work).
 * Owns nothing.
 */
#ifndef EIN_CPU_THREADS_H
#define EIN_CPU_THREADS_H

#include "plan.h"

/* The threads the backend's work may start now, of the count it was
 * opened with (ein_cpu_threads, perhaps before a fork): that count, or 1
 * in a process forked from one that had loaded einc (libgomp's team does
 * not survive fork(): a child's first region would wait forever for
 * threads that only the parent has; cpu_threads.c says why every child).
 * Every count an OpenMP region or the GEMM batch splitter sees has passed
 * through here. Thread-safe, one atomic load. */
int ein_cpu_threads_now(int threads);

int ein_cpu_loop_threads(const ein_plan_ir *plan, int threads);

/* How many threads split the batch of GEMM step g, of `threads`: 1 unless
 * its calls are too small for OpenBLAS's own threads (they would run on
 * one core, one after another) and the batch holds enough work. */
int ein_cpu_gemm_batch_threads(const ein_gemm *g, int threads);

#endif
