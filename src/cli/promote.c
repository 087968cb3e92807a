/* promote.c - see promote.h. */
#include "promote.h"

#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"

static int bits_of(ein_dtype dt) { return (int)ein_dtype_size(dt) * 8; }

static bool is_unsigned(ein_dtype dt) {
  return dt == EIN_DT_U8 || dt == EIN_DT_U16 || dt == EIN_DT_U32 ||
         dt == EIN_DT_U64;
}

static bool is_int(ein_dtype dt) {
  return ein_dtype_is_signed_int(dt) || is_unsigned(dt);
}

static ein_dtype signed_of_bits(int bits) {
  return bits <= 8 ? EIN_DT_I8 : bits <= 16 ? EIN_DT_I16
         : bits <= 32 ? EIN_DT_I32 : EIN_DT_I64;
}

/* The smallest float holding every value of integer dt (numpy's rule). */
static ein_dtype float_for_int(ein_dtype dt) {
  int b = bits_of(dt);
  return b <= 8 ? EIN_DT_F16 : b <= 16 ? EIN_DT_F32 : EIN_DT_F64;
}

static ein_dtype promote_ints(ein_dtype a, ein_dtype b) {
  if (is_unsigned(a) == is_unsigned(b)) return bits_of(a) >= bits_of(b) ? a : b;
  ein_dtype u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
  if (bits_of(s) > bits_of(u)) return s;
  return bits_of(u) < 64 ? signed_of_bits(2 * bits_of(u)) : EIN_DT_F64;
}

static ein_dtype promote_floats(ein_dtype a, ein_dtype b) {
  if (a == b) return a;
  if ((a == EIN_DT_BF16 && b == EIN_DT_F16) ||
      (a == EIN_DT_F16 && b == EIN_DT_BF16))
    return EIN_DT_F32;
  return bits_of(a) >= bits_of(b) ? a : b;
}

/* Real dtypes only (no bool, no complex). */
static ein_dtype promote_real(ein_dtype a, ein_dtype b) {
  if (is_int(a) && is_int(b)) return promote_ints(a, b);
  if (is_int(a)) a = float_for_int(a);
  if (is_int(b)) b = float_for_int(b);
  return promote_floats(a, b);
}

ein_dtype cli_promote_pair(ein_dtype a, ein_dtype b) {
  if (a == b || b == EIN_DT_BOOL) return a;
  if (a == EIN_DT_BOOL) return b;
  bool cplx = ein_dtype_is_complex(a) || ein_dtype_is_complex(b);
  if (ein_dtype_is_complex(a)) a = ein_dtype_real(a);
  if (ein_dtype_is_complex(b)) b = ein_dtype_real(b);
  ein_dtype r = promote_real(a, b);
  if (!cplx) return r;
  return r == EIN_DT_F64 ? EIN_DT_C128 : EIN_DT_C64;
}

/* One element of any dtype, wide enough for every value (the widening
 * conversions below need nothing more). */
typedef struct wide {
  double complex z; /* floats and complex */
  int64_t i;        /* signed ints and bool */
  uint64_t u;       /* unsigned ints */
} wide;

static wide load(ein_dtype dt, const void *p) {
  wide w = {0, 0, 0};
  switch (dt) {
  case EIN_DT_F16: w.z = ein_f16_to_f32(*(const uint16_t *)p); break;
  case EIN_DT_BF16: w.z = ein_bf16_to_f32(*(const uint16_t *)p); break;
  case EIN_DT_F32: w.z = *(const float *)p; break;
  case EIN_DT_F64: w.z = *(const double *)p; break;
  case EIN_DT_C64: w.z = *(const float complex *)p; break;
  case EIN_DT_C128: w.z = *(const double complex *)p; break;
  case EIN_DT_I8: w.i = *(const int8_t *)p; break;
  case EIN_DT_I16: w.i = *(const int16_t *)p; break;
  case EIN_DT_I32: w.i = *(const int32_t *)p; break;
  case EIN_DT_I64: w.i = *(const int64_t *)p; break;
  case EIN_DT_BOOL: w.i = *(const uint8_t *)p != 0; break;
  case EIN_DT_U8: w.u = *(const uint8_t *)p; break;
  case EIN_DT_U16: w.u = *(const uint16_t *)p; break;
  case EIN_DT_U32: w.u = *(const uint32_t *)p; break;
  case EIN_DT_U64: w.u = *(const uint64_t *)p; break;
  default: break;
  }
  if (is_unsigned(dt)) {
    w.i = (int64_t)w.u; /* widened into a signed type only when it fits */
    w.z = (double)w.u;
  } else if (is_int(dt) || dt == EIN_DT_BOOL) {
    w.u = (uint64_t)w.i;
    w.z = (double)w.i;
  }
  return w;
}

static void store(ein_dtype dt, void *p, wide w) {
  switch (dt) {
  case EIN_DT_F16: *(uint16_t *)p = ein_f32_to_f16((float)creal(w.z)); break;
  case EIN_DT_BF16: *(uint16_t *)p = ein_f32_to_bf16((float)creal(w.z)); break;
  case EIN_DT_F32: *(float *)p = (float)creal(w.z); break;
  case EIN_DT_F64: *(double *)p = creal(w.z); break;
  case EIN_DT_C64: *(float complex *)p = (float complex)w.z; break;
  case EIN_DT_C128: *(double complex *)p = w.z; break;
  case EIN_DT_I8: *(int8_t *)p = (int8_t)w.i; break;
  case EIN_DT_I16: *(int16_t *)p = (int16_t)w.i; break;
  case EIN_DT_I32: *(int32_t *)p = (int32_t)w.i; break;
  case EIN_DT_I64: *(int64_t *)p = w.i; break;
  case EIN_DT_U8: *(uint8_t *)p = (uint8_t)w.u; break;
  case EIN_DT_U16: *(uint16_t *)p = (uint16_t)w.u; break;
  case EIN_DT_U32: *(uint32_t *)p = (uint32_t)w.u; break;
  case EIN_DT_U64: *(uint64_t *)p = w.u; break;
  case EIN_DT_BOOL: *(uint8_t *)p = w.i != 0; break;
  default: break;
  }
}

static int64_t numel_of(const npy_array *a) {
  int64_t n = 1;
  for (int d = 0; d < a->t.ndim; d++) n *= a->shape[d];
  return n;
}

/* a's elements, in storage order, converted to `to` in a new buffer. */
static bool convert(npy_array *a, ein_dtype from, ein_dtype to) {
  int64_t n = numel_of(a);
  size_t fs = ein_dtype_size(from), ts = ein_dtype_size(to);
  unsigned char *out = malloc((size_t)(n ? n : 1) * ts);
  if (!out) return false;
  const unsigned char *in = a->data;
  for (int64_t k = 0; k < n; k++)
    store(to, out + (size_t)k * ts, load(from, in + (size_t)k * fs));
  free(a->data);
  a->data = out;
  a->t.data = out;
  a->t.dtype = ein_dtype_to_dl(to);
  return true;
}

bool cli_promote_inputs(npy_array *inputs, int n) {
  ein_dtype dts[EIN_MAX_OPERANDS], common;
  for (int i = 0; i < n; i++)
    if (!ein_dtype_from_dl(inputs[i].t.dtype, &dts[i])) return true;
  if (n == 0) return true;
  common = dts[0];
  for (int i = 1; i < n; i++) common = cli_promote_pair(common, dts[i]);
  for (int i = 0; i < n; i++)
    if (dts[i] != common && !convert(&inputs[i], dts[i], common)) return false;
  return true;
}
