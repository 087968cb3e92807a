/*
 * kernel_resources.h - what the compiler made of each generated kernel,
 * and the occupancy that allows, for architectures the plan may run on.
 *
 * Takes: a CUDA program (cuda_program.h). Gives: per kernel launch (step,
 * pass, entry point) and architecture the registers per thread, the
 * stack frame and its spill stores and loads, local memory, static
 * shared memory and the dynamic shared memory the launch asks, as
 * ptxas reports them for the very source and options the backend
 * compiles (NVRTC with `--ptxas-options=-v`; no GPU, no driver), and
 * from them resident blocks and warps per SM and waves of the grid
 * (occupancy.h). Owns nothing past a call.
 *
 * Why ptxas' report and not the cubin: the cubin's .nv.info attributes
 * carry registers (EIATTR_REGCOUNT) and the frame size, but not the spill
 * counts, and its .nv.shared section includes the system's reserved
 * kilobyte; ptxas' `-v` lines give every figure, per entry function, in a
 * format unchanged since CUDA 6 (docs/design.md, "GPU model inputs").
 */
#ifndef EIN_KERNEL_RESOURCES_H
#define EIN_KERNEL_RESOURCES_H

#include <stdbool.h>

#include "codegen.h"
#include "ein.h"
#include "cuda_program.h"
#include "error.h"
#include "strbuf.h"

typedef struct ein_kernel_resources {
  int arch;            /* compute capability x 10 */
  int registers;       /* per thread */
  int barriers;        /* named barriers used */
  int stack_frame;     /* bytes per thread */
  int spill_stores, spill_loads; /* bytes per thread */
  int local_bytes;     /* local memory per thread: the cumulative stack */
  int static_smem;     /* bytes per block */
} ein_kernel_resources;

/* Reads entry function `entry`'s block of a ptxas -v report for sm_arch
 * into *out; false when the report has none. */
bool ein_ptxas_report_parse(const char *log, const char *entry, int arch,
                            ein_kernel_resources *out);

/* Compiles k for sm_arch and reads ein_main's figures into main and, when
 * k has one, ein_vec's into vec. EIN_ERR_DEVICE without NVRTC,
 * EIN_ERR_BACKEND when the compile fails or the report lacks an entry. */
ein_status ein_kernel_resources_get(const ein_kernel_src *k, int arch,
                                    ein_kernel_resources *main,
                                    ein_kernel_resources *vec,
                                    ein_error_rec *err);

/* The architectures reports cover: 80, 89, 90 and, when this NVRTC
 * compiles for it, 100. Returns how many (at most 4) went into archs. */
int ein_kernel_resources_archs(int archs[4]);

/* Every kernel launch of prog on every architecture of
 * ein_kernel_resources_archs: figures, occupancy and waves. Text: a
 * table headed "kernel resources"; json: the value of a
 * "kernel_resources" member (an array of objects). Errors as
 * ein_kernel_resources_get's. */
ein_status ein_kernel_resources_report(const ein_cuda_program *prog, bool json,
                                       ein_strbuf *sb, ein_error_rec *err);

/* The per-kernel time model of plan (whose CUDA program is prog) on
 * device model m (kernel_model.h), beside the roofline prediction: every
 * kernel run once on the emulated device with its accesses counted
 * (emu_profile.h) and compiled for m's architecture for its occupancy.
 * Text: a table of launches, each step's two times and the plan's; json:
 * the value of a "kernel_model" member. Errors: a kernel that does not
 * compile or run, NVRTC missing (EIN_ERR_DEVICE), EIN_ERR_NO_MEMORY. */
ein_status ein_kernel_model_report(const ein_plan_ir *plan,
                                   const ein_cuda_program *prog,
                                   const ein_device_model *m, bool json,
                                   ein_strbuf *sb, ein_error_rec *err);

#endif
