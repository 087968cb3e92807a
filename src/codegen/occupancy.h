/*
 * occupancy.h - how many blocks of a kernel an SM holds at once, by the
 * documented per-architecture limits.
 *
 * Takes: an architecture (compute capability x 10) and a kernel's
 * resources as the compiler reports them (registers per thread, static
 * shared memory per block) with its launch (threads per block, dynamic
 * shared memory). Gives: resident blocks and warps per SM, the fraction
 * of the SM's warp slots they fill, and which limit binds. Pure
 * arithmetic, no CUDA: the runtime reads the resources from NVRTC
 * (runtime/cuda/kernel_resources.h) and the report shows the result.
 *
 * The limits are one table (occupancy.c), with the figures of the CUDA C++
 * Programming Guide's "Technical Specifications per Compute Capability"
 * and the allocation rules of the toolkit's occupancy calculator
 * (cuda_occupancy.h): registers go to warps in units of 256, per SM
 * sub-partition (4 per SM, 16384 registers each); shared memory goes to
 * blocks in units of 128 bytes, each block's request including 1 KB the
 * system reserves per block on sm_80 and later; the SM's shared memory
 * is taken at its largest carveout (what the driver chooses for a kernel
 * that needs it when no preference is set).
 */
#ifndef EIN_OCCUPANCY_H
#define EIN_OCCUPANCY_H

#include <stdbool.h>

typedef struct ein_sm_limits {
  int sm;                  /* compute capability x 10: 80, 86, 89, 90, 100 */
  const char *example;     /* a GPU of it, for reports: "A100" */
  int regs_per_sm;         /* 32-bit registers */
  int regs_per_block;
  int regs_per_thread;     /* the most a thread may use */
  int reg_unit;            /* registers per warp are a multiple of this */
  int sub_partitions;      /* registers are allocated per sub-partition */
  int smem_per_sm;         /* bytes, at the largest carveout */
  int smem_per_block;      /* bytes, the most one block may ask (opt-in) */
  int smem_reserved;       /* bytes the system takes per block */
  int smem_unit;           /* shared memory is allocated in these units */
  int threads_per_sm;
  int threads_per_block;
  int blocks_per_sm;
  int warps_per_sm;
  int sms;                 /* SMs of the example GPU, for waves */
  int l1_shared_per_sm;    /* bytes of the unified L1 data cache and shared
                              memory: the L1 is what shared memory leaves */
} ein_sm_limits;

/* The limits of sm (80, 86, 89, 90, 100), or NULL for one not in the
 * table. */
const ein_sm_limits *ein_sm_limits_of(int sm);

/* The table's architectures, in order; *n gets their count. */
const ein_sm_limits *ein_sm_limits_all(int *n);

typedef enum ein_occ_limiter {
  EIN_OCC_WARPS,     /* threads (warp slots) per SM */
  EIN_OCC_BLOCKS,    /* blocks per SM */
  EIN_OCC_REGISTERS,
  EIN_OCC_SHARED,
  EIN_OCC_UNLAUNCHABLE /* more than one block may use: no block fits */
} ein_occ_limiter;

typedef struct ein_occupancy {
  int blocks_per_sm; /* resident blocks; 0: the launch fails */
  int warps_per_sm;
  double fraction;   /* warps_per_sm / the SM's warp slots */
  /* the blocks each limit alone allows */
  int by_warps, by_blocks, by_registers, by_shared;
  ein_occ_limiter limiter;
  int regs_per_warp;  /* allocated: registers x 32 rounded to reg_unit */
  int smem_per_block; /* allocated: static + dynamic + reserved, rounded */
} ein_occupancy;

/* The occupancy of a kernel using `regs` registers per thread and
 * `static_smem` + `dynamic_smem` bytes of shared memory per block,
 * launched with `threads` threads per block, on an SM of `lim`. */
ein_occupancy ein_occupancy_compute(const ein_sm_limits *lim, int threads,
                                    int regs, int static_smem,
                                    int dynamic_smem);

/* "warps", "blocks", "registers", "shared memory", "does not fit". */
const char *ein_occ_limiter_name(ein_occ_limiter l);

/* Full waves of a grid of `blocks` blocks over `sms` SMs holding
 * `per_sm` each: blocks / (per_sm * sms), as a fraction (0.5: half the
 * machine busy for one wave); 0 when per_sm is 0. */
double ein_occupancy_waves(long long blocks, int per_sm, int sms);

#endif
