/*
 * report.h - describing a plan (text or JSON) with a predicted time.
 *
 * Takes: a plan (plan.h), the expression text and a device model (its
 * rates, ein_device_model in ein.h).
 * Gives: the report appended to a string buffer. The prediction is a
 * roofline per step: max(FLOPs / peak rate, bytes / bandwidth).
 */
#ifndef EIN_REPORT_H
#define EIN_REPORT_H

#include <stdbool.h>

#include "plan.h"
#include "strbuf.h"

/* The built-in models (ein_device_model, ein.h): "h100" (the default for
 * NULL) or "h200"; NULL when unknown. Models measured on this machine
 * ("cpu") are src/api's: the planner measures nothing. */
const ein_device_model *ein_device_model_find(const char *name);

double ein_plan_predicted_seconds(const ein_plan_ir *ir,
                                  const ein_device_model *m);

/* ein_plan_spread_cost's model (ein.h), the one place it lives; workers
 * >= 1 and bytes_per_s > 0 checked by the caller. */
void ein_plan_spread_cost_ir(const ein_plan_ir *ir, const ein_device_model *m,
                             int workers, double bytes_per_s,
                             ein_spread_cost *out);

/* What a backend's program adds to each step object of the JSON report
 * (the CUDA backend's cuBLAS call or kernels): `step_json` appends members,
 * each followed by ','; NULL adds nothing. The report knows no backend. */
typedef struct ein_report_hook {
  void (*step_json)(const ein_plan_ir *ir, const void *program, int step,
                    ein_strbuf *sb);
  const void *program;
} ein_report_hook;

/* The report, text or JSON; `hook` (may be NULL) is read for JSON only:
 * text callers append the backend's own lines after it. */
void ein_plan_report(const ein_plan_ir *ir, const char *expr,
                     const char *backend, bool json,
                     const ein_device_model *m, const ein_report_hook *hook,
                     ein_strbuf *sb);

/* The plan's contraction path in opt_einsum's linear form, "[(0, 1)]"
 * ("[]" with no contraction), as the report prints it. */
void ein_plan_path_text(const ein_plan_ir *ir, ein_strbuf *sb);

#endif
