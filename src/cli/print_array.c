/*
 * print_array.c - a tensor as numpy's repr; see print_array.h. Two passes
 * over the elements shown: the first finds the common format (the widest
 * integer part and fraction, whether scientific), the second prints each
 * element padded to it, so columns line up as numpy's do. A complex array
 * has one format for its real parts and one for its imaginary parts (a
 * second printer, `imag`, always signed), and an element reads "1.+2.j",
 * the 'j' before the imaginary part's padding, as numpy writes it.
 */
#include "print_array.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "half.h"

enum { EDGE = 3, LINE_WIDTH = 75, TOKEN = 128 };

typedef struct printer {
  const DLTensor *t;
  ein_dtype dt;
  int part;             /* complex: 0 prints real parts, 1 imaginary */
  bool plus;            /* a sign on every value (imaginary parts) */
  bool nonfinite, neginf; /* a NaN or Inf seen; a -Inf seen */
  struct printer *imag; /* complex: the imaginary parts' printer */
  bool summarise;
  bool sci;             /* floats in scientific notation */
  int left, right;      /* widest integer part and fraction (floats) */
  int exp;              /* widest exponent ("e-05") in scientific notation */
  int width;            /* widest token (integers, bools, non-finite) */
  double min_abs, max_abs; /* over finite non-zero floats */
  FILE *f;
  int col;              /* the current line's length */
} printer;

/* Floating-point values, real or complex (each part formatted as one). */
static bool is_float(ein_dtype dt) {
  return dt == EIN_DT_F16 || dt == EIN_DT_BF16 || dt == EIN_DT_F32 ||
         dt == EIN_DT_F64 || ein_dtype_is_complex(dt);
}

static double float_at(const printer *p, int64_t i) {
  const char *d = (const char *)p->t->data + p->t->byte_offset;
  switch (p->dt) {
  case EIN_DT_F16: return ein_f16_to_f32(((const uint16_t *)d)[i]);
  case EIN_DT_BF16: return ein_bf16_to_f32(((const uint16_t *)d)[i]);
  case EIN_DT_F32: return ((const float *)d)[i];
  case EIN_DT_C64: return ((const float *)d)[2 * i + p->part];
  case EIN_DT_C128: return ((const double *)d)[2 * i + p->part];
  default: return ((const double *)d)[i];
  }
}

/* Whether text reads back as v in the element's own precision. */
static bool reads_back(const printer *p, const char *text, double v) {
  double r = strtod(text, NULL);
  switch (p->dt) {
  case EIN_DT_F16: return ein_f32_to_f16((float)r) == ein_f32_to_f16((float)v);
  case EIN_DT_BF16:
    return ein_f32_to_bf16((float)r) == ein_f32_to_bf16((float)v);
  case EIN_DT_F32: case EIN_DT_C64: return (float)r == (float)v;
  default: return r == v;
  }
}

/* The fewest digits after the point (at most 8) that read back as v. */
static int digits_for(const printer *p, double v, bool sci) {
  char text[TOKEN];
  for (int d = 0; d < 8; d++) {
    snprintf(text, sizeof text, sci ? "%.*e" : "%.*f", d, v);
    if (reads_back(p, text, v)) return d;
  }
  return 8;
}

/* An integer or bool element as text. */
static void int_token(const printer *p, int64_t i, char *out) {
  const char *d = (const char *)p->t->data + p->t->byte_offset;
  switch (p->dt) {
  case EIN_DT_BOOL: strcpy(out, d[i] ? "True" : "False"); return;
  case EIN_DT_I8: snprintf(out, TOKEN, "%d", ((const int8_t *)d)[i]); return;
  case EIN_DT_I16: snprintf(out, TOKEN, "%d", ((const int16_t *)d)[i]); return;
  case EIN_DT_I32: snprintf(out, TOKEN, "%d", ((const int32_t *)d)[i]); return;
  case EIN_DT_I64:
    snprintf(out, TOKEN, "%lld", (long long)((const int64_t *)d)[i]);
    return;
  case EIN_DT_U8: snprintf(out, TOKEN, "%u", ((const uint8_t *)d)[i]); return;
  case EIN_DT_U16: snprintf(out, TOKEN, "%u", ((const uint16_t *)d)[i]); return;
  case EIN_DT_U32: snprintf(out, TOKEN, "%u", ((const uint32_t *)d)[i]); return;
  default:
    snprintf(out, TOKEN, "%llu", (unsigned long long)((const uint64_t *)d)[i]);
  }
}

/* A float element as text with `digits` after the point ("1." for none),
 * or nan/inf; signed always for the imaginary parts ("+2.", "+nan"). */
static void float_token(const printer *p, double v, int digits, char *out) {
  if (isnan(v)) strcpy(out, p->plus ? "+nan" : "nan");
  else if (isinf(v)) strcpy(out, v < 0 ? "-inf" : p->plus ? "+inf" : "inf");
  else if (p->plus) snprintf(out, TOKEN, p->sci ? "%+#.*e" : "%+#.*f", digits, v);
  else snprintf(out, TOKEN, p->sci ? "%#.*e" : "%#.*f", digits, v);
}

/* Pass 1 for one element: the range of magnitudes, then the widths. */
static void measure(printer *p, int64_t i, int pass) {
  char text[TOKEN];
  if (p->imag) measure(p->imag, i, pass);
  if (!is_float(p->dt)) {
    int_token(p, i, text);
    if ((int)strlen(text) > p->width) p->width = (int)strlen(text);
    return;
  }
  double v = float_at(p, i), a = fabs(v);
  if (pass == 0) {
    if (isfinite(v) && a > 0) {
      if (a < p->min_abs) p->min_abs = a;
      if (a > p->max_abs) p->max_abs = a;
    }
    return;
  }
  if (!isfinite(v)) {
    p->nonfinite = true;
    p->neginf |= isinf(v) && v < 0;
    return;
  }
  int d = digits_for(p, v, p->sci);
  float_token(p, v, d, text);
  const char *dot = strchr(text, '.');
  int left = (int)(dot - text);
  if (left > p->left) p->left = left;
  if (d > p->right) p->right = d;
  const char *e = strchr(text, 'e');
  if (e && (int)strlen(e) > p->exp) p->exp = (int)strlen(e);
}

/* After pass 1: numpy widens the integer part so that "nan", "inf" and
 * "-inf" (with the sign, "+inf", for the imaginary parts) fit the column. */
static void settle(printer *p) {
  if (p->imag) settle(p->imag);
  if (!p->nonfinite) return;
  int offset = p->right + p->exp + 1, sign = p->plus || p->neginf;
  if (3 - offset > p->left) p->left = 3 - offset;
  if (3 + sign - offset > p->left) p->left = 3 + sign - offset;
}

/* Float element i (its part p->part) padded to the common width. */
static void float_element(const printer *p, int64_t i, char *out) {
  char text[TOKEN];
  double v = float_at(p, i);
  int full = p->left + 1 + p->right + p->exp;
  if (!isfinite(v)) {
    float_token(p, v, 0, text);
    snprintf(out, TOKEN, "%*s", full, text);
    return;
  }
  /* numpy pads a fraction with zeros in scientific notation, spaces else */
  int d = p->sci ? p->right : digits_for(p, v, false);
  float_token(p, v, d, text);
  const char *dot = strchr(text, '.');
  int left = (int)(dot - text);
  snprintf(out, TOKEN, "%*s%s%*s", p->left - left, "", text,
           p->sci ? 0 : p->right - d, "");
}

/* Element i padded to the common width. */
static void format_element(const printer *p, int64_t i, char *out) {
  char text[TOKEN];
  if (!is_float(p->dt)) {
    int_token(p, i, text);
    snprintf(out, TOKEN, "%*s", p->width, text);
    return;
  }
  float_element(p, i, out);
  if (!p->imag) return;
  float_element(p->imag, i, text);
  size_t n = strlen(text), body = n;
  while (body > 0 && text[body - 1] == ' ') body--;
  size_t at = strlen(out);
  snprintf(out + at, TOKEN - at, "%.*sj%s", (int)body, text, text + body);
}

/* Whether an axis of n shows only its first and last EDGE indices. */
static bool gap(const printer *p, int64_t n) {
  return p->summarise && n > 2 * EDGE;
}

static int64_t stride_of(const DLTensor *t, int axis) {
  int64_t s = 1;
  for (int d = axis + 1; d < t->ndim; d++) s *= t->shape[d];
  return s;
}

/* Every element shown, through measure (pass 0: magnitudes, 1: widths). */
static void walk(printer *p, int axis, int64_t offset, int pass) {
  if (axis == p->t->ndim) {
    measure(p, offset, pass);
    return;
  }
  int64_t n = p->t->shape[axis], stride = stride_of(p->t, axis);
  for (int64_t k = 0; k < n; k++) {
    if (gap(p, n) && k == EDGE) k = n - EDGE;
    walk(p, axis + 1, offset + k * stride, pass);
  }
}

static void emit(printer *p, const char *s) {
  fputs(s, p->f);
  const char *nl = strrchr(s, '\n');
  p->col = nl ? (int)strlen(nl + 1) : p->col + (int)strlen(s);
}

static void emit_break(printer *p, int newlines, int indent) {
  for (int i = 0; i < newlines; i++) fputc('\n', p->f);
  fprintf(p->f, "%*s", indent, "");
  p->col = indent;
}

/* After an element of the last axis: a space, or a new line where the
 * next `word` would pass numpy's line width. */
static void element_break(printer *p, const char *word, int indent) {
  if (p->col + 1 + (int)strlen(word) > LINE_WIDTH - 1)
    emit_break(p, 1, indent);
  else
    emit(p, " ");
}

/* One axis as "[...]"; its '[' at column indent - 1. */
static void print_axis(printer *p, int axis, int64_t offset, int indent) {
  int64_t n = p->t->shape[axis], stride = stride_of(p->t, axis);
  bool last = axis == p->t->ndim - 1;
  char word[TOKEN];
  emit(p, "[");
  for (int64_t k = 0; k < n; k++) {
    bool skip = gap(p, n) && k == EDGE;
    if (skip) strcpy(word, "...");
    else if (last) format_element(p, offset + k * stride, word);
    if (k > 0) {
      emit(p, ",");
      if (last) element_break(p, word, indent + 1);
      else emit_break(p, p->t->ndim - axis - 1, indent + 1);
    }
    if (skip) {
      emit(p, word);
      k = n - EDGE - 1;
    } else if (last) {
      emit(p, word);
    } else {
      print_axis(p, axis + 1, offset + k * stride, indent + 1);
    }
  }
  emit(p, "]");
}

static const char *numpy_name(ein_dtype dt) {
  static const char *const names[EIN_DT_COUNT] = {
      [EIN_DT_F16] = "float16", [EIN_DT_BF16] = "bfloat16",
      [EIN_DT_F32] = "float32", [EIN_DT_F64] = "float64",
      [EIN_DT_I8] = "int8",     [EIN_DT_I16] = "int16",
      [EIN_DT_I32] = "int32",   [EIN_DT_I64] = "int64",
      [EIN_DT_U8] = "uint8",    [EIN_DT_U16] = "uint16",
      [EIN_DT_U32] = "uint32",  [EIN_DT_U64] = "uint64",
      [EIN_DT_BOOL] = "bool",   [EIN_DT_C64] = "complex64",
      [EIN_DT_C128] = "complex128"};
  return names[dt] ? names[dt] : "?";
}

/* ", shape=(...)" where numpy shows it, ", dtype=..." where the dtype is
 * not numpy's default for its values, then ")". */
static void print_suffix(printer *p, int64_t numel) {
  char extra[512] = "";
  int n = 0;
  if (p->summarise || (numel == 0 && p->t->ndim != 1)) {
    n += snprintf(extra + n, sizeof extra - (size_t)n, ", shape=(");
    for (int d = 0; d < p->t->ndim && n < 400; d++)
      n += snprintf(extra + n, sizeof extra - (size_t)n, "%s%lld",
                    d ? ", " : "", (long long)p->t->shape[d]);
    n += snprintf(extra + n, sizeof extra - (size_t)n,
                  p->t->ndim == 1 ? ",)" : ")");
  }
  bool implied = p->dt == EIN_DT_F64 || p->dt == EIN_DT_I64 ||
                 p->dt == EIN_DT_BOOL || p->dt == EIN_DT_C128;
  if (!implied || numel == 0)
    snprintf(extra + n, sizeof extra - (size_t)n, ", dtype=%s",
             numpy_name(p->dt));
  if (extra[0] && p->col + (int)strlen(extra) + 1 > LINE_WIDTH) {
    emit(p, ",");
    emit_break(p, 1, 6);
    emit(p, extra + 2);
  } else {
    emit(p, extra);
  }
  emit(p, ")\n");
}

/* Scientific notation where numpy takes it: values past 1e8 or below
 * 1e-4, or spanning more than three decades. */
static void choose_notation(printer *p) {
  if (p->imag) choose_notation(p->imag);
  p->sci = is_float(p->dt) && p->max_abs > 0 &&
           (p->max_abs >= 1e8 || p->min_abs < 1e-4 ||
            p->max_abs / p->min_abs > 1e3);
}

void cli_print_array(FILE *f, const DLTensor *t) {
  printer p = {.t = t, .f = f, .min_abs = INFINITY};
  if (!ein_dtype_from_dl(t->dtype, &p.dt)) p.dt = EIN_DT_F32; /* unreachable */
  int64_t numel = 1;
  for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
  p.summarise = numel > CLI_PRINT_MAX;
  emit(&p, "array(");
  if (numel == 0) {
    emit(&p, "[]");
    print_suffix(&p, numel);
    return;
  }
  printer imag = p;
  if (ein_dtype_is_complex(p.dt)) {
    imag.part = 1;
    imag.plus = true;
    p.imag = &imag;
  }
  walk(&p, 0, 0, 0);
  choose_notation(&p);
  walk(&p, 0, 0, 1);
  settle(&p);
  if (t->ndim == 0) {
    char word[TOKEN];
    format_element(&p, 0, word);
    emit(&p, word);
  } else {
    print_axis(&p, 0, 0, 6);
  }
  print_suffix(&p, numel);
}
