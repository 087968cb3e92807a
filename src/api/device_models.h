/*
 * device_models.h - the device models of predicted times that need this
 * machine (ein_device_model_get in ein.h): "cpu", measured once and cached
 * on disk, and "cuda", the GPU present. The built-in ones are the
 * planner's (report.h), which measures nothing.
 */
#ifndef EIN_DEVICE_MODELS_H
#define EIN_DEVICE_MODELS_H

#include "ein.h"

/* The "cpu" model read from, or measured into, the disk cache in `dir`
 * (NULL: no cache, measured every time), without the process's memo: the
 * tests' view of the cache. */
ein_status ein_cpu_model_in(const char *dir, ein_device_model *out);

/* The key the "cpu" model is stored under in the disk cache, for tests
 * that damage the entry; returns its length. */
size_t ein_cpu_model_key(char *buf, size_t cap);

#endif
