/*
 * inspect.h - what the CLI, the tests and the benchmarks read of the
 * library beyond ein.h: the planner's IR and the backend program behind a
 * public plan, the bound problem behind a binding, and an opened device's
 * counters. Read-only views into objects the caller already holds; no
 * context internals.
 */
#ifndef EIN_INSPECT_H
#define EIN_INSPECT_H

#include <stddef.h>

#include "backend.h"
#include "bind.h"

/* The plan IR behind a public plan, and the program its backend made of
 * it (NULL for the CPU; a CUDA program for CUDA and the emulated device);
 * for the CLI's plan and cuda-src commands. */
struct ein_plan_ir;
struct ein_cuda_program;
const struct ein_plan_ir *ein_plan_ir_of(const ein_plan *plan);
const struct ein_cuda_program *ein_plan_cuda_program(const ein_plan *plan);

/* The bound problem behind a public binding. */
const ein_problem *ein_binding_problem(const ein_binding *binding);

/* Kernel cache counters of an opened device (zeros if not opened). */
void ein_ctx_backend_stats(ein_ctx *ctx, ein_backend_kind kind, int device,
                           ein_backend_stats *out);

/* The kernel launches of the last counting run of an opened device (the
 * emulated device with EINC_EMU_COUNTERS=1): up to cap into out, their
 * number returned (0 when none or not opened). */
size_t ein_ctx_backend_launches(ein_ctx *ctx, ein_backend_kind kind,
                                int device, ein_launch_counters *out,
                                size_t cap);

#endif
