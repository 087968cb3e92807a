/*
 * cpu_threads.c - how many threads the CPU backend's work may start
 * (cpu_threads.h, cpu_rates.h): the count it opens with (EINC_NUM_THREADS,
 * else OpenMP's), and 1 in a child forked from a process that loaded einc.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "cpu_rates.h"
#include "cpu_threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Fork safety (docs/design.md, "Fork safety"). GNU libgomp keeps its
 * team's threads after a region and has no fork handler: a child forked
 * after a team started inherits the team's bookkeeping but none of its
 * threads, and its first region waits forever at the team's barrier
 * (DataLoader workers, multiprocessing's fork start method). The team is
 * the process's, not einc's: torch, linked to the same libgomp, leaves
 * one that einc's regions in a child then hang on, though einc never ran
 * threaded in the parent. libgomp cannot say whether a team exists, nor
 * rebuild one in the child. So every child forked from a process that has
 * loaded einc (the handler is registered when the library loads) runs the
 * backend's work on its calling thread, as PyTorch's DataLoader workers
 * do, and so do its own children. OpenBLAS's threads are not ours: its
 * own fork handler stops them before fork() and it starts them again on
 * demand, in parent and child alike. */
static atomic_bool forked;

/* pthread_atfork's child handler: the child has only the forking thread. */
static void mark_forked_child(void) {
  atomic_store_explicit(&forked, true, memory_order_relaxed);
}

__attribute__((constructor)) static void register_fork_handler(void) {
  pthread_atfork(NULL, NULL, mark_forked_child);
}

static bool forked_child(void) {
  return atomic_load_explicit(&forked, memory_order_relaxed);
}

int ein_cpu_threads_now(int threads) {
  return threads <= 1 || forked_child() ? 1 : threads;
}

int ein_cpu_threads(void) {
  if (forked_child()) return 1;
  const char *env = getenv("EINC_NUM_THREADS");
  if (env && atoi(env) > 0) return atoi(env);
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
