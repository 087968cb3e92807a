/*
 * ctx_devices.c - the devices a context has opened: each backend kind's
 * devices, opened once per context under its lock on first use, their
 * caps and counters, and closing them with the context. Backends are found
 * through the table (backend.h); nothing here knows which backends exist.
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
ein_backend *ein_ctx_opened(ein_ctx *ctx, ein_backend_kind kind, int device) {
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
  ein_backend *be = ein_ctx_opened(ctx, kind, device);
  if (be && be->stats) be->stats(be, out);
}

size_t ein_ctx_backend_launches(ein_ctx *ctx, ein_backend_kind kind,
                                int device, ein_launch_counters *out,
                                size_t cap) {
  ein_backend *be = ein_ctx_opened(ctx, kind, device);
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
