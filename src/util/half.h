/*
 * half.h - f16 and bf16 conversions in portable C (no _Float16 needed).
 * Rounding is to nearest, ties to even; NaN stays NaN, overflow gives Inf.
 */
#ifndef EIN_UTIL_HALF_H
#define EIN_UTIL_HALF_H

#include <stdint.h>
#include <string.h>

static inline float ein_bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t ein_f32_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float ein_bf16_to_f32(uint16_t h) {
  return ein_bits_to_f32((uint32_t)h << 16);
}

static inline uint16_t ein_f32_to_bf16(float f) {
  uint32_t u = ein_f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

static inline float ein_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) /* inf or nan */
    return ein_bits_to_f32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) { /* zero or subnormal: mant * 2^-24 */
    float v = (float)mant * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return ein_bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline uint16_t ein_f32_to_f16(float f) {
  uint32_t u = ein_f32_to_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00; /* nan */
  if (abs >= 0x477ff000u) return sign | 0x7c00; /* rounds to inf */
  if (abs < 0x38800000u) { /* subnormal or zero in f16 */
    /* value / 2^-24, rounded to nearest even */
    float v = ein_bits_to_f32(abs) * 16777216.0f;
    uint32_t m = (uint32_t)v;
    float rest = v - (float)m;
    if (rest > 0.5f || (rest == 0.5f && (m & 1))) m++;
    return sign | (uint16_t)m;
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1); /* round to 10 bits */
  return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

#endif
