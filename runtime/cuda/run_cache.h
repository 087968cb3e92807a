/*
 * run_cache.h - what the CUDA backend works out on a plan's first run and
 * keeps, so that a later run of the same plan does no lookups (the host
 * time of a cached launch). Pure C, no CUDA: the tests check
 * it without a GPU.
 *
 * Kernel handle sets. A plan's CUDA program is shared by every thread and
 * every backend (device, context) that runs the plan, and outlives none of
 * them in particular. Each backend's kernel cache (kernel_cache.h) hands
 * out handles valid for as long as that cache lives; the cache has an
 * owner id that no other cache in the process ever has. A set is the
 * handles of every kernel of one program for one owner, published once
 * and never changed: a run finds its owner's set with one atomic load
 * and a short walk, without a lock, and a set for an owner that is gone
 * is never matched again (its id is not reused). Sets are freed with the
 * program.
 *
 * GEMM pointer arrays. A pointer-array cuBLAS call (cuda_program.h) reads
 * arrays that are a function of the call and its three base pointers
 * only; ein_gemm_arrays_match says whether two calls would build the same
 * arrays, so the backend can keep the device copy it uploaded and reuse it
 * while the call and the pointers are the same (cuda_backend.c).
 *
 * Owns: the sets and a copy of each set's handles.
 */
#ifndef EIN_RUN_CACHE_H
#define EIN_RUN_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_program.h"

typedef struct ein_kernel_sets ein_kernel_sets;

/* A new owner id: nonzero, and never returned before in this process. */
uint64_t ein_kernel_owner_new(void);

/* An empty collection of sets of n handles each (n >= 0). NULL when out
 * of memory. */
ein_kernel_sets *ein_kernel_sets_create(int n);

/* Frees every set; nothing may use the collection at the same time. */
void ein_kernel_sets_destroy(ein_kernel_sets *s);

/* The n handles published for owner, or NULL when none are. Any thread,
 * without a lock, concurrently with ein_kernel_sets_add. */
void *const *ein_kernel_sets_find(ein_kernel_sets *s, uint64_t owner);

/* Publishes a copy of handles[0..n) as owner's set and returns it; when
 * owner already has one (another thread got there first), that one is
 * returned and handles is ignored. NULL when out of memory. */
void *const *ein_kernel_sets_add(ein_kernel_sets *s, uint64_t owner,
                                 void *const *handles);

/* True when calls x and y, given the same base pointers, build the same
 * pointer arrays (ein_cublas_pointer_arrays): the same element types,
 * batch count and strides, and outer loops. */
bool ein_gemm_arrays_match(const ein_cublas_gemm *x,
                           const ein_cublas_gemm *y);

#endif
