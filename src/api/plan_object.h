/*
 * plan_object.h - the public plan (ein_plan): a planned expression, the
 * backend program made of it and the layouts it was made for, shared by
 * reference count. plain_eval.c makes one; plan_object.c keeps its count,
 * frees it and answers ein.h's questions about it (getters, reports, cost
 * figures); the plan cache (plan_cache.h) holds plans by reference.
 * Nothing here runs a plan or knows the context.
 */
#ifndef EIN_PLAN_OBJECT_H
#define EIN_PLAN_OBJECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "plan.h"

/* A sliced plan's sub-plans' programs, in ein_plan.sub (plan.h,
 * ein_slicing): add and store when a summed axis is sliced, zero when an
 * output axis is. */
enum { EIN_SUB_ADD, EIN_SUB_STORE, EIN_SUB_ZERO, EIN_NSUB };

struct ein_plan {
  ein_plan_ir *ir; /* owns the arena this struct lives in */
  atomic_int refs; /* ein_plan_retain / ein_plan_release */
  const char *expr;
  const ein_backend_entry *backend; /* where it runs */
  int device;                       /* the backend's device id */
  void *program; /* backend->prepare's result (NULL for the CPU) */
  /* the same for slicing's sub-plans (EIN_SUB_*) */
  void *sub[EIN_NSUB];
  int ninputs;
  int64_t memory_limit; /* the limit planned within (EIN_MEMORY_FREE
                           resolved); 0: none */
  /* The layouts the plan was made for, as cache-key bytes: tensor i's
   * part is layout[offset[i] .. offset[i+1]), the output last. */
  char *layout;
  size_t *offset;
};

/* Plans are reference-counted: ein_plan_create and the planner give one
 * reference; the cache holds one per entry and hands one to each finder.
 * ein_plan_release drops one and destroys the plan with the last. */
void ein_plan_retain(ein_plan *plan);
void ein_plan_release(ein_plan *plan);

/* The device a plan runs on (its backend: ein_plan_backend, ein.h). */
int ein_plan_device(const ein_plan *plan);

/* Whether the plan was made for a C-contiguous output (a NULL output in
 * ein_plan_create, or compact strides; size-1 dims' strides aside). */
bool ein_plan_output_compact(const ein_plan *plan);

#endif
