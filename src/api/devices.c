/*
 * devices.c - the context's backends and the public backend and device
 * memory calls of ein.h. Backends are found through the table
 * (backend.h) and opened once per context and device, under the context's
 * lock; nothing here knows which backends exist.
 */
#include <string.h>

#include "backend.h"
#include "ctx_internal.h"
#include "trace.h"
#include "error.h"

/* The entry of a public kind other than AUTO, or NULL with an error. */
static const ein_backend_entry *entry_of(ein_thread_rec *me,
                                         ein_backend_kind kind, int device) {
  const ein_backend_entry *e =
      kind == EIN_BACKEND_AUTO ? NULL : ein_backend_find(kind);
  if (!e) {
    ein_fail_argument(&me->err, "unknown backend %d (cpu, cuda or emu)",
                      (int)kind);
    return NULL;
  }
  if (device < 0 || device >= EIN_MAX_DEVICES) {
    ein_fail_device(&me->err, "%s device id %d is out of range", e->name,
                    device);
    return NULL;
  }
  return e;
}

ein_backend *ein_ctx_backend(ein_thread_rec *me, ein_backend_kind kind,
                             int device) {
  const ein_backend_entry *e = entry_of(me, kind, device);
  if (!e) return NULL;
  ein_ctx *ctx = me->ctx;
  pthread_mutex_lock(&ctx->lock);
  ein_backend **slot = &ctx->backends[kind][device];
  double t0 = *slot ? 0 : ein_trace_now();
  if (!*slot && (*slot = e->open(device, &me->err))) {
    ein_trace_end("open the backend's device", t0);
    if (ctx->stream && (*slot)->set_stream)
      (*slot)->set_stream(*slot, ctx->stream);
  }
  ein_backend *be = *slot;
  pthread_mutex_unlock(&ctx->lock);
  return be;
}

const ein_backend_caps *ein_ctx_caps(const ein_ctx *ctx,
                                     const ein_backend_entry *entry) {
  return ctx->caps_set[entry->kind] ? &ctx->caps[entry->kind] : entry->caps();
}

/* The device the context has opened for (kind, device), or NULL (never
 * opened, or ids out of range). */
static ein_backend *opened(ein_ctx *ctx, ein_backend_kind kind, int device) {
  if (kind <= EIN_BACKEND_AUTO || (int)kind >= (int)EIN_BACKEND_KINDS ||
      device < 0 || device >= EIN_MAX_DEVICES)
    return NULL;
  pthread_mutex_lock(&ctx->lock);
  ein_backend *be = ctx->backends[kind][device];
  pthread_mutex_unlock(&ctx->lock);
  return be;
}

void ein_ctx_backend_stats(ein_ctx *ctx, ein_backend_kind kind, int device,
                           ein_backend_stats *out) {
  memset(out, 0, sizeof *out);
  ein_backend *be = opened(ctx, kind, device);
  if (be && be->stats) be->stats(be, out);
}

size_t ein_ctx_backend_launches(ein_ctx *ctx, ein_backend_kind kind,
                                int device, ein_launch_counters *out,
                                size_t cap) {
  ein_backend *be = opened(ctx, kind, device);
  return be && be->launch_counters ? be->launch_counters(be, out, cap) : 0;
}

/* Destroys every opened device; from ein_ctx_destroy. */
void ein_ctx_close_backends(ein_ctx *ctx) {
  for (int k = 0; k < EIN_BACKEND_KINDS; k++)
    for (int d = 0; d < EIN_MAX_DEVICES; d++)
      if (ctx->backends[k][d]) {
        ctx->backends[k][d]->destroy(ctx->backends[k][d]);
        ctx->backends[k][d] = NULL;
      }
}

/* ------------------------------------------------------------ public */

static const char *const names[EIN_BACKEND_KINDS] = {"auto", "cpu", "cuda",
                                                     "emu"};

const char *ein_backend_name(int kind) {
  return kind >= 0 && kind < EIN_BACKEND_KINDS ? names[kind] : NULL;
}

ein_status ein_backend_parse(const char *name, ein_backend_kind *out) {
  if (!name || !out) return EIN_ERR_INVALID_ARGUMENT;
  for (int k = 0; k < EIN_BACKEND_KINDS; k++)
    if (strcmp(name, names[k]) == 0) {
      *out = (ein_backend_kind)k;
      return EIN_OK;
    }
  return EIN_ERR_INVALID_ARGUMENT;
}

ein_backend_kind ein_backend_default(void) {
  const ein_backend_entry *cuda = ein_backend_find(EIN_BACKEND_CUDA);
  return cuda && cuda->device_count() > 0 ? EIN_BACKEND_CUDA
                                          : EIN_BACKEND_CPU;
}

DLDevice ein_backend_dl_device(ein_backend_kind kind, int device) {
  const ein_backend_entry *e = ein_backend_find(kind);
  return (DLDevice){e ? e->memory : kDLCPU, e ? device : 0};
}

ein_status ein_backend_check(ein_ctx *ctx, ein_backend_kind kind,
                             int device) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  return ein_ctx_backend(me, kind, device) ? EIN_OK : me->err.pub.status;
}

ein_status ein_device_alloc(ein_ctx *ctx, ein_backend_kind kind, int device,
                            size_t bytes, void **ptr) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (!ptr)
    return ein_fail_argument(&me->err, "ein_device_alloc: NULL result pointer");
  *ptr = NULL;
  ein_backend *be = ein_ctx_backend(me, kind, device);
  if (!be) return me->err.pub.status;
  return be->alloc(be, bytes, ptr, &me->err);
}

void ein_device_free(ein_ctx *ctx, ein_backend_kind kind, int device,
                     void *ptr) {
  ein_backend *be = ctx && ptr ? opened(ctx, kind, device) : NULL;
  if (be) be->free(be, ptr); /* memory only comes from an opened device */
}

ein_status ein_device_copy(ein_ctx *ctx, ein_backend_kind kind, int device,
                           void *dst, const void *src, size_t bytes,
                           ein_copy_kind dir) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  if (bytes && (!dst || !src))
    return ein_fail_argument(&me->err, "ein_device_copy: NULL %s pointer",
                             !dst ? "destination" : "source");
  if (dir != EIN_COPY_HOST_TO_DEVICE && dir != EIN_COPY_DEVICE_TO_HOST)
    return ein_fail_argument(&me->err, "ein_device_copy: unknown direction %d",
                             (int)dir);
  ein_backend *be = ein_ctx_backend(me, kind, device);
  if (!be) return me->err.pub.status;
  if (be->sync) {
    ein_status st = be->sync(be, &me->err);
    if (st) return st;
  }
  return be->copy(be, dst, src, bytes,
                  dir == EIN_COPY_HOST_TO_DEVICE ? EIN_COPY_TO_DEVICE
                                                 : EIN_COPY_TO_HOST,
                  &me->err);
}

void ein_ctx_set_cuda_stream(ein_ctx *ctx, void *stream) {
  if (!ctx) return;
  pthread_mutex_lock(&ctx->lock);
  ctx->stream = stream;
  for (int k = 0; k < EIN_BACKEND_KINDS; k++)
    for (int d = 0; d < EIN_MAX_DEVICES; d++) {
      ein_backend *be = ctx->backends[k][d];
      if (be && be->set_stream) be->set_stream(be, stream);
    }
  pthread_mutex_unlock(&ctx->lock);
}

ein_status ein_ctx_synchronize(ein_ctx *ctx) {
  if (!ctx) return EIN_ERR_INVALID_ARGUMENT;
  ein_thread_rec *me = ein_ctx_enter(ctx);
  if (!me) return EIN_ERR_NO_MEMORY;
  ein_backend *open[EIN_BACKEND_KINDS][EIN_MAX_DEVICES];
  pthread_mutex_lock(&ctx->lock);
  memcpy(open, ctx->backends, sizeof open);
  pthread_mutex_unlock(&ctx->lock);
  for (int k = 0; k < EIN_BACKEND_KINDS; k++)
    for (int d = 0; d < EIN_MAX_DEVICES; d++) {
      ein_backend *be = open[k][d];
      if (!be || !be->sync) continue;
      ein_status st = be->sync(be, &me->err);
      if (st) return st;
    }
  return EIN_OK;
}
