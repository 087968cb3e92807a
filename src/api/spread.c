/*
 * spread.c - a sliced plan over several devices of its backend in one
 * process (ein_options.devices). The units are split
 * into one contiguous range per device; each device gets its own copy of
 * the inputs (through the host: the backend's copies are host <-> device),
 * runs its range on a thread of its own into a partial, and the partials
 * come back as rows of one tensor on the output's device, summed there
 * with "p ... -> ..." (the documented way of ein_plan_run_units). The
 * plan, each device's units and the sum go through the plain path
 * (plain_eval.h); nothing here knows the backend beyond the public device
 * calls.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "dtype.h"
#include "error.h"
#include "plain_eval.h"
#include "spread.h"


/* One device's share: its range, its copies, its partial's row. */
typedef struct share {
  ein_ctx *ctx;
  const ein_plan *plan;
  ein_backend_kind kind;
  int device, out_device, n;
  const DLTensor *const *inputs; /* on out_device */
  DLTensor row;                  /* its row of the partials, on out_device */
  size_t row_bytes;
  int64_t first, count;
  ein_status st;
  char why[400];
} share;

/* Bytes from a tensor's data pointer to one past its last element (the
 * strides are non-negative here: checked by the caller). */
static size_t extent(const DLTensor *t) {
  int64_t last = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 0) return 0;
    int64_t st = t->strides ? t->strides[d] : 1;
    if (!t->strides)
      for (int e = d + 1; e < t->ndim; e++) st *= t->shape[e];
    last += (t->shape[d] - 1) * st;
  }
  return (size_t)t->byte_offset +
         (size_t)(last + 1) * (size_t)((t->dtype.bits * t->dtype.lanes + 7) / 8);
}

/* Copies `bytes` from device `from` to device `to` of kind through the
 * host. */
static ein_status copy_between(share *s, int from, const void *src, int to,
                               void *dst, size_t bytes) {
  void *host = malloc(bytes ? bytes : 1);
  if (!host) return EIN_ERR_NO_MEMORY;
  ein_status st = ein_device_copy(s->ctx, s->kind, from, host, src, bytes,
                                  EIN_COPY_DEVICE_TO_HOST);
  if (!st)
    st = ein_device_copy(s->ctx, s->kind, to, dst, host, bytes,
                         EIN_COPY_HOST_TO_DEVICE);
  free(host);
  return st;
}

/* The inputs on s->device: views of fresh copies of each input's bytes. */
static ein_status copy_inputs(share *s, DLTensor *local, void **mem) {
  ein_status st = EIN_OK;
  for (int i = 0; i < s->n && !st; i++) {
    size_t bytes = extent(s->inputs[i]);
    st = ein_device_alloc(s->ctx, s->kind, s->device, bytes, &mem[i]);
    if (!st)
      st = copy_between(s, s->out_device, s->inputs[i]->data, s->device,
                        mem[i], bytes);
    local[i] = *s->inputs[i];
    local[i].data = mem[i];
    local[i].device = ein_backend_dl_device(s->kind, s->device);
  }
  return st;
}

/* Units [first, first + count) of the plan on the share's device, on the
 * share's own thread (its record on the context). */
static ein_status run_units(share *s, const DLTensor *const *inputs,
                            DLTensor *out) {
  ein_thread_rec *me = ein_ctx_enter(s->ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  return ein_plain_run(me, s->plan, s->device, inputs, s->n, out, NULL,
                       (ein_unit_range){s->first, s->count});
}

/* A device's share on another device than the output's: inputs and
 * partial of its own (local, ptrs: n each; mem: n + 1, zeroed), the
 * partial copied back. */
static ein_status run_share_apart(share *s, DLTensor *local,
                                  const DLTensor **ptrs, void **mem) {
  DLTensor part = s->row;
  ein_status st = copy_inputs(s, local, mem);
  if (!st)
    st = ein_device_alloc(s->ctx, s->kind, s->device, s->row_bytes,
                          &mem[s->n]);
  part.data = mem[s->n];
  part.byte_offset = 0;
  part.device = ein_backend_dl_device(s->kind, s->device);
  for (int i = 0; i < s->n; i++) ptrs[i] = &local[i];
  if (!st) st = run_units(s, ptrs, &part);
  if (!st)
    st = copy_between(s, s->device, mem[s->n], s->out_device,
                      (char *)s->row.data + s->row.byte_offset, s->row_bytes);
  for (int i = 0; i <= s->n; i++)
    ein_device_free(s->ctx, s->kind, s->device, mem[i]);
  return st;
}

/* A device's share: on the output's device straight into its row; on
 * another through run_share_apart, with room for any number of inputs. */
static ein_status run_share(share *s) {
  if (s->device == s->out_device) return run_units(s, s->inputs, &s->row);
  size_t n = (size_t)s->n;
  DLTensor *local = ein_malloc(n * sizeof *local + 1);
  const DLTensor **ptrs = ein_malloc(n * sizeof *ptrs + 1);
  void **mem = ein_calloc(n + 1, sizeof *mem);
  ein_status st = EIN_ERR_NO_MEMORY;
  if (local && ptrs && mem)
    st = run_share_apart(s, local, ptrs, mem);
  else
    snprintf(s->why, sizeof s->why, "out of memory spreading units over "
             "devices (%d inputs)", s->n);
  ein_free(local);
  ein_free((void *)ptrs);
  ein_free(mem);
  return st;
}

static void *share_thread(void *arg) {
  share *s = arg;
  s->why[0] = '\0';
  s->st = run_share(s);
  if (s->st && !s->why[0])
    snprintf(s->why, sizeof s->why, "%s", ein_last_error(s->ctx)->message);
  return NULL;
}

/* What spreading needs, checked before any device work. */
static ein_status check_spread(ein_thread_rec *me, const ein_plan *plan,
                               const DLTensor *const *inputs, int n,
                               const DLTensor *output, int ndevices) {
  ein_backend_kind kind = (ein_backend_kind)ein_plan_backend(plan);
  const ein_backend_entry *e = ein_backend_find(kind);
  int have = e->device_count ? e->device_count() : 0;
  if (kind == EIN_BACKEND_CPU)
    return ein_fail_argument(&me->err, "devices=%d: the CPU backend is one "
                             "device; devices spread over CUDA (or emulated) "
                             "devices", ndevices);
  if (ndevices > have)
    return ein_fail_device(&me->err, "devices=%d asked of the %s backend, "
                           "which has %d here", ndevices, e->name, have);
  if (output->ndim >= EIN_MAX_DIMS || !ein_plan_output_compact(plan))
    return ein_fail_argument(&me->err, "devices=%d takes a C-contiguous "
                             "output of under %d dims", ndevices,
                             EIN_MAX_DIMS);
  for (int i = 0; i < n; i++)
    for (int d = 0; d < inputs[i]->ndim && inputs[i]->strides; d++)
      if (inputs[i]->strides[d] < 0)
        return ein_fail_argument(&me->err, "devices=%d: input %d has a "
                                 "negative stride", ndevices, i + 1);
  return EIN_OK;
}

/* The shares' threads, joined; the first failure, with its device. */
static ein_status run_shares(ein_thread_rec *me, share *sh, int nd) {
  pthread_t th[EIN_MAX_DEVICES];
  bool started[EIN_MAX_DEVICES] = {false};
  for (int d = 0; d < nd; d++)
    started[d] = pthread_create(&th[d], NULL, share_thread, &sh[d]) == 0;
  for (int d = 0; d < nd; d++)
    if (started[d]) pthread_join(th[d], NULL);
    else sh[d].st = EIN_ERR_NO_MEMORY;
  for (int d = 0; d < nd; d++)
    if (sh[d].st)
      return ein_fail(&me->err, sh[d].st, "devices: device %d (units %lld to "
                      "%lld): %s", sh[d].device, (long long)sh[d].first,
                      (long long)(sh[d].first + sh[d].count - 1),
                      started[d] ? sh[d].why : "no thread");
  return EIN_OK;
}

/* Runs a plan of several units over `ndevices` devices of its backend;
 * the tensors passed ein_eval's checks. */
static ein_status spread_plan(ein_thread_rec *me, const ein_plan *plan,
                              const DLTensor *const *inputs, int n,
                              DLTensor *output, int ndevices) {
  ein_ctx *ctx = me->ctx;
  ein_status st = check_spread(me, plan, inputs, n, output, ndevices);
  if (st) return st;
  int64_t units = ein_plan_units(plan);
  int nd = units < ndevices ? (int)units : ndevices, out_dev = ein_plan_device(plan);
  ein_backend_kind kind = (ein_backend_kind)ein_plan_backend(plan);
  int64_t shape[65] = {nd};
  memcpy(shape + 1, output->shape, sizeof(int64_t) * (size_t)output->ndim);
  size_t row_bytes = extent(output) - (size_t)output->byte_offset;
  void *rows = NULL;
  if ((st = ein_device_alloc(ctx, kind, out_dev, row_bytes * (size_t)nd, &rows)))
    return st;
  share sh[EIN_MAX_DEVICES];
  for (int d = 0; d < nd; d++) {
    sh[d] = (share){ctx, plan, kind, (out_dev + d) % ndevices, out_dev, n,
                    inputs, *output, row_bytes, units * d / nd,
                    units * (d + 1) / nd - units * d / nd, EIN_OK, ""};
    sh[d].row.data = rows;
    sh[d].row.strides = NULL;
    sh[d].row.byte_offset = row_bytes * (size_t)d;
  }
  st = run_shares(me, sh, nd);
  DLTensor stack = *output;
  stack.data = rows;
  stack.byte_offset = 0;
  stack.strides = NULL;
  stack.ndim = output->ndim + 1;
  stack.shape = shape;
  const DLTensor *sp = &stack;
  const ein_options o = {.backend = kind};
  if (!st)
    st = ein_plain_eval(me, "p ... -> ...", &sp, 1, output, &o,
                        ein_backend_find(kind), out_dev);
  ein_device_free(ctx, kind, out_dev, rows);
  return st;
}

ein_status ein_spread_eval(ein_thread_rec *me, const char *expr,
                           const DLTensor *const *inputs, int n,
                           DLTensor *output, const ein_options *o,
                           int ndevices, const ein_backend_entry *backend,
                           int device) {
  ein_plan *plan;
  ein_status st =
      ein_plain_plan(me, expr, inputs, n, output, o, backend, device, &plan);
  if (st) return st;
  ein_unit_range all;
  st = ein_plain_all_units(me, plan, &all);
  if (!st && all.count > 1)
    st = spread_plan(me, plan, inputs, n, output, ndevices);
  else if (!st)
    st = ein_plain_run(me, plan, plan->device, inputs, n, output, NULL, all);
  ein_plan_release(plan);
  return st;
}
