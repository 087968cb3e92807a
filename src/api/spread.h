/*
 * spread.h - ein_eval with ein_options.devices above 1: a sliced plan's
 * units spread over devices 0 .. devices-1 of its backend, one thread
 * each, the partials summed on the output's device. Takes checked tensors
 * with the backend and device chosen (tensors.h), the plan-shaping
 * options and the call's device count; gets the plan through the plain
 * path (plain_eval.h), and runs a plan of one unit there as it is.
 */
#ifndef EIN_SPREAD_H
#define EIN_SPREAD_H

#include "ctx_internal.h"

ein_status ein_spread_eval(ein_thread_rec *me, const char *expr,
                           const DLTensor *const *inputs, int n,
                           DLTensor *output, const ein_options *o,
                           int ndevices, const ein_backend_entry *backend,
                           int device);

#endif
