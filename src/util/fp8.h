/*
 * fp8.h - float8_e4m3fn and float8_e5m2 conversions in portable C.
 *
 * Decoding is exact (every fp8 value is an f32). Encoding rounds to
 * nearest, ties to even; e4m3fn, which has no infinity, saturates a finite
 * overflow to +-448 (as torch and CUDA's __NV_SATFINITE do), e5m2
 * overflows to +-inf; NaN stays NaN (docs/design.md, "fp8 dtypes").
 */
#ifndef EIN_UTIL_FP8_H
#define EIN_UTIL_FP8_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* A format: mantissa bits, exponent bias, and whether the all-ones
 * exponent holds inf/NaN (IEEE-like e5m2) or ordinary values (e4m3fn,
 * whose only NaN is S.1111.111). */
typedef struct ein_fp8_format {
  int mbits, ebits, bias;
  bool ieee;
  double max; /* largest finite value */
} ein_fp8_format;

static const ein_fp8_format ein_fp8_e4m3fn = {3, 4, 7, false, 448.0};
static const ein_fp8_format ein_fp8_e5m2 = {2, 5, 15, true, 57344.0};

static inline double ein_fp8_decode(const ein_fp8_format *f, uint8_t b) {
  int emax_field = (1 << f->ebits) - 1;
  int e = (b >> f->mbits) & emax_field, m = b & ((1 << f->mbits) - 1);
  double sign = (b & 0x80) ? -1.0 : 1.0;
  if (f->ieee && e == emax_field) return m ? NAN : sign * INFINITY;
  if (!f->ieee && e == emax_field && m == (1 << f->mbits) - 1) return NAN;
  if (e == 0) return sign * ldexp(m, 1 - f->bias - f->mbits);
  return sign * ldexp(m + (1 << f->mbits), e - f->bias - f->mbits);
}

/* The bits of a value that is exactly representable and finite. */
static inline uint8_t ein_fp8_bits(const ein_fp8_format *f, double a) {
  if (a == 0) return 0;
  int e;
  (void)frexp(a, &e); /* a = q * 2^e, q in [0.5, 1) */
  int field = e - 1 + f->bias;
  if (field < 1) /* subnormal: a = m * 2^(1 - bias - mbits) */
    return (uint8_t)ldexp(a, f->bias - 1 + f->mbits);
  int m = (int)(ldexp(a, f->mbits - (e - 1))) - (1 << f->mbits);
  return (uint8_t)((field << f->mbits) | m);
}

static inline uint8_t ein_fp8_encode(const ein_fp8_format *f, double x) {
  uint8_t sign = signbit(x) ? 0x80 : 0;
  uint8_t nan = f->ieee ? 0x7e : 0x7f, inf = 0x7c;
  if (isnan(x)) return sign | nan;
  double a = fabs(x);
  if (isinf(a)) return sign | (f->ieee ? inf : ein_fp8_bits(f, f->max));
  int e;
  (void)frexp(a, &e);
  int emin = 1 - f->bias; /* exponent of the smallest normal */
  int qexp = (e - 1 < emin ? emin : e - 1) - f->mbits; /* the step */
  double r = ldexp(nearbyint(ldexp(a, -qexp)), qexp); /* ties to even */
  if (r > f->max) return sign | (f->ieee ? inf : ein_fp8_bits(f, f->max));
  return sign | ein_fp8_bits(f, r);
}

#endif
