/*
 * cpu_map.h - LOOP steps whose map is not the plain product (plan.h,
 * ein_map_op) on the CPU (see cpu_map.c).
 */
#ifndef EIN_CPU_MAP_H
#define EIN_CPU_MAP_H

#include "plan.h"

/* Runs one such step on host memory (src1 NULL for one source);
 * EIN_ERR_LIMIT past EIN_MAX_DIMS axes. */
ein_status ein_cpu_map(const ein_step *step, char *dst, const char *src0,
                       const char *src1);

#endif
