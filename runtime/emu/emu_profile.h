/*
 * emu_profile.h - every generated kernel of a plan run once on the
 * emulated device with its memory accesses counted, for the per-kernel
 * time model (kernel_model.h) where no GPU is.
 *
 * Takes: a plan IR planned for the CUDA backend or the emulated device
 * (their programs are the same). Gives: one ein_launch_counters per kernel
 * launch, in run order. The kernels run on emulated memory holding 0xff
 * bytes, each buffer as large as the kernels touch: the generated kernels'
 * addresses depend on sizes and strides only, never on values, so what
 * they count is what they count on real data. cuBLAS steps are not run
 * (the device model's GEMM rates price them). EINC_EMU_SAMPLE_BLOCKS=N
 * runs at most about N evenly spaced blocks of each launch and scales its
 * counts (ein_emu_sample_set): large kernels in seconds, not minutes.
 * Owns nothing past a call.
 */
#ifndef EIN_EMU_PROFILE_H
#define EIN_EMU_PROFILE_H

#include <stddef.h>

#include "backend.h"
#include "plan.h"

/* On success *out (free with ein_free) holds *n launches. Errors: those
 * of compiling the counting module or a launch; EIN_ERR_NO_MEMORY. */
ein_status ein_emu_profile(const ein_plan_ir *plan, ein_launch_counters **out,
                           size_t *n, ein_error_rec *err);

#endif
