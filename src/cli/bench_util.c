/*
 * bench_util.c - what every part of `einc bench` shares: the clock, the
 * median, and random input data.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_device.h"
#include "half.h"

double bench_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

double bench_median(double *v, int n) {
  for (int i = 1; i < n; i++) /* insertion sort: n is small */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Host bytes of n random elements of dtype dt: floats in [-1, 1), integers
 * in [-8, 8) (unsigned [0, 16)), bools half true. */
void *bench_random_data(ein_dtype dt, size_t n, uint64_t seed) {
  size_t esize = ein_dtype_size(dt);
  unsigned char *h = malloc(n ? n * esize : 1);
  if (!h) return NULL;
  for (size_t i = 0; i < n; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    double v = (double)(seed >> 11) * 0x1p-52 - 1.0;
    int64_t iv = (int64_t)(seed >> 60) - 8;
    unsigned char *p = h + i * esize;
    switch (dt) {
    case EIN_DT_F16: *(uint16_t *)p = ein_f32_to_f16((float)v); break;
    case EIN_DT_BF16: *(uint16_t *)p = ein_f32_to_bf16((float)v); break;
    case EIN_DT_F32: *(float *)p = (float)v; break;
    case EIN_DT_F64: *(double *)p = v; break;
    case EIN_DT_C64: ((float *)p)[0] = (float)v, ((float *)p)[1] = (float)(0.5 * v); break;
    case EIN_DT_C128: ((double *)p)[0] = v, ((double *)p)[1] = 0.5 * v; break;
    case EIN_DT_BOOL: *p = v > 0; break;
    case EIN_DT_U8: case EIN_DT_U16: case EIN_DT_U32: case EIN_DT_U64:
      iv += 8; /* fall through */
    default: memcpy(p, &iv, esize); /* little-endian: the low bytes */
    }
  }
  return h;
}

