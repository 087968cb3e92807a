/*
 * plan_key.c - a tensor's part of a plan-cache key (plan_key.h): written
 * and read back here only, and given to callers by ein_cache_key_tensor.
 */
#include <string.h>

#include "plan_key.h"

int64_t ein_tensor_stride(const DLTensor *t, int d) {
  if (t->shape[d] == 1) return 0;
  if (t->strides) return t->strides[d];
  int64_t s = 1;
  for (int e = t->ndim - 1; e > d; e--) s *= t->shape[e] > 0 ? t->shape[e] : 1;
  return s;
}

void ein_key_tensor_write(unsigned char *v, const DLTensor *t, ein_dtype dt) {
  v[0] = (unsigned char)dt;
  v[1] = (unsigned char)t->ndim;
  for (int d = 0; d < t->ndim; d++) {
    int64_t pair[2] = {t->shape[d], ein_tensor_stride(t, d)};
    memcpy(v + 2 + (size_t)d * sizeof pair, pair, sizeof pair);
  }
}

void ein_key_tensor(ein_strbuf *k, const DLTensor *t, ein_dtype dt) {
  unsigned char v[2 + 2 * EIN_MAX_DIMS * sizeof(int64_t)]; /* check_tensor */
  ein_key_tensor_write(v, t, dt);
  ein_strbuf_append(k, v, ein_key_tensor_size(t->ndim));
}

bool ein_key_tensor_compact(const char *part, size_t len) {
  if (len == 0) return true;
  int ndim = (unsigned char)part[1];
  int64_t expect = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    int64_t v[2]; /* shape, stride as written (0 for size-1 dims) */
    memcpy(v, part + 2 + (size_t)d * sizeof v, sizeof v);
    if (v[0] == 1) continue;
    if (v[1] != expect) return false;
    expect *= v[0];
  }
  return true;
}

size_t ein_cache_key_tensor(const DLTensor *t, void *buf, size_t cap) {
  ein_dtype dt;
  if (!t || !buf || t->ndim < 0 || t->ndim > EIN_MAX_DIMS ||
      (t->ndim > 0 && !t->shape) || !ein_dtype_from_dl(t->dtype, &dt))
    return 0;
  size_t len = ein_key_tensor_size(t->ndim);
  if (cap < len) return 0;
  ein_key_tensor_write(buf, t, dt);
  return len;
}
