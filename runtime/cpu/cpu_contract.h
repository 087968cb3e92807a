/*
 * cpu_contract.h - LOOP contractions on the CPU that the general loops of
 * cpu_loops.h run poorly (see cpu_contract.c and cpu_contract_rows.c):
 * batches of tiny matrices, outer products of rows, and the sum of the
 * products of one matrix with another's transpose.
 *
 * Each takes a LOOP step with two sources and its data; each gives true
 * when it ran the step, false when the step is not of the form it
 * handles (the caller then tries the next, and finally the general
 * loops). They own nothing; the threads they may use are the caller's
 * (the plan's LOOP threads, cpu_threads.h).
 */
#ifndef EIN_CPU_CONTRACT_H
#define EIN_CPU_CONTRACT_H

#include <stdbool.h>

#include "plan.h"

/* Largest m, n and k the tiny-matrix kernel takes. */
enum { EIN_CPU_TINY = 16 };

/* Runs part(job, lo, hi) over the rows [0, n): in `threads` equal parts
 * at once when OpenMP is on, there are threads to share and rows for
 * each, and the caller judges the work `worth` a parallel region; else as
 * one part (cpu_split.c). */
typedef void ein_cpu_part(const void *job, int64_t lo, int64_t hi);
void ein_cpu_split(int threads, int64_t n, bool worth, ein_cpu_part *part,
                   const void *job);

/* Tries every kernel below in turn. */
bool ein_cpu_contract(const ein_step *step, char *dst, const char *src0,
                      const char *src1, int threads);

/* A batch of tiny GEMMs, or of contiguous dot products (cpu_contract.c). */
bool ein_cpu_tiny_contract(const ein_step *step, char *dst, const char *src0,
                           const char *src1, int threads);

/* dst[..., i, j] = a[..., i] b[..., j]: nothing summed, dst's fastest axis
 * contiguous in one source and absent from the other (cpu_contract_rows.c). */
bool ein_cpu_outer(const ein_step *step, char *dst, const char *src0,
                   const char *src1, int threads);

/* sum over p, q of a[p, q] b[q, p] into one value, a contiguous along q
 * and b along p (`i j, j i ->`; cpu_contract_rows.c). */
bool ein_cpu_trace_dot(const ein_step *step, char *dst, const char *src0,
                       const char *src1, int threads);

#endif
