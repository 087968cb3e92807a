/*
 * device_models.h - the device models of predicted times that need this
 * machine (ein_device_model_get in ein.h): "cpu", measured once and cached
 * on disk, and "cuda", the GPU present. The built-in ones are the
 * planner's (report.h), which measures nothing.
 */
#ifndef EIN_DEVICE_MODELS_H
#define EIN_DEVICE_MODELS_H

#include <stdbool.h>

#include "ein.h"

/* The "cpu" model read from, or measured into, the disk cache in `dir`
 * (NULL: no cache, measured every time), without the process's memo: the
 * tests' view of the cache. */
ein_status ein_cpu_model_in(const char *dir, ein_device_model *out);

/* The key the "cpu" model is stored under in the disk cache, for tests
 * that damage the entry; returns its length. */
size_t ein_cpu_model_key(char *buf, size_t cap);

/* A rate a run reached on this host: where it is above the "cpu" model
 * m's peak of `kind` (m from ein_device_model_get("cpu") or the _in call
 * below), the peak is raised to it (and the half peaks with f32's, which
 * they never read below), in *m, in the process's model and in the cache
 * entry, stamped with the time now, so a utilisation computed against the
 * model cannot read above 100%. False (nothing changed) for another
 * model, a figure the caller gave, or a rate that is not above the peak.
 * The _in form uses the cache in `dir` (NULL: none) and not the
 * process's model: the tests' view. */
bool ein_cpu_model_raise(ein_device_model *m, ein_peak_kind kind,
                         double rate);
bool ein_cpu_model_raise_in(const char *dir, ein_device_model *m,
                            ein_peak_kind kind, double rate);

#endif
