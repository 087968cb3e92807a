/*
 * context.c - the public entry points of ein.h for contexts, statuses,
 * options, shape binding and the plan cache's public face (plan_cache.h
 * keeps the table). Each function checks its arguments, runs the
 * stages (parse, bind) on a fresh arena and records any error on the
 * context.
 */
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"
#include "arena.h"
#include "bind.h"
#include "ctx_internal.h"
#include "error.h"
#include "parser.h"

struct ein_binding {
  ein_arena arena; /* owns the problem and its labels */
  ein_problem problem;
  int64_t out_shape[EIN_MAX_DIMS];
};

/* EIN_LIBRARY_VERSION comes from meson.build (the project version). */
const char *ein_version(void) { return EIN_LIBRARY_VERSION; }

const char *ein_status_name(ein_status status) {
  switch (status) {
  case EIN_OK: return "ok";
  case EIN_ERR_SYNTAX: return "syntax error";
  case EIN_ERR_UNKNOWN_AXIS: return "unknown axis";
  case EIN_ERR_SIZE_MISMATCH: return "size mismatch";
  case EIN_ERR_INDIVISIBLE: return "indivisible split";
  case EIN_ERR_AMBIGUOUS_SPLIT: return "ambiguous split";
  case EIN_ERR_RANK_MISMATCH: return "rank mismatch";
  case EIN_ERR_MISSING_LENGTH: return "missing length";
  case EIN_ERR_BAD_ELLIPSIS: return "bad ellipsis";
  case EIN_ERR_DIALECT: return "bad dialect use";
  case EIN_ERR_OVERFLOW: return "size overflow";
  case EIN_ERR_LIMIT: return "limit exceeded";
  case EIN_ERR_DUPLICATE_AXIS: return "duplicate axis";
  case EIN_ERR_OPERAND_COUNT: return "operand count mismatch";
  case EIN_ERR_BAD_REDUCTION: return "bad reduction";
  case EIN_ERR_BAD_SHAPE: return "bad shape";
  case EIN_ERR_INVALID_ARGUMENT: return "invalid argument";
  case EIN_ERR_NO_MEMORY: return "out of memory";
  case EIN_ERR_INTERNAL: return "internal error";
  case EIN_ERR_DTYPE: return "bad dtype";
  case EIN_ERR_DEVICE: return "bad device";
  case EIN_ERR_BACKEND: return "backend failure";
  case EIN_ERR_DEVICE_MEMORY: return "out of device memory";
  }
  return "unknown status";
}

ein_status ein_ctx_create(ein_ctx **out) {
  if (!out) return EIN_ERR_INVALID_ARGUMENT;
  ein_ctx *ctx = ein_calloc(1, sizeof *ctx);
  *out = ctx;
  if (!ctx) return EIN_ERR_NO_MEMORY;
  static atomic_uint_fast64_t serials;
  pthread_mutex_init(&ctx->lock, NULL);
  ein_plan_cache_init(&ctx->cache);
  ctx->serial = atomic_fetch_add(&serials, 1) + 1;
  return EIN_OK;
}

void *ein_cache_find(ein_ctx *ctx, uint64_t hash, const void *key,
                     size_t len) {
  if (!ctx || !key) return NULL;
  return ein_plan_cache_find_data(&ctx->cache, EIN_KEY_CALLER, hash, key,
                                  len);
}

int ein_cache_put(ein_ctx *ctx, uint64_t hash, const void *key, size_t len,
                  ein_plan *plan, void *data, void (*release)(void *data)) {
  if (!ctx || !key || !plan || !data) return 0;
  return ein_plan_cache_put(&ctx->cache, EIN_KEY_CALLER, hash, key, len,
                            plan, (ein_cache_data){data, release});
}

ein_status ein_cache_stats_get(ein_ctx *ctx, ein_cache_stats *out) {
  if (!ctx || !out) return EIN_ERR_INVALID_ARGUMENT;
  ein_plan_cache_stats(&ctx->cache, out);
  return EIN_OK;
}

void ein_ctx_destroy(ein_ctx *ctx) {
  if (!ctx) return;
  ein_plan_cache_destroy(&ctx->cache);
  ein_ctx_close_backends(ctx);
  for (ein_thread_rec *t = ctx->threads, *next; t; t = next) {
    next = t->next;
    ein_strbuf_free(&t->key);
    ein_error_clear(&t->err);
    ein_free(t);
  }
  pthread_mutex_destroy(&ctx->lock);
  ein_free(ctx);
}

/* The calling thread's record on ctx, or NULL; with ctx->lock held. */
static ein_thread_rec *find_thread(const ein_ctx *ctx) {
  pthread_t self = pthread_self();
  for (ein_thread_rec *t = ctx->threads; t; t = t->next)
    if (pthread_equal(t->thread, self)) return t;
  return NULL;
}

/* The context on which this thread's record could not be made, so that
 * ein_last_error can say why that call failed. */
static _Thread_local const ein_ctx *record_failed_on;

/* The record this thread found last, by context serial: records live as
 * long as their context, so a repeated call needs neither the lock nor the
 * list walk (a small call's host time counts them). */
static _Thread_local uint64_t last_serial;
static _Thread_local ein_thread_rec *last_rec;

ein_thread_rec *ein_ctx_enter(ein_ctx *ctx) {
  ein_thread_rec *t = last_serial == ctx->serial ? last_rec : NULL;
  if (!t) {
    pthread_mutex_lock(&ctx->lock);
    t = find_thread(ctx);
    if (!t && (t = ein_calloc(1, sizeof *t))) {
      t->thread = pthread_self();
      t->ctx = ctx;
      ein_error_init(&t->err);
      t->next = ctx->threads;
      ctx->threads = t;
    }
    pthread_mutex_unlock(&ctx->lock);
    last_serial = t ? ctx->serial : 0;
    last_rec = t;
  }
  record_failed_on = t ? NULL : ctx;
  /* A record holds something only after an error (ein_error_vset never
   * records EIN_OK); clearing its 4 KiB message each call cost time. */
  if (t && (t->err.pub.status != EIN_OK || t->err.expr_copy))
    ein_error_clear(&t->err);
  return t;
}

static const ein_error no_error = {.status = EIN_OK, .message = ""};
static const ein_error no_record = {
    .status = EIN_ERR_NO_MEMORY,
    .message = "out of memory making this thread's record on the context"};

const ein_error *ein_last_error(const ein_ctx *ctx) {
  if (!ctx) return NULL;
  /* The lock is the context's own state, not part of its value. */
  ein_ctx *c = (ein_ctx *)ctx;
  pthread_mutex_lock(&c->lock);
  const ein_thread_rec *t = find_thread(c);
  pthread_mutex_unlock(&c->lock);
  if (t) return &t->err.pub;
  return record_failed_on == ctx ? &no_record : &no_error;
}

ein_status ein_bind_shapes(ein_ctx *ctx, const char *expr,
                           const int64_t *const *shapes, const int *ndims,
                           int ninputs, const ein_options *options,
                           ein_binding **out) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (!out || !expr)
    return ein_fail_argument(&me->err, "ein_bind: %s is NULL",
                             !out ? "the result pointer" : "the expression");
  *out = NULL;
  if (ninputs > 0 && (!shapes || !ndims))
    return ein_fail_argument(
        &me->err, "ein_bind: %d inputs but no shape arrays", ninputs);
  ein_dialect dialect = options ? options->dialect : EIN_DIALECT_EINOPS;
  ein_binding *b = ein_calloc(1, sizeof *b);
  if (!b)
    return ein_fail_memory(&me->err, "out of memory");
  ein_arena_init(&b->arena);
  ein_ast ast;
  size_t len = strnlen(expr, (size_t)EIN_MAX_EXPR_BYTES + 1);
  ein_status st =
      ein_parse_expr(expr, len, dialect, &b->arena, &me->err, &ast);
  if (!st)
    st = ein_bind_problem(&ast, ninputs, ndims, shapes, options, &b->arena,
                          &me->err, &b->problem);
  if (st) {
    ein_binding_destroy(b);
    return st;
  }
  for (int d = 0; d < b->problem.output.ndim; d++)
    b->out_shape[d] = b->problem.output.dims[d].size;
  *out = b;
  return EIN_OK;
}

/* Gathers the ranks and shapes of DLTensors for ein_bind_shapes. */
static ein_status tensor_shapes(ein_thread_rec *me,
                                const DLTensor *const *inputs, int ninputs,
                                const int64_t **shapes, int *ndims) {
  if (ninputs < 0 || ninputs > EIN_MAX_OPERANDS)
    return ein_fail(
        &me->err, ninputs < 0 ? EIN_ERR_INVALID_ARGUMENT : EIN_ERR_LIMIT,
        "%d tensors given; einc takes 0 to %d", ninputs, EIN_MAX_OPERANDS);
  if (ninputs > 0 && !inputs)
    return ein_fail_argument(&me->err, "%d inputs but the tensor array is NULL",
                             ninputs);
  for (int i = 0; i < ninputs; i++) {
    if (!inputs[i])
      return ein_fail_argument(&me->err, "tensor %d is NULL", i + 1);
    shapes[i] = inputs[i]->shape;
    ndims[i] = inputs[i]->ndim;
  }
  return EIN_OK;
}

ein_status ein_bind(ein_ctx *ctx, const char *expr,
                    const DLTensor *const *inputs, int ninputs,
                    const ein_options *options, ein_binding **out) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (ninputs < 0 || ninputs > EIN_MAX_OPERANDS)
    return ein_fail(
        &me->err, ninputs < 0 ? EIN_ERR_INVALID_ARGUMENT : EIN_ERR_LIMIT,
        "%d tensors given; einc takes 0 to %d", ninputs, EIN_MAX_OPERANDS);
  const int64_t **shapes = ein_malloc(((size_t)ninputs + 1) * sizeof *shapes);
  int *ndims = ein_malloc(((size_t)ninputs + 1) * sizeof *ndims);
  ein_status st = shapes && ndims
                      ? tensor_shapes(me, inputs, ninputs, shapes, ndims)
                      : ein_fail_memory(&me->err, "out of memory");
  if (!st)
    st = ein_bind_shapes(ctx, expr, shapes, ndims, ninputs, options, out);
  ein_free(shapes);
  ein_free(ndims);
  return st;
}

const ein_problem *ein_binding_problem(const ein_binding *binding) {
  return &binding->problem;
}

void ein_binding_destroy(ein_binding *binding) {
  if (!binding) return;
  ein_arena_destroy(&binding->arena);
  ein_free(binding);
}

int ein_binding_output_ndim(const ein_binding *binding) {
  return binding ? binding->problem.output.ndim : 0;
}

const int64_t *ein_binding_output_shape(const ein_binding *binding) {
  return binding ? binding->out_shape : NULL;
}

int ein_binding_naxes(const ein_binding *binding) {
  return binding ? binding->problem.naxes : 0;
}

ein_axis_info ein_binding_axis(const ein_binding *binding, int i) {
  ein_axis_info info = {"", -1, EIN_AXIS_KEPT};
  if (!binding || i < 0 || i >= binding->problem.naxes) return info;
  const ein_bound_axis *a = &binding->problem.axes[i];
  info.name = a->label;
  info.size = a->size;
  info.role = !a->in_output  ? EIN_AXIS_REDUCED
              : !a->in_input ? EIN_AXIS_REPEATED
                             : EIN_AXIS_KEPT;
  return info;
}

int ein_binding_ninputs(const ein_binding *binding) {
  return binding ? binding->problem.ninputs : 0;
}

/* Operand k of the binding: an input, or the output (k == ninputs). */
static const ein_bound_operand *binding_operand(const ein_binding *binding,
                                                int k) {
  if (!binding || k < 0 || k > binding->problem.ninputs) return NULL;
  return k < binding->problem.ninputs ? &binding->problem.inputs[k]
                                      : &binding->problem.output;
}

int ein_binding_operand_ndim(const ein_binding *binding, int k) {
  const ein_bound_operand *op = binding_operand(binding, k);
  return op ? op->ndim : -1;
}

int ein_binding_dim_axes(const ein_binding *binding, int k, int d, int *ids,
                         int cap) {
  const ein_bound_operand *op = binding_operand(binding, k);
  if (!op || d < 0 || d >= op->ndim) return -1;
  const ein_bound_dim *dim = &op->dims[d];
  for (int i = 0; ids && i < dim->count && i < cap; i++)
    ids[i] = op->factors[dim->first + i];
  return dim->count;
}

ein_status ein_output_shape(ein_ctx *ctx, const char *expr,
                            const DLTensor *const *inputs, int ninputs,
                            const ein_options *options, int64_t *out_shape,
                            int *out_ndim) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  if (!out_shape || !out_ndim) {
    ein_thread_rec *me = ein_ctx_enter(ctx);
    if (!me) return EIN_ERR_NO_MEMORY;
    return ein_fail_argument(&me->err, "ein_output_shape: NULL result pointer");
  }
  ein_binding *b;
  ein_status st = ein_bind(ctx, expr, inputs, ninputs, options, &b);
  if (st) return st;
  *out_ndim = ein_binding_output_ndim(b);
  memcpy(out_shape, b->out_shape, (size_t)*out_ndim * sizeof *out_shape);
  ein_binding_destroy(b);
  return EIN_OK;
}

