/*
 * emu_block.h - running one thread block of an emulated kernel launch.
 *
 * Takes: a launch (the kernel's entry point, its arguments and geometry)
 * and a worker, which owns the scheduler's context, the block's state and
 * a pool of fiber stacks. Gives: the block run to the end, or stopped at
 * the first mistake with a message naming the block and the threads
 * (threads at different barriers, a barrier or shuffle some threads never
 * reach, a lane outside its own shuffle mask).
 *
 * One worker runs one block at a time on one OS thread; several workers
 * (emu_device.c) share a launch's blocks.
 */
#ifndef EIN_EMU_BLOCK_H
#define EIN_EMU_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "emu_count.h"

typedef void (*ein_emu_entry)(void *d, const void *s0, const void *s1);

typedef struct ein_emu_run {
  ein_emu_entry entry;
  void *d;
  const void *s0, *s1;
  unsigned grid[3], block[3];
  char kernel[48]; /* "kernel 2 (ein_main)", for messages */
  /* counting (a counting-flavour module): what the launch's workers
   * share; NULL when not counting */
  ein_emu_count_launch *count;
} ein_emu_run;

typedef struct ein_emu_worker ein_emu_worker;

/* A worker for the calling OS thread (it must run all of the worker's
 * blocks); NULL when out of memory. */
ein_emu_worker *ein_emu_worker_create(void);
void ein_emu_worker_destroy(ein_emu_worker *w);

/* Makes the worker the calling OS thread's from now on. */
void ein_emu_worker_rebind(ein_emu_worker *w);

/* Fills `shared` (the module's thread-locals for this OS thread, i.e. its
 * __shared__ variables) with a poison pattern before every block. */
void ein_emu_worker_set_shared(ein_emu_worker *w, void *shared, size_t size);

/* Adds what the worker counted since the last call to *out and starts
 * again from zero (the launch sums its workers'). */
void ein_emu_worker_take_counters(ein_emu_worker *w, ein_emu_counters *out);

/* Runs block number `linear` (x fastest) of the launch. False on a
 * mistake, described in msg. */
bool ein_emu_block_run(ein_emu_worker *w, const ein_emu_run *l,
                       uint64_t linear, char *msg, size_t cap);

#endif
