/*
 * cpu_loops.h - LOOP and FILL steps on the CPU (see cpu_loops.c).
 */
#ifndef EIN_CPU_LOOPS_H
#define EIN_CPU_LOOPS_H

#include "plan.h"

/* Runs one LOOP or FILL step on host memory; src0/src1 may be NULL when
 * the step has fewer sources. `threads` bounds the OpenMP threads. */
ein_status ein_cpu_loop(const ein_step *step, char *dst, const char *src0,
                        const char *src1, int threads);

#endif
