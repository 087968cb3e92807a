/*
 * fp8_eval.h - ein_eval with float8 inputs or scales (fp8_eval.c): the
 * inputs decoded into f32 (times their scales) and the expression run on
 * those through the plain path (or spread), or, on a device that has
 * them, one FP8 GEMM. Takes checked tensors on backend kind's device, the
 * plan-shaping options and the call's scales and device count.
 */
#ifndef EIN_FP8_EVAL_H
#define EIN_FP8_EVAL_H

#include "ctx_internal.h"

/* What one call passes beside the plan-shaping options: neither part of
 * a plan nor of its cache key (ein_options.scales, .nscales, .devices). */
typedef struct ein_call_args {
  const double *scales;
  int nscales;
  int devices;
} ein_call_args;

/* Whether a call takes the fp8 path: an input of a float8 dtype, or
 * scales given. */
bool ein_fp8_call(const DLTensor *const *inputs, int n,
                  const ein_call_args *call);

ein_status ein_fp8_eval(ein_thread_rec *me, const char *expr,
                        const DLTensor *const *inputs, int n,
                        DLTensor *output, const ein_options *o,
                        const ein_call_args *call,
                        const ein_backend_entry *backend, int device);

#endif
