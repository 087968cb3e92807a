/*
 * occupancy.c - resident blocks per SM from a kernel's resources
 * (occupancy.h).
 */
#include "occupancy.h"

#include <stddef.h>

/* Per compute capability, from the CUDA C++ Programming Guide, "Technical
 * Specifications per Compute Capability" (CUDA 12/13): 64K 32-bit
 * registers per SM and per block, at most 255 per thread; shared memory
 * per SM 164 KB (8.0), 100 KB (8.9), 228 KB (9.0, 10.0), of which a block
 * may ask 1 KB less (163, 99, 227 KB); 2048 threads (64 warps) and 32
 * blocks per SM, except 8.9: 1536 threads (48 warps) and 24 blocks.
 * Allocation units and the per-block reservation are those of the
 * toolkit's cuda_occupancy.h for these architectures (256 registers per
 * warp, 4 sub-partitions, 128-byte shared memory units, 1 KB reserved).
 * SM counts are the example GPU's (A100 SXM 108, L4 58, H100 SXM 132,
 * B200 148), used only to count waves. The unified L1 data cache and
 * shared memory per SM: 192 KB (8.0), 128 KB (8.9), 256 KB (9.0, 10.0)
 * (the same guide's per-capability sections; the kernel model's L1 term
 * takes what shared memory leaves of it). */
static const ein_sm_limits LIMITS[] = {
    {80, "A100", 65536, 65536, 255, 256, 4, 167936, 166912, 1024, 128, 2048,
     1024, 32, 64, 108, 196608},
    {89, "L4", 65536, 65536, 255, 256, 4, 102400, 101376, 1024, 128, 1536,
     1024, 24, 48, 58, 131072},
    {90, "H100", 65536, 65536, 255, 256, 4, 233472, 232448, 1024, 128, 2048,
     1024, 32, 64, 132, 262144},
    {100, "B200", 65536, 65536, 255, 256, 4, 233472, 232448, 1024, 128, 2048,
     1024, 32, 64, 148, 262144},
};

enum { NLIMITS = sizeof LIMITS / sizeof LIMITS[0] };

const ein_sm_limits *ein_sm_limits_of(int sm) {
  for (int i = 0; i < NLIMITS; i++)
    if (LIMITS[i].sm == sm)
      return &LIMITS[i];
  return NULL;
}

const ein_sm_limits *ein_sm_limits_all(int *n) {
  *n = NLIMITS;
  return LIMITS;
}

static int round_up(int x, int unit) { return (x + unit - 1) / unit * unit; }

static int min_int(int a, int b) { return a < b ? a : b; }

/* Blocks the registers allow: each warp's registers (rounded to the
 * unit) come from one sub-partition, so an SM holds as many warps as
 * each sub-partition fits, times the sub-partitions. A block over the
 * per-block or per-thread limit does not launch at all; the hardware's
 * per-block check counts the block's warps rounded up to a multiple of
 * the sub-partitions (cuda_occupancy.h says so). */
static int blocks_by_registers(const ein_sm_limits *lim, int warps, int regs,
                               int *per_warp) {
  *per_warp = round_up(regs * 32, lim->reg_unit);
  int assumed = *per_warp * round_up(warps, lim->sub_partitions);
  if (regs > lim->regs_per_thread || assumed > lim->regs_per_block)
    return 0;
  if (*per_warp == 0)
    return lim->blocks_per_sm;
  int per_part = lim->regs_per_sm / lim->sub_partitions / *per_warp;
  return per_part * lim->sub_partitions / warps;
}

/* Blocks shared memory allows: each block takes its static and dynamic
 * bytes plus the reservation, rounded to the unit. */
static int blocks_by_shared(const ein_sm_limits *lim, int smem, int *alloc) {
  *alloc = round_up(smem + lim->smem_reserved, lim->smem_unit);
  if (smem > lim->smem_per_block)
    return 0;
  return *alloc ? lim->smem_per_sm / *alloc : lim->blocks_per_sm;
}

ein_occupancy ein_occupancy_compute(const ein_sm_limits *lim, int threads,
                                    int regs, int static_smem,
                                    int dynamic_smem) {
  ein_occupancy o = {0};
  int warps = (threads + 31) / 32;
  if (threads < 1 || threads > lim->threads_per_block) {
    o.limiter = EIN_OCC_UNLAUNCHABLE;
    return o;
  }
  o.by_warps = lim->warps_per_sm / warps;
  o.by_blocks = lim->blocks_per_sm;
  o.by_registers = blocks_by_registers(lim, warps, regs, &o.regs_per_warp);
  o.by_shared =
      blocks_by_shared(lim, static_smem + dynamic_smem, &o.smem_per_block);
  /* ties go to the SM's own limits first: registers or shared memory
   * limit a kernel only when they allow fewer blocks than the warp slots
   * and block slots do */
  int n = min_int(min_int(o.by_registers, o.by_shared),
                  min_int(o.by_warps, o.by_blocks));
  o.limiter = n == 0                ? EIN_OCC_UNLAUNCHABLE
              : n == o.by_warps     ? EIN_OCC_WARPS
              : n == o.by_blocks    ? EIN_OCC_BLOCKS
              : n == o.by_registers ? EIN_OCC_REGISTERS
                                    : EIN_OCC_SHARED;
  o.blocks_per_sm = n;
  o.warps_per_sm = n * warps;
  o.fraction = (double)o.warps_per_sm / lim->warps_per_sm;
  return o;
}

const char *ein_occ_limiter_name(ein_occ_limiter l) {
  switch (l) {
  case EIN_OCC_WARPS: return "warps";
  case EIN_OCC_BLOCKS: return "blocks";
  case EIN_OCC_REGISTERS: return "registers";
  case EIN_OCC_SHARED: return "shared memory";
  case EIN_OCC_UNLAUNCHABLE: return "does not fit";
  }
  return "?";
}

double ein_occupancy_waves(long long blocks, int per_sm, int sms) {
  if (per_sm <= 0 || sms <= 0)
    return 0;
  return (double)blocks / ((double)per_sm * sms);
}
