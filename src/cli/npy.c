/* npy.c - reading and writing NumPy .npy files (see npy.h). */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checked.h"
#include "dtype.h"

static const struct {
  const char *descr;
  ein_dtype dt;
} descrs[] = {
    {"<f2", EIN_DT_F16}, {"<f4", EIN_DT_F32}, {"<f8", EIN_DT_F64},
    {"|i1", EIN_DT_I8},  {"<i2", EIN_DT_I16}, {"<i4", EIN_DT_I32},
    {"<i8", EIN_DT_I64}, {"|u1", EIN_DT_U8},  {"<u2", EIN_DT_U16},
    {"<u4", EIN_DT_U32}, {"<u8", EIN_DT_U64}, {"|b1", EIN_DT_BOOL},
    {"<c8", EIN_DT_C64}, {"<c16", EIN_DT_C128},
    /* numpy has no bfloat16: ml_dtypes' bfloat16 is saved as a 2-byte void
     * ('<V2'; plain numpy writes '|V2'), and np.load(f).view(
     * ml_dtypes.bfloat16) reads it back. einc reads any V2 as bf16 (eval's
     * --dtype reinterprets) and writes bf16 as '<V2'. */
    {"<V2", EIN_DT_BF16}, {"|V2", EIN_DT_BF16},
    /* ml_dtypes' float8_e5m2 saves as '<f1'; its float8_e4m3fn (and
     * three other 8-bit floats) as '<V1': read as f8e4m3 here, and eval
     * insists on --dtype to say which. */
    {"<V1", EIN_DT_F8E4M3}, {"|V1", EIN_DT_F8E4M3},
    {"<f1", EIN_DT_F8E5M2}, {"|f1", EIN_DT_F8E5M2},
};

static bool fail(char *msg, size_t cap, const char *fmt, const char *path,
                 const char *detail) {
  snprintf(msg, cap, fmt, path, detail);
  return false;
}

/* The text after `'key':` in a header dict, or NULL. */
static const char *dict_value(const char *header, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(header, pat);
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

/* The 'descr' entry: one of the plain numeric dtypes in descrs. */
static bool parse_descr(const char *h, ein_dtype *dt, char *why, size_t cap) {
  const char *v = dict_value(h, "descr");
  if (v && *v == '[') {
    snprintf(why, cap,
             "the dtype is structured (a list of fields); einc reads plain "
             "numeric arrays");
    return false;
  }
  if (!v || *v != '\'') {
    snprintf(why, cap, "no 'descr' in the header");
    return false;
  }
  const char *end = strchr(v + 1, '\'');
  if (!end) {
    snprintf(why, cap, "unterminated 'descr'");
    return false;
  }
  size_t n = (size_t)(end - v - 1);
  for (size_t i = 0; i < sizeof descrs / sizeof *descrs; i++) {
    const char *d = descrs[i].descr;
    /* one-byte types may say '|', '<' or '>' */
    bool one = d[0] == '|';
    if (n == strlen(d) && (memcmp(v + 1, d, n) == 0 ||
                   (one && memcmp(v + 2, d + 1, 2) == 0 &&
                    (v[1] == '<' || v[1] == '>' || v[1] == '|')))) {
      *dt = descrs[i].dt;
      return true;
    }
  }
  snprintf(why, cap,
           "dtype '%.*s' is not supported (little-endian f2, f4, f8, "
           "c8, c16, i1-i8, u1-u8, b1, V2 as bf16, f1 and V1 as fp8)",
           (int)(n < 40 ? n : 40), v + 1);
  return false;
}

/* The 'shape' tuple: sizes of 0 or more, at most EIN_MAX_DIMS of them. */
static bool parse_shape_tuple(const char *h, int *ndim, int64_t *shape,
                              char *why, size_t cap) {
  const char *v = dict_value(h, "shape");
  if (!v || *v != '(') {
    snprintf(why, cap, "no 'shape' tuple in the header");
    return false;
  }
  v++;
  *ndim = 0;
  for (;;) {
    while (*v == ' ' || *v == ',') v++;
    if (*v == ')') break;
    char *e;
    errno = 0;
    long long s = strtoll(v, &e, 10);
    if (e == v) {
      snprintf(why, cap, "'shape' holds something other than sizes");
      return false;
    }
    if (errno == ERANGE) {
      snprintf(why, cap, "a size in 'shape' does not fit in int64");
      return false;
    }
    if (s < 0) {
      snprintf(why, cap, "'shape' has the negative size %lld", s);
      return false;
    }
    if (*ndim == EIN_MAX_DIMS) {
      snprintf(why, cap, "more than %d dims", EIN_MAX_DIMS);
      return false;
    }
    shape[(*ndim)++] = s;
    v = e;
  }
  return true;
}

static bool parse_header(const char *h, ein_dtype *dt, bool *fortran,
                         int *ndim, int64_t *shape, char *why, size_t cap) {
  if (!parse_descr(h, dt, why, cap)) return false;
  const char *v = dict_value(h, "fortran_order");
  if (!v) {
    snprintf(why, cap, "no 'fortran_order' in the header");
    return false;
  }
  if (strncmp(v, "True", 4) != 0 && strncmp(v, "False", 5) != 0) {
    snprintf(why, cap, "'fortran_order' is neither True nor False");
    return false;
  }
  *fortran = v[0] == 'T';
  return parse_shape_tuple(h, ndim, shape, why, cap);
}

/* Bytes from the current position to the end of f, or -1 when f cannot
 * seek (a pipe). */
static int64_t bytes_left(FILE *f) {
  long here = ftell(f);
  if (here < 0 || fseek(f, 0, SEEK_END) != 0) return -1;
  long end = ftell(f);
  if (end < 0 || fseek(f, here, SEEK_SET) != 0) return -1;
  return (int64_t)end - here;
}

bool npy_read(const char *path, npy_array *out, char *msg, size_t cap) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return fail(msg, cap, "cannot open '%s': %s", path, strerror(errno));
  bool ok = npy_read_stream(f, path, out, msg, cap);
  fclose(f);
  return ok;
}

/* The magic string and version, and from them the header's length. */
static bool read_preamble(FILE *f, const char *path, size_t *hlen, char *msg,
                          size_t cap) {
  unsigned char pre[12];
  size_t got = fread(pre, 1, 10, f);
  if (got < 6 || memcmp(pre, "\x93NUMPY", 6) != 0)
    return fail(msg, cap, "'%s' is not a .npy file (%s)", path,
                "it does not begin with \\x93NUMPY");
  if (got < 10)
    return fail(msg, cap, "'%s' is truncated (%s)", path, "in the preamble");
  if (pre[6] == 1) {
    *hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, f) != 2)
      return fail(msg, cap, "'%s' is truncated (%s)", path, "in the preamble");
    *hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
            (size_t)pre[11] << 24;
  } else {
    char why[160];
    snprintf(why, sizeof why, "format version %d is unknown", pre[6]);
    return fail(msg, cap, "'%s': %s", path, why);
  }
  if (*hlen > (1u << 20))
    return fail(msg, cap, "'%s': %s", path, "header longer than 1 MiB");
  return true;
}

/* Reads and parses the header dict of hlen bytes. */
static bool read_header(FILE *f, const char *path, size_t hlen, ein_dtype *dt,
                        bool *fortran, int *ndim, int64_t *shape, char *msg,
                        size_t cap) {
  char why[160];
  char *header = malloc(hlen + 1);
  bool ok = header && fread(header, 1, hlen, f) == hlen;
  if (!ok) {
    free(header);
    return fail(msg, cap, "'%s' is truncated (%s)", path, "in the header");
  }
  header[hlen] = 0;
  ok = parse_header(header, dt, fortran, ndim, shape, why, sizeof why);
  free(header);
  if (!ok) return fail(msg, cap, "'%s': %s", path, why);
  return true;
}

/* The data's size in bytes, checked against what follows the header in
 * the file before anything that large is allocated. */
static bool data_bytes(FILE *f, const char *path, ein_dtype dt, int ndim,
                       const int64_t *shape, int64_t *bytes, char *msg,
                       size_t cap) {
  int64_t span;
  bool empty;
  if (!ein_nonzero_span(ndim, shape, &span, &empty))
    return fail(msg, cap, "'%s': %s", path, "shape overflows int64");
  int64_t numel = empty ? 0 : span;
  if (__builtin_mul_overflow(numel, (int64_t)ein_dtype_size(dt), bytes))
    return fail(msg, cap, "'%s': %s", path, "shape overflows int64");
  int64_t left = bytes_left(f);
  if (left >= 0 && left != *bytes) {
    char why[160];
    snprintf(why, sizeof why,
             "the header promises %lld bytes of data but %lld follow it",
             (long long)*bytes, (long long)left);
    return fail(msg, cap, left < *bytes ? "'%s' is truncated: %s" : "'%s': %s",
                path, why);
  }
  return true;
}

/* Points out->t at the data read: C or Fortran order, dense. */
static void set_tensor(npy_array *out, ein_dtype dt, int ndim, bool fortran) {
  int64_t s = 1;
  for (int k = 0; k < ndim; k++) { /* Fortran order: first dim fastest */
    int d = fortran ? k : ndim - 1 - k;
    out->strides[d] = s;
    s *= out->shape[d] > 0 ? out->shape[d] : 1;
  }
  out->t.data = out->data;
  out->t.device = (DLDevice){kDLCPU, 0};
  out->t.ndim = ndim;
  out->t.dtype = ein_dtype_to_dl(dt);
  out->t.shape = out->shape;
  out->t.strides = out->strides;
}

bool npy_read_header(FILE *f, const char *path, ein_dtype *dt, int *ndim,
                     int64_t *shape, char *msg, size_t cap) {
  size_t hlen;
  bool fortran;
  int64_t bytes;
  return read_preamble(f, path, &hlen, msg, cap) &&
         read_header(f, path, hlen, dt, &fortran, ndim, shape, msg, cap) &&
         data_bytes(f, path, *dt, *ndim, shape, &bytes, msg, cap);
}

bool npy_read_stream(FILE *f, const char *path, npy_array *out, char *msg,
                     size_t cap) {
  memset(out, 0, sizeof *out);
  size_t hlen;
  ein_dtype dt;
  bool fortran;
  int ndim;
  int64_t bytes;
  if (!read_preamble(f, path, &hlen, msg, cap) ||
      !read_header(f, path, hlen, &dt, &fortran, &ndim, out->shape, msg,
                   cap) ||
      !data_bytes(f, path, dt, ndim, out->shape, &bytes, msg, cap))
    goto fail;
  out->data = malloc(bytes ? (size_t)bytes : 1);
  if (!out->data) {
    fail(msg, cap, "'%s': %s", path, "out of memory");
    goto fail;
  }
  if (fread(out->data, 1, (size_t)bytes, f) != (size_t)bytes) {
    char why[160];
    snprintf(why, sizeof why, "the header promises %lld bytes of data",
             (long long)bytes);
    fail(msg, cap, "'%s' is truncated: %s", path, why);
    goto fail;
  }
  set_tensor(out, dt, ndim, fortran);
  return true;
fail:
  npy_free(out);
  return false;
}

/* The header of a version-1 file for t (padded so the data starts 64-byte
 * aligned, ending in '\n') into header[4096]: its length, or -1 when numpy
 * has no such dtype. */
static int npy_header(const DLTensor *t, char *header, size_t *data_bytes) {
  ein_dtype dt;
  if (!ein_dtype_from_dl(t->dtype, &dt)) return -1;
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof descrs / sizeof *descrs && !descr; i++)
    if (descrs[i].dt == dt) descr = descrs[i].descr; /* the first: '<V2' */
  if (!descr) return -1;
  int n = snprintf(header, 4096,
                   "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   descr);
  for (int d = 0; d < t->ndim && n < 3900; d++)
    n += snprintf(header + n, 4096 - (size_t)n, "%lld%s",
                  (long long)t->shape[d], t->ndim == 1 ? "," : (d + 1 < t->ndim ? ", " : ""));
  n += snprintf(header + n, 4096 - (size_t)n, "), }");
  int total = 10 + n + 1;
  int pad = (64 - total % 64) % 64;
  memset(header + n, ' ', (size_t)pad);
  n += pad;
  header[n++] = '\n';
  int64_t numel = 1;
  for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
  *data_bytes = (size_t)numel * ein_dtype_size(dt);
  return n;
}

bool npy_write_stream(FILE *f, const DLTensor *t, const char *name,
                      char *msg, size_t cap) {
  char header[4096];
  size_t bytes;
  int n = npy_header(t, header, &bytes);
  if (n < 0)
    return fail(msg, cap, "cannot write '%s': %s", name,
                "numpy has no such dtype");
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                           (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
  errno = 0;
  bool ok = fwrite(pre, 1, 10, f) == 10 &&
            fwrite(header, 1, (size_t)n, f) == (size_t)n &&
            fwrite((const char *)t->data + t->byte_offset, 1, bytes, f) == bytes &&
            fflush(f) == 0;
  if (!ok)
    return fail(msg, cap, "cannot write '%s': %s", name,
                strerror(errno ? errno : EIO));
  return true;
}

bool npy_write(const char *path, const DLTensor *t, char *msg, size_t cap) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.einc-tmp-%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return fail(msg, cap, "cannot write '%s': %s", path, strerror(errno));
  bool ok = npy_write_stream(f, t, path, msg, cap);
  int err = 0;
  if (ok && fsync(fileno(f)) != 0) err = errno;
  if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
  if (ok && !err && rename(tmp, path) != 0) err = errno;
  if (!ok || err) {
    unlink(tmp);
    return ok ? fail(msg, cap, "cannot write '%s': %s", path, strerror(err))
              : false;
  }
  return true;
}

void npy_free(npy_array *a) {
  free(a->data);
  a->data = NULL;
}
