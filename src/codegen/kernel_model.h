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

#include "occupancy.h"

typedef struct ein_kernel_model_in {
  double traffic_bytes; /* 32 x the sectors its requests touched */
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
  double seconds;         /* launch + max(memory, compute) */
  double memory_seconds;  /* traffic at the bandwidth the warps reach */
  double compute_seconds; /* FLOPs at the rate the warps reach */
  double waves;           /* blocks / (resident blocks x SMs) */
  double memory_efficiency; /* the bandwidth share reached, 0..1 */
  const char *bound;      /* "memory", "compute", "launch" */
} ein_kernel_model;

/* Warps per SM from which a memory-bound kernel is taken to reach the
 * full bandwidth, and a compute-bound one its full rate: fewer warps
 * reach proportionally less (docs/design.md says why these values). */
enum { EIN_MODEL_MEMORY_WARPS = 32, EIN_MODEL_COMPUTE_WARPS = 16 };

ein_kernel_model ein_kernel_model_time(const ein_kernel_model_in *in);

/* The architecture (compute capability x 10) of a built-in device model
 * by its name: h100*, h200 90; a100 80; l4 89; b200 100; else 90 (the
 * H100 the GPU models assume). */
int ein_kernel_model_sm(const char *model_name);

#endif
