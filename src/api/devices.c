/*
 * devices.c - the public backend and device memory calls of ein.h, on the
 * devices the context opens (ctx_devices.c).
 */
#include <string.h>

#include "backend.h"
#include "ctx_internal.h"
#include "error.h"

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
  ein_backend *be = ctx && ptr ? ein_ctx_opened(ctx, kind, device) : NULL;
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
