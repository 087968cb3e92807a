/*
 * report.h - describing a plan (text or JSON) with a predicted time.
 *
 * Takes: a plan (plan.h), the expression text and a device model.
 * Gives: the report appended to a string buffer. The prediction is a
 * roofline per step: max(FLOPs / peak rate, bytes / bandwidth).
 */
#ifndef EIN_REPORT_H
#define EIN_REPORT_H

#include <stdbool.h>

#include "plan.h"
#include "strbuf.h"

typedef struct ein_device_model {
  const char *name;
  double flops_half, flops_f32, flops_f64; /* FLOP/s of a large GEMM */
  double bandwidth;                        /* bytes/s read + written */
} ein_device_model;

/* "h100" (the default for NULL) or "h200"; NULL when unknown. */
const ein_device_model *ein_device_model_find(const char *name);

double ein_plan_predicted_seconds(const ein_plan_ir *ir,
                                  const ein_device_model *m);

void ein_plan_report(const ein_plan_ir *ir, const char *expr,
                     const char *backend, bool json,
                     const ein_device_model *m, ein_strbuf *sb);

#endif
