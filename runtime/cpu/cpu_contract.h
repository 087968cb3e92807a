/*
 * cpu_contract.h - LOOP contractions of many tiny matrices on the CPU
 * (see cpu_contract.c).
 *
 * Takes a LOOP step with two sources and its data; gives true when it ran
 * the step, false when the step is not of the shape it handles (the
 * caller then runs the general loops of cpu_loops.h). Owns nothing.
 */
#ifndef EIN_CPU_CONTRACT_H
#define EIN_CPU_CONTRACT_H

#include <stdbool.h>

#include "plan.h"

/* Largest m, n and k the tiny-matrix kernel takes. */
enum { EIN_CPU_TINY = 16 };

bool ein_cpu_tiny_contract(const ein_step *step, char *dst, const char *src0,
                           const char *src1, int threads);

#endif
