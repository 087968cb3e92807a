/*
 * emu_count.h - the memory accesses of emulated kernels, counted as a
 * GPU's memory system sees them (docs/design.md, "GPU model inputs").
 *
 * Takes: each global or shared memory access of a kernel compiled in the
 * counting flavour (emu_module.c): the thread, the address, its bytes,
 * load or store, and the instruction that made it. Gives: per launch,
 * ein_emu_counters (emu_device.h): warp-level requests, the 32-byte
 * sectors each touches, shared-memory wavefronts, and the distinct
 * sectors of the whole launch.
 * Owns: per worker, a buffer of the accesses since the block's last
 * barrier and the sectors the block's loads touched so far; per launch,
 * a bitmap of the sectors it touched.
 *
 * Threads of a block run one at a time, so a warp's lanes never make an
 * access together. What makes one warp-level request is rebuilt: the k-th
 * time lane l of warp w executes instruction s since the last
 * __syncthreads is the same request as the k-th time every other lane of
 * w executes s (lanes that executed s fewer times were inactive). This
 * is how a GPU executes a warp as long as lanes that diverge reconverge
 * before the next execution of s, which the generated kernels do (their
 * loops are uniform but for the tail). So the buffer is resolved when a
 * barrier releases the block and when the block ends.
 */
#ifndef EIN_EMU_COUNT_H
#define EIN_EMU_COUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "emu_device.h"

/* What a launch's workers share: the global memory its kernel may touch
 * (the allocations holding its pointer arguments) and, per allocation,
 * bitmaps of the 32-byte sectors loaded and stored. */
typedef struct ein_emu_count_launch {
  int n;
  uintptr_t lo[3], hi[3];
  uint64_t *ld_bits[3], *st_bits[3];
  double scale; /* a sampled launch: the blocks each run block stands for
                   (0 or 1: none) */
} ein_emu_count_launch;

/* Sets l up for allocations [lo[i], hi[i]) (n of them, distinct); false
 * when out of memory. */
bool ein_emu_count_launch_init(ein_emu_count_launch *l, int n,
                               const uintptr_t *lo, const uintptr_t *hi);

/* Adds the distinct sectors of the launch to c and frees the bitmaps. */
void ein_emu_count_launch_finish(ein_emu_count_launch *l, ein_emu_counters *c);

typedef struct ein_emu_count_buf ein_emu_count_buf;

ein_emu_count_buf *ein_emu_count_buf_create(void);
void ein_emu_count_buf_destroy(ein_emu_count_buf *b);

/* Records an access of thread `tid` (linear in its block), of at most 16
 * bytes (emu_block.c cuts wider ones), if it is to
 * global memory of l or to the block's shared memory [shared, shared +
 * shared_size); an access elsewhere (the thread's own stack: registers
 * or local memory on a GPU) is not counted. False when out of memory. */
bool ein_emu_count_note(ein_emu_count_buf *b, const ein_emu_count_launch *l,
                        const char *shared, size_t shared_size, unsigned tid,
                        uintptr_t addr, unsigned size, bool store,
                        uintptr_t site);

/* Forgets the recorded accesses (a block that failed) and the block's
 * load sectors. */
void ein_emu_count_buf_reset(ein_emu_count_buf *b);

/* The block ends: adds the distinct sectors its global loads touched
 * (over all its resolved requests) to c->ld_block_sectors and forgets
 * them. */
void ein_emu_count_block_end(ein_emu_count_buf *b, ein_emu_counters *c);

/* Turns the recorded accesses into warp-level requests, adds them to c
 * and to l's bitmaps, and empties the buffer. */
void ein_emu_count_resolve(ein_emu_count_buf *b, ein_emu_count_launch *l,
                           ein_emu_counters *c);

/* Resolution of one request, exposed for the tests' hand-worked cases:
 * `lanes` (at most 32) accesses of at most 16 bytes each (addresses and
 * sizes) of one warp instruction. The
 * distinct sectors of a global request, the fewest sectors its distinct
 * bytes fit, and those bytes. */
void ein_emu_global_request(const uint64_t *addr, const unsigned *size,
                            int lanes, uint64_t *sectors, uint64_t *ideal,
                            uint64_t *bytes);

/* The wavefronts of a shared-memory request of lanes 0..31 (lane[i] its
 * lane; 32 banks of 4 bytes, a bank serving one distinct word per
 * wavefront; 8-byte accesses go by half-warps and 16-byte ones by
 * quarter-warps), and the fewest its distinct bytes need. */
void ein_emu_shared_request(const uint64_t *addr, const unsigned *size,
                            const unsigned *lane, int lanes,
                            uint64_t *wavefronts, uint64_t *ideal);

#endif
