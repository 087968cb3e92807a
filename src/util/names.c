/*
 * names.c - ein_reduction_name and ein_reduction_parse (declared in
 * ein.h): one table of names read both ways. It sits at the bottom of the
 * stages because the binder, the planner, the report, codegen and the API
 * all name reductions in their messages and reports.
 */
#include "ein.h"

#include <string.h>

static const char *const reduction_names[] = {
    [EIN_REDUCE_SUM] = "sum",   [EIN_REDUCE_MEAN] = "mean",
    [EIN_REDUCE_MAX] = "max",   [EIN_REDUCE_MIN] = "min",
    [EIN_REDUCE_PROD] = "prod", [EIN_REDUCE_ANY] = "any",
    [EIN_REDUCE_ALL] = "all"};

const char *ein_reduction_name(ein_reduction reduction) {
  if (reduction < EIN_REDUCE_SUM || reduction > EIN_REDUCE_ALL) return NULL;
  return reduction_names[reduction];
}

ein_status ein_reduction_parse(const char *name, ein_reduction *out) {
  if (!name || !out) return EIN_ERR_INVALID_ARGUMENT;
  for (int r = EIN_REDUCE_SUM; r <= EIN_REDUCE_ALL; r++)
    if (strcmp(name, reduction_names[r]) == 0) {
      *out = (ein_reduction)r;
      return EIN_OK;
    }
  return EIN_ERR_BAD_REDUCTION;
}
