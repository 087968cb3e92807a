/*
 * report.h - describing a plan (text or JSON) with a predicted time.
 *
 * Takes: a plan (plan.h), the expression text and a device model (its
 * rates, ein_device_model in ein.h).
 * Gives: the report appended to a string buffer. Its figures of time,
 * peak and memory are cost.h's.
 */
#ifndef EIN_REPORT_H
#define EIN_REPORT_H

#include <stdbool.h>

#include "plan.h"
#include "strbuf.h"

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
