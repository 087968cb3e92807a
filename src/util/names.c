/*
 * names.c - the names of ein.h's enums read both ways: reductions
 * (ein_reduction_name, ein_reduction_parse) and search objectives
 * (ein_objective_name, ein_objective_parse), each one table. It sits at the
 * bottom of the stages because the binder, the planner, the report,
 * codegen, the API and the CLI all name them in messages and reports.
 */
#include "ein.h"

#include <string.h>

/* The place of `name` among names[0..count-1], or -1. */
static int name_index(const char *const *names, int count, const char *name) {
  for (int k = 0; name && k < count; k++)
    if (strcmp(name, names[k]) == 0) return k;
  return -1;
}

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
  int k = name_index(reduction_names, EIN_REDUCE_ALL + 1, name);
  if (k < 0) return EIN_ERR_BAD_REDUCTION;
  *out = (ein_reduction)k;
  return EIN_OK;
}

static const char *const objective_names[] = {
    [EIN_OBJECTIVE_FLOPS] = "flops", [EIN_OBJECTIVE_SIZE] = "size",
    [EIN_OBJECTIVE_COMBO] = "combo"};

const char *ein_objective_name(int objective) {
  if (objective < EIN_OBJECTIVE_FLOPS || objective > EIN_OBJECTIVE_COMBO)
    return NULL;
  return objective_names[objective];
}

ein_status ein_objective_parse(const char *name, ein_objective *out) {
  int k = name_index(objective_names, EIN_OBJECTIVE_COMBO + 1, name);
  if (k < 0 || !out) return EIN_ERR_INVALID_ARGUMENT;
  *out = (ein_objective)k;
  return EIN_OK;
}
