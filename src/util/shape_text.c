/*
 * shape_text.c - shapes as text (shape_text.h). The cut past 16 dims keeps
 * messages about tensors of up to 64 dims to one readable line.
 */
#include "shape_text.h"

#include <stdio.h>

char *ein_format_shape(char *buf, size_t cap, const int64_t *dims, int ndim) {
  if (ndim == 0) {
    snprintf(buf, cap, "scalar");
    return buf;
  }
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < ndim && len + 1 < cap; i++) {
    if (i == 16) {
      snprintf(buf + len, cap - len, "x...(%d dims)", ndim);
      return buf;
    }
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "x" : "",
                            (long long)dims[i]);
  }
  return buf;
}
