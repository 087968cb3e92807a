/*
 * emu_counters.h - what one emulated kernel launch did to memory, as
 * counted with EINC_EMU_COUNTERS=1 (emu_count.h counts; backend.h hands
 * a run's launches to the CLI).
 */
#ifndef EIN_EMU_COUNTERS_H
#define EIN_EMU_COUNTERS_H

#include <stdint.h>

/* What a launch did to memory, counted when its module is the counting
 * flavour (ein_emu_module_load_ex): emu_count.h says how. "Requests" are
 * warp-level instructions; a global request's sectors are the distinct
 * 32-byte sectors its lanes touch (4 for 32 lanes loading consecutive
 * f32s, 32 when each lane is 128 bytes or more from the next), and
 * ideal_sectors the fewest sectors the same distinct bytes fit in. The
 * launch's distinct sectors (unique_sectors) are what DRAM must move at
 * least; sectors x 32 is what the SMs ask of the L2. A shared request's
 * wavefronts are 1 without bank conflicts, up to 32 with them. */
typedef struct ein_emu_counters {
  uint64_t blocks, warps, threads;
  uint64_t ld_requests, ld_sectors, ld_ideal_sectors, ld_bytes;
  uint64_t st_requests, st_sectors, st_ideal_sectors, st_bytes;
  uint64_t ld_unique_sectors, st_unique_sectors;
  /* per block, the distinct sectors its global loads touched, summed over
   * the blocks: what an L1 holding each block's footprint leaves to the
   * L2 (the kernel model decides whether it holds it) */
  uint64_t ld_block_sectors;
  uint64_t sh_ld_requests, sh_ld_wavefronts, sh_ld_ideal;
  uint64_t sh_st_requests, sh_st_wavefronts, sh_st_ideal;
  /* basic blocks issued, per warp its lanes' most, summed: what the
   * warps' instruction issue costs, up to the instructions a block holds */
  uint64_t warp_basic_blocks;
} ein_emu_counters;

/* The fewest sectors a launch's loads (store false) or stores could
 * touch: its requests' own ideal (each request's distinct bytes packed
 * into sectors), or the launch's distinct sectors where those are more.
 * Bytes that lie one to a sector (a diagonal, a gather with a stride past
 * 32 bytes) occupy their sectors whatever the kernel, so no request can
 * pack them; a re-read (an outer product's operand) leaves the requests'
 * ideal. The one place the ideal of the reports, the stored figures and
 * the item-5 table is made (docs/design.md, "The ideal of a gather"). */
static inline uint64_t ein_emu_ideal_sectors(const ein_emu_counters *c,
                                             int store) {
  uint64_t packed = store ? c->st_ideal_sectors : c->ld_ideal_sectors;
  uint64_t distinct = store ? c->st_unique_sectors : c->ld_unique_sectors;
  return distinct > packed ? distinct : packed;
}

/* Adds every counter of b to a. */
void ein_emu_counters_add(ein_emu_counters *a, const ein_emu_counters *b);

#endif
