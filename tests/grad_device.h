/*
 * grad_device.h - test_grad.c's gradient calls on the backend under test
 * (EIN_GRAD_BACKEND=cpu, emu or cuda; cpu by default): ein_grad_create
 * or ein_jvp_create and ein_grad_execute with every tensor copied into
 * that backend's memory, strides kept, and the result copied back, so
 * each check of test_grad.c (finite differences, the f64 reference, the
 * hand cases) runs unchanged on any backend.
 */
#ifndef TEST_GRAD_DEVICE_H
#define TEST_GRAD_DEVICE_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ein.h"
#include "harness.h"

static ein_backend_kind grad_backend = EIN_BACKEND_CPU;

static void grad_backend_from_env(void) {
  const char *b = getenv("EIN_GRAD_BACKEND");
  if (b && strcmp(b, "emu") == 0) grad_backend = EIN_BACKEND_EMU;
  if (b && strcmp(b, "cuda") == 0) grad_backend = EIN_BACKEND_CUDA;
}

static const char *grad_backend_name(void) {
  return grad_backend == EIN_BACKEND_EMU    ? "emu"
         : grad_backend == EIN_BACKEND_CUDA ? "cuda"
                                            : "cpu";
}

/* The bytes from t's first element to its last (strides >= 0). */
static size_t span_bytes(const DLTensor *t) {
  int64_t hi = 0, c = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] == 0) return 0;
    hi += (t->shape[d] - 1) * (t->strides ? t->strides[d] : c);
    c *= t->shape[d];
  }
  ein_dtype dt;
  ein_dtype_from_dl(t->dtype, &dt);
  return (size_t)(hi + 1) * ein_dtype_size(dt);
}

/* *d: t in the backend's memory (*mem, to free), its contents copied. */
static ein_status to_device(ein_ctx *c, const DLTensor *t, DLTensor *d,
                            void **mem) {
  DLDeviceType where = grad_backend == EIN_BACKEND_EMU ? kDLExtDev : kDLCUDA;
  size_t bytes = span_bytes(t);
  *d = *t;
  ein_status st = ein_device_alloc(c, grad_backend, 0, bytes, mem);
  if (!st && bytes)
    st = ein_device_copy(c, grad_backend, 0, *mem,
                         (const char *)t->data + t->byte_offset, bytes,
                         EIN_COPY_HOST_TO_DEVICE);
  d->data = *mem;
  d->byte_offset = 0;
  d->device = (DLDevice){where, 0};
  return st;
}

/* The gradient (or with jvp the tangent) of expr w.r.t. input wrt into
 * res, on the backend under test; *keep (when not NULL) gets the grad,
 * for the caller to ask and destroy. */
static ein_status grad_run_on(ein_ctx *c, bool jvp, const char *expr,
                              const ein_options *o,
                              const DLTensor *const *ins, int n, int wrt,
                              const DLTensor *out, const DLTensor *seed,
                              DLTensor *res, ein_grad **keep) {
  DLTensor dev[TEST_MAX_OPERANDS + 3];
  const DLTensor *dp[TEST_MAX_OPERANDS];
  void *mem[TEST_MAX_OPERANDS + 3] = {NULL};
  bool host = grad_backend == EIN_BACKEND_CPU;
  ein_status st = EIN_OK;
  const DLTensor *src[TEST_MAX_OPERANDS + 3];
  for (int i = 0; i < n; i++) src[i] = ins[i];
  src[n] = seed;
  src[n + 1] = res;
  src[n + 2] = out;
  int m = out ? n + 3 : n + 2;
  for (int i = 0; i < m && !st; i++) {
    if (host) dev[i] = *src[i];
    else st = to_device(c, src[i], &dev[i], &mem[i]);
  }
  for (int i = 0; i < n; i++) dp[i] = &dev[i];
  ein_options on = *o;
  on.backend = grad_backend;
  ein_grad *g = NULL;
  if (!st)
    st = (jvp ? ein_jvp_create : ein_grad_create)(c, expr, dp, n, &on, wrt,
                                                  &g);
  if (!st)
    st = ein_grad_execute(c, g, dp, n, out ? &dev[n + 2] : NULL, &dev[n],
                          &dev[n + 1]);
  if (!st && !host && span_bytes(res))
    st = ein_device_copy(c, grad_backend, 0,
                         (char *)res->data + res->byte_offset, mem[n + 1],
                         span_bytes(res), EIN_COPY_DEVICE_TO_HOST);
  for (int i = 0; i < m; i++)
    if (mem[i]) ein_device_free(c, grad_backend, 0, mem[i]);
  if (keep) *keep = g;
  else ein_grad_destroy(g);
  return st;
}

/* A gradient made on the backend under test refuses tensors in host
 * memory (EIN_ERR_DEVICE), and writes nothing when it does. */
static void device_errors(ein_ctx *c) {
  int64_t shape[2] = {2, 3}, oshape[1] = {2};
  DLDataType f64 = {kDLFloat, 64, 1};
  double x[6] = {1, 2, 3, 4, 5, 6}, w[2] = {1, 1}, dx[6] = {7, 7, 7, 7, 7, 7};
  DLTensor in = {x, {kDLCPU, 0}, 2, f64, shape, NULL, 0};
  DLTensor dout = {w, {kDLCPU, 0}, 1, f64, oshape, NULL, 0};
  DLTensor host_dx = {dx, {kDLCPU, 0}, 2, f64, shape, NULL, 0};
  DLTensor din, ddout, ddx;
  void *m[3] = {NULL, NULL, NULL};
  REQUIRE_OK(to_device(c, &in, &din, &m[0]));
  REQUIRE_OK(to_device(c, &dout, &ddout, &m[1]));
  REQUIRE_OK(to_device(c, &host_dx, &ddx, &m[2]));
  const DLTensor *ins[1] = {&din}, *host_ins[1] = {&in};
  ein_options o = {.backend = grad_backend};
  ein_grad *g = NULL;
  REQUIRE_OK(ein_grad_create(c, "a b -> a", ins, 1, &o, 0, &g));
  CHECK(ein_grad_execute(c, g, ins, 1, NULL, &ddout, &host_dx) ==
            EIN_ERR_DEVICE,
        "%s gradient, dinput in host memory", grad_backend_name());
  CHECK(ein_grad_execute(c, g, host_ins, 1, NULL, &ddout, &ddx) ==
            EIN_ERR_DEVICE,
        "%s gradient, input 0 in host memory: %s", grad_backend_name(),
        ein_last_error(c)->message);
  int untouched = 0;
  for (int i = 0; i < 6; i++) untouched += dx[i] == 7;
  CHECK(untouched == 6, "refused device calls wrote dinput");
  CHECK(ein_grad_execute(c, g, ins, 1, NULL, &ddout, &ddx) == EIN_OK,
        "a good device call after the bad ones");
  ein_grad_destroy(g);
  for (int i = 0; i < 3; i++) ein_device_free(c, grad_backend, 0, m[i]);
}

#endif
