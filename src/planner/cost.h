/*
 * cost.h - what a plan costs on a device: time, FLOP utilization, memory.
 *
 * Takes: a plan IR (plan.h) and a device model (ein_device_model, ein.h).
 * Gives: the predicted time of a run and of each step, the peak a plan's
 * arithmetic is measured against, and the plan's memory. Each rule is
 * here once; the report (report.h), the API and through it the CLI and
 * Python read these, never their own copies. The built-in models (the
 * data sheets) live here too; models measured on this machine ("cpu") are
 * src/api's: the planner measures nothing.
 */
#ifndef EIN_COST_H
#define EIN_COST_H

#include <stdbool.h>

#include "plan.h"

/* A built-in model by name ("h100", "h100-sxm", "h100-pcie", "h200",
 * "a100", "l4", "b200"); NULL when unknown. */
const ein_device_model *ein_device_model_find(const char *name);

/* "cpu, cuda, h100, ...": every name ein_device_model_get knows. */
const char *ein_cost_model_names(void);

/* The arithmetic of a step (its source dtype; TF32 for an f32 GEMM of a
 * plan that allows it; fp8 for an FP8 GEMM, ein_gemm.scaled) and of a
 * plan (its dtype, TF32 likewise; fp8 when it has an FP8 GEMM). */
ein_peak_kind ein_cost_step_kind(const ein_plan_ir *ir, const ein_step *s);
ein_peak_kind ein_cost_plan_kind(const ein_plan_ir *ir);
const char *ein_cost_kind_name(ein_peak_kind kind);

/* The data-sheet peak of an arithmetic, and the rate predictions use (the
 * measured one where einc has it, else the peak); a kind with no rate on
 * the model (fp8 on an A100) takes f32's. Complex dtypes divide by 4:
 * `complex` says the step's values are complex. */
double ein_cost_peak(const ein_device_model *m, ein_peak_kind kind);
double ein_cost_rate(const ein_device_model *m, ein_peak_kind kind,
                     bool complex);
double ein_cost_bandwidth(const ein_device_model *m);

/* The data-sheet peak of the plan's arithmetic in its FLOPs (a quarter for
 * complex dtypes): MFU's denominator; 0 when the model has none. */
double ein_cost_plan_peak(const ein_plan_ir *ir, const ein_device_model *m);

/* A model predictions can be made with: a positive f32 rate and
 * bandwidth, and no negative or non-finite figure. */
bool ein_cost_model_usable(const ein_device_model *m);

/* A step's bytes in 32-byte sectors (plan.h, sector_bytes) from its
 * element bytes and its operands' strides; the record sets every step's,
 * called once by every plan builder after the steps' bytes are final. */
double ein_cost_sector_bytes(const ein_step *s);
void ein_cost_record_sectors(ein_plan_ir *ir);

/* The bytes a model's roofline prices for a step: its sector_bytes on a
 * model of a CUDA device (memory moves whole sectors), else its element
 * bytes (bytes_read + bytes_written). */
bool ein_cost_model_sectors(const ein_device_model *m);
double ein_cost_step_bytes(const ein_step *s, bool sectors);

/* The roofline of one step, max(FLOPs / rate, bytes / bandwidth), and
 * with the model's fixed time per step added. */
double ein_cost_step_roofline(const ein_plan_ir *ir, const ein_step *s,
                              const ein_device_model *m);
double ein_cost_step_seconds(const ein_plan_ir *ir, const ein_step *s,
                             const ein_device_model *m);

/* One execute: call_seconds + every step run (each slice's, and a sliced
 * plan's sums) at ein_cost_step_seconds. */
double ein_cost_predicted_seconds(const ein_plan_ir *ir,
                                  const ein_device_model *m);

/* ein_plan_spread_cost's model (ein.h): the plan's units spread over
 * `workers`, inputs broadcast and partials reduced over a link of
 * bytes_per_s (docs/design.md, "Cost of spreading units"); workers >= 1
 * and bytes_per_s > 0 checked by the caller. */
void ein_plan_spread_cost_ir(const ein_plan_ir *ir, const ein_device_model *m,
                             int workers, double bytes_per_s,
                             ein_spread_cost *out);

/* FLOPs the expression needs (the unsliced path's, once), as MFU counts. */
double ein_cost_model_flops(const ein_plan_ir *ir);

/* Memory of one execute (ein_plan_memory in ein.h). */
void ein_cost_memory(const ein_plan_ir *ir, ein_plan_memory *out);

/* Bytes a buffer holds (elements x element size). */
int64_t ein_cost_buffer_bytes(const ein_plan_buffer *b);

/* Bytes of temporary t (the t-th EIN_BUF_TEMP buffer, 0-based), or -1. */
int ein_cost_ntemps(const ein_plan_ir *ir);
int64_t ein_cost_temp_bytes(const ein_plan_ir *ir, int t);

#endif
