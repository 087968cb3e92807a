/*
 * plain_eval.h - the plain path of an evaluation: one device, no fp8.
 * Takes tensors that passed the checks (tensors.h) with the backend and
 * device chosen, and the plan-shaping options (an ein_options of which it
 * reads neither scales nor devices: those are a call's, taken by
 * fp8_eval.h and spread.h). Finds the plan in the context's cache by its
 * key (expression, plan-shaping options, backend, device, each tensor's
 * layout) or binds, plans and prepares the backend's program, then runs
 * it: at once, or unit by unit for a sliced plan (an odometer over the
 * sliced axes, partial sums accumulated on the device). Errors go on the
 * calling thread's record.
 */
#ifndef EIN_PLAIN_EVAL_H
#define EIN_PLAIN_EVAL_H

#include <stdint.h>

#include "ctx_internal.h"
#include "plan_object.h"

/* A range of units: [first, first + count) of a plan's slices (all of
 * them for a whole run; a plan that is not sliced is one unit). */
typedef struct ein_unit_range {
  int64_t first, count;
} ein_unit_range;

/* Binds, plans and prepares the backend's program: a new plan with one
 * reference, owning its IR, its program, a copy of the expression and the
 * layout key it was made for. Not cached. */
ein_status ein_plain_build(ein_thread_rec *me, const char *expr,
                           const DLTensor *const *inputs, int n,
                           const DLTensor *output, const ein_options *o,
                           const ein_backend_entry *backend, int device,
                           ein_plan **out);

/* A plan of an IR made elsewhere (a gradient program's elementwise steps,
 * planner/grad.h): the backend's program prepared for it, `expr` (a name
 * for reports) copied and the layout key of the tensors kept, as
 * ein_plain_build's; takes the IR (destroyed on failure). */
ein_status ein_plain_adopt(ein_thread_rec *me, ein_plan_ir *ir,
                           const char *expr, const DLTensor *const *inputs,
                           int n, const DLTensor *output,
                           int64_t memory_limit,
                           const ein_backend_entry *backend, int device,
                           ein_plan **out);

/* The cached plan of the call, or one built and cached: a reference for
 * the caller, who releases it. */
ein_status ein_plain_plan(ein_thread_rec *me, const char *expr,
                          const DLTensor *const *inputs, int n,
                          const DLTensor *output, const ein_options *o,
                          const ein_backend_entry *backend, int device,
                          ein_plan **out);

/* Every unit of a plan; EIN_ERR_LIMIT past what int64 counts. */
ein_status ein_plain_all_units(ein_thread_rec *me, const ein_plan *plan,
                               ein_unit_range *all);

/* Compares tensor `index` (-1: the output) in layout slot `slot` with the
 * layout the plan was made for. */
ein_status ein_plain_check_layout(ein_thread_rec *me, const ein_plan *plan,
                                  int slot, const DLTensor *t, int index);

/* Runs units `range` of a plan whose layouts match the tensors, on
 * `device` of its backend (the plan's own, or another when spreading);
 * marks may be NULL. Refuses an output that overlaps an input. */
ein_status ein_plain_run(ein_thread_rec *me, const ein_plan *plan, int device,
                         const DLTensor *const *inputs, int n,
                         DLTensor *output, const ein_step_marks *marks,
                         ein_unit_range range);

/* ein_plain_plan, then every unit on the plan's device. */
ein_status ein_plain_eval(ein_thread_rec *me, const char *expr,
                          const DLTensor *const *inputs, int n,
                          DLTensor *output, const ein_options *o,
                          const ein_backend_entry *backend, int device);

#endif
