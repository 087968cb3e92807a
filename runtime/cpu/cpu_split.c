/*
 * cpu_split.c - one job split over the backend's threads in equal
 * contiguous parts (cpu_contract.h, ein_cpu_split), for the contraction
 * kernels of cpu_contract.c and cpu_contract_rows.c alike.
 */
#include "cpu_contract.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void ein_cpu_split(int threads, int64_t n, bool worth, ein_cpu_part *part,
                   const void *job) {
#ifdef _OPENMP
  if (threads > 1 && n >= threads && worth) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int p = 0; p < threads; p++)
      part(job, n * p / threads, n * (p + 1) / threads);
    return;
  }
#else
  (void)threads;
  (void)worth;
#endif
  /* Not an OpenMP region with if(0): libgomp still sets up a team of
   * one, which tripled the time of an 8x8 matrix-vector product. */
  part(job, 0, n);
}
