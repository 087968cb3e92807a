/*
 * kernel_model.h - a generated kernel's time on a GPU, from what was
 * measured without one: the traffic its launch made on the emulated
 * device (sectors counted, emu_count.h), its occupancy from the
 * compiler's figures (occupancy.h), and the device model's bandwidth,
 * FLOP rate and launch time (ein_device_model, cost.h).
 *
 * Takes plain numbers, gives seconds and what bound them; no CUDA and no
 * emulator here, so the report, the CLI and a later calibration share one
 * rule. docs/design.md, "A per-kernel time model", says where each
 * constant comes from; item 4 of issue 34 is to check them on a GPU.
 */
#ifndef EIN_KERNEL_MODEL_H
#define EIN_KERNEL_MODEL_H

#include <stdbool.h>

#include "ein.h"
#include "occupancy.h"

typedef struct ein_kernel_model_in {
  double traffic_bytes; /* 32 x the sectors its requests touched: what the
                           SMs ask of the L2 */
  double distinct_bytes; /* 32 x the distinct sectors: what DRAM moves at
                            least; 0: unknown, taken as traffic_bytes */
  double block_load_bytes; /* 32 x the distinct load sectors of each block,
                              summed over the blocks; 0: unknown, no L1 */
  double store_bytes;   /* 32 x the sectors the stores touched (write
                           through to the L2) */
  int shared_per_block; /* static + dynamic shared memory, bytes */
  double shared_wavefronts; /* shared-memory wavefronts, all requests */
  double warp_basic_blocks; /* basic blocks the warps issued (the
                               emulator's count); 0: unknown, unpriced */
  double requests;      /* global load and store requests (warp level); 0:
                           unknown, saturation at EIN_MODEL_MEMORY_WARPS */
  double flops;         /* arithmetic it does (the step's, opt_einsum's) */
  long long blocks;     /* grid blocks */
  int threads;          /* per block */
  int blocks_per_sm;    /* resident, from ein_occupancy_compute */
  const ein_sm_limits *lim;
  double bytes_per_s;   /* the device's memory bandwidth */
  double flops_per_s;   /* its rate for the kernel's arithmetic */
  double launch_seconds; /* fixed time per launch */
} ein_kernel_model_in;

typedef struct ein_kernel_model {
  double seconds;         /* launch + max(memory, L2, shared, compute) */
  double memory_seconds;  /* DRAM bytes at the bandwidth the warps reach */
  double l2_seconds;      /* what the L1 misses at the L2's bandwidth */
  double l1_seconds;      /* every sector requested at the L1's rate */
  double l2_bytes;        /* the L1's misses and the stores */
  double shared_seconds;  /* shared wavefronts at one per SM and clock */
  double issue_seconds;   /* warp instructions at 4 per SM and clock */
  double compute_seconds; /* FLOPs at the rate the warps reach */
  double waves;           /* blocks / (resident blocks x SMs) */
  double memory_efficiency; /* the bandwidth share reached, 0..1 */
  double floor_seconds; /* launch + the distinct bytes at the full
                           bandwidth or the FLOPs at the full rate: the
                           least any grid or occupancy could take for the
                           sectors it touches (a gather's floor, where
                           the roofline's element bytes understate it) */
  const char *bound; /* "memory", "L2", "L1", "shared", "issue",
                        "compute", "launch" */
} ein_kernel_model;

/* Warps per SM from which a memory-bound kernel is taken to reach the
 * full bandwidth, and a compute-bound one its full rate: fewer warps
 * reach proportionally less (docs/design.md says why these values). */
enum { EIN_MODEL_MEMORY_WARPS = 32, EIN_MODEL_COMPUTE_WARPS = 16 };

/* The L2's bandwidth as a multiple of DRAM's, and the SM clock shared
 * memory's wavefronts run at (docs/design.md: fitted on the H100 run of
 * 2026-11-23, bench/results/2026-11-29-model-validation.md). */
#define EIN_MODEL_L2_RATIO 2.0
/* Memory latency (Little's law's) and the global requests a warp keeps in
 * flight: a wave saturates DRAM when its warps hold bandwidth x latency
 * bytes, each warp this many requests of the kernel's mean bytes. */
#define EIN_MODEL_LATENCY_S 600e-9
#define EIN_MODEL_REQUESTS_IN_FLIGHT 10.0
#define EIN_MODEL_SM_HZ 1.755e9
/* The L1's rate: 128 bytes (4 sectors) per SM and clock, the figure
 * public microbenchmarks give for Volta to Hopper (docs/design.md,
 * "An L1 term"); not fitted. */
#define EIN_MODEL_L1_BYTES_PER_CLK 128.0
/* Instructions per basic block of the host compiler's code: the warps'
 * basic blocks x this at four warp instructions per SM and clock (one a
 * scheduler) is the time spent issuing them. */
#define EIN_MODEL_INSTR_PER_BB 2.4

/* The rate a generated kernel's arithmetic reaches: the CUDA cores' FP32
 * (or FP64) data-sheet peak, never the tensor cores' a GEMM on cuBLAS
 * reaches: the kernels accumulate in f32 (f64) with scalar FMAs. */
double ein_kernel_model_rate(const ein_device_model *m, bool f64);

ein_kernel_model ein_kernel_model_time(const ein_kernel_model_in *in);

/* The architecture (compute capability x 10) of a built-in device model
 * by its name: h100*, h200 90; a100 80; l4 89; b200 100; else 90 (the
 * H100 the GPU models assume). */
int ein_kernel_model_sm(const char *model_name);

#endif
