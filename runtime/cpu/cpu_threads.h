/*
 * cpu_threads.h - how many threads the CPU backend gives a plan's LOOP
 * steps (defined in cpu_backend.c, where the reasons are).
 *
 * Takes a plan and the backend's thread count; gives the count for its
 * LOOP steps: 1 when the plan's OpenBLAS-threaded GEMMs take longer than
 * its loops (the two thread pools would spin on each other's cores), else
 * the count unchanged. Owns nothing.
 */
#ifndef EIN_CPU_THREADS_H
#define EIN_CPU_THREADS_H

#include "plan.h"

int ein_cpu_loop_threads(const ein_plan_ir *plan, int threads);

#endif
