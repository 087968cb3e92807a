/*
 * test_bad_inputs.c - the bad-input catalogue (docs/reliability.md): every
 * entry is a hostile or mistaken input with the status and the exact
 * message it must produce. Three tables:
 *   - error_cases.inc (shared with test_errors): expressions, shapes and
 *     options. Here each one also goes through ein_eval with real tensors,
 *     which must fail the same way.
 *   - bad_tensors.inc: what ein_eval and ein_plan_execute get wrong about
 *     tensors, options and expressions too big or too deep to write inline.
 *   - bad_npy.inc: malformed .npy files for `einc eval`'s reader.
 * For every ein_eval entry the output buffer is filled with a sentinel
 * first and must be untouched afterwards (no partial output), and the
 * context must still evaluate a good expression. The ASan build checks
 * that nothing leaks; a time limit per entry catches hangs.
 *
 * Run with EIN_DUMP=1 to print what the library says for every entry.
 */
#include <stdlib.h>
#include <time.h>

#include "cases.h"
#include "dtype.h"
#include "harness.h"
#include "npy.h"

static bool dump;

/* An entry may take at most this long: a hang shows up as a failure. */
static const double ENTRY_SECONDS = 2.0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ----------------------------------------------------------- tensors */

/* A tensor written as text (see bad_tensors.inc): its DLTensor, its shape
 * and strides storage, and a buffer when it has data. */
typedef struct spec_tensor {
  DLTensor t;
  int64_t shape[128], strides[128];
  unsigned char *buf;
  size_t bytes;
} spec_tensor;

static const struct {
  const char *name;
  DLDataType dl;
} dtype_names[] = {
    {"f16", {kDLFloat, 16, 1}},   {"bf16", {kDLBfloat, 16, 1}},
    {"f32", {kDLFloat, 32, 1}},   {"f64", {kDLFloat, 64, 1}},
    {"i8", {kDLInt, 8, 1}},       {"i32", {kDLInt, 32, 1}},
    {"i64", {kDLInt, 64, 1}},     {"u8", {kDLUInt, 8, 1}},
    {"bool", {6 /* kDLBool */, 8, 1}},    {"c64", {kDLComplex, 64, 1}},
    {"c128", {kDLComplex, 128, 1}}, {"c32", {kDLComplex, 32, 1}},
    {"f32x4", {kDLFloat, 32, 4}}, {"f8", {kDLFloat, 8, 1}},
    {"i128", {kDLInt, 128, 1}},   {"u1", {kDLUInt, 1, 1}},
    {"opaque", {kDLOpaqueHandle, 64, 1}},
};

/* Parses "f32:2x3/s=3,1/null/dev=2:0/off=8/nd=70/noshape/lowaddr" into x.
 * Data is allocated (and filled with random bytes, or the sentinel for an
 * output) when the view spans a sane number of elements; otherwise the
 * data pointer is a fake address that a correct einc never reads. */
static void parse_tensor(const char *spec, spec_tensor *x, bool output) {
  memset(x, 0, sizeof *x);
  char text[512];
  snprintf(text, sizeof text, "%s", spec);
  char *mods = strchr(text, '/');
  if (mods) *mods++ = 0;
  char *colon = strchr(text, ':');
  *colon = 0;
  for (size_t i = 0; i < sizeof dtype_names / sizeof *dtype_names; i++)
    if (strcmp(text, dtype_names[i].name) == 0) x->t.dtype = dtype_names[i].dl;
  char *dims = colon + 1;
  if (strcmp(dims, "scalar") != 0)
    for (char *p = dims;;) {
      char *end;
      x->shape[x->t.ndim++] = strtoll(p, &end, 10);
      if (*end != 'x') break;
      p = end + 1;
    }
  x->t.shape = x->shape;
  x->t.device = (DLDevice){kDLCPU, 0};
  bool null_data = false, low = false;
  for (char *m = mods ? strtok(mods, "/") : NULL; m; m = strtok(NULL, "/")) {
    if (strncmp(m, "s=", 2) == 0) {
      int d = 0;
      for (char *p = m + 2;;) {
        char *end;
        x->strides[d++] = strtoll(p, &end, 10);
        if (*end != ',') break;
        p = end + 1;
      }
      x->t.strides = x->strides;
    } else if (strcmp(m, "null") == 0) {
      null_data = true;
    } else if (strncmp(m, "dev=", 4) == 0) {
      x->t.device.device_type = (DLDeviceType)atoi(m + 4);
      x->t.device.device_id = atoi(strchr(m, ':') + 1);
    } else if (strncmp(m, "off=", 4) == 0) {
      x->t.byte_offset = (uint64_t)atoll(m + 4);
    } else if (strncmp(m, "nd=", 3) == 0) {
      x->t.ndim = atoi(m + 3);
      for (int d = 0; d < x->t.ndim && d < 128; d++) x->shape[d] = 1;
    } else if (strcmp(m, "noshape") == 0) {
      x->t.shape = NULL;
    } else if (strcmp(m, "lowaddr") == 0) {
      low = true;
    }
  }
  /* Elements the view spans, when that is small enough to allocate. */
  int64_t span = 1;
  bool sane = x->t.ndim >= 0 && x->t.ndim <= 64;
  for (int d = 0; sane && d < x->t.ndim; d++) {
    int64_t size = x->shape[d], s = x->t.strides ? llabs(x->strides[d]) : 0;
    sane = size >= 0 && size < (1 << 16) && s < (1 << 16);
    if (!sane) break;
    if (x->t.strides)
      span += (size > 0 ? size - 1 : 0) * s;
    else
      span *= size > 0 ? size : 1;
  }
  if (null_data) return;
  if (low) {
    x->t.data = (void *)(uintptr_t)64;
    return;
  }
  if (!sane || span > (1 << 20)) {
    x->t.data = (void *)((uintptr_t)1 << 20); /* never dereferenced */
    return;
  }
  x->bytes = (size_t)span * 8 + x->t.byte_offset + 64;
  x->buf = malloc(x->bytes);
  for (size_t i = 0; i < x->bytes; i++)
    x->buf[i] = output ? 0xA5 : (unsigned char)(rand() & 0x3F);
  x->t.data = x->buf;
}

static bool sentinel_intact(const spec_tensor *x) {
  for (size_t i = 0; i < x->bytes; i++)
    if (x->buf[i] != 0xA5) return false;
  return true;
}

/* ----------------------------------------------- generated expressions */

/* Expressions too big to write in the table, named "@...". */
static char *generated_expr(const char *name) {
  size_t n;
  char *s;
  if (strcmp(name, "@spaces1M") == 0) { /* exactly the limit, all spaces */
    n = EIN_MAX_EXPR_BYTES;
    s = malloc(n + 1);
    memset(s, ' ', n);
    s[n] = 0;
  } else if (strcmp(name, "@over1M") == 0) { /* one byte past the limit */
    n = EIN_MAX_EXPR_BYTES + 1;
    s = malloc(n + 1);
    memset(s, 'a', n);
    memcpy(s, "a -> a ", 7);
    s[n] = 0;
  } else if (strcmp(name, "@nest10000") == 0) { /* ((((...a...)))) -> a */
    n = 10000;
    s = malloc(2 * n + 16);
    memset(s, '(', n);
    s[n] = 'a';
    memset(s + n + 1, ')', n);
    strcpy(s + 2 * n + 1, " -> a");
  } else if (strcmp(name, "@arrows5000") == 0) { /* a -> a -> a ... */
    s = malloc(5000 * 5 + 8);
    strcpy(s, "a");
    for (int i = 0; i < 5000; i++) strcat(s + strlen(s) - 1, " -> a");
  } else if (strcmp(name, "@longname64K") == 0) { /* x...x -> x...x y */
    n = 65536;
    s = malloc(2 * n + 16);
    memset(s, 'x', n);
    strcpy(s + n, " -> ");
    memset(s + n + 4, 'x', n);
    strcpy(s + 2 * n + 4, " y");
  } else if (strcmp(name, "@opsmax") == 0) { /* a, a, ... (max + 1) -> a */
    n = 3 * (size_t)(EIN_MAX_OPERANDS + 1) + 8;
    s = malloc(n);
    char *at = s;
    for (int i = 0; i < EIN_MAX_OPERANDS + 1; i++) {
      memcpy(at, i ? ", a" : "a", i ? 3 : 1);
      at += i ? 3 : 1;
    }
    strcpy(at, " -> a");
  } else if (strcmp(name, "@dims65") == 0) { /* 65 names in one operand */
    s = malloc(65 * 5 + 8);
    s[0] = 0;
    for (int i = 0; i < 65; i++) sprintf(s + strlen(s), "a%d ", i);
    strcat(s, "-> a0");
  } else if (strcmp(name, "@commas5000") == 0) { /* ,,,,, -> a */
    s = malloc(5000 + 8);
    memset(s, ',', 5000);
    strcpy(s + 5000, " -> a");
  } else {
    return NULL;
  }
  return s;
}

/* Inputs written "@copies65 f32:2": that many copies of one spec. */
static int parse_inputs(const char *text, spec_tensor *xs, int cap) {
  if (strncmp(text, "@copies", 7) == 0) {
    char *end;
    int n = (int)strtol(text + 7, &end, 10);
    for (int i = 0; i < n && i < cap; i++) parse_tensor(end + 1, &xs[i], false);
    return n;
  }
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", text);
  int n = 0;
  char *save;
  for (char *tok = strtok_r(buf, " ", &save); tok && n < cap;
       tok = strtok_r(NULL, " ", &save)) {
    if (strcmp(tok, "NULL") == 0) {
      memset(&xs[n], 0, sizeof xs[n]);
      xs[n++].t.ndim = -999; /* marks a NULL pointer */
      continue;
    }
    parse_tensor(tok, &xs[n++], false);
  }
  return n;
}

/* ----------------------------------------------------------- options */

/* The standard options of cases.h plus raw values no parser would make:
 * "backend=7", "reduction=99", "dialect=9", "lennull=2", "lenname=:3",
 * "mem=-2". */
static void parse_options(const char *text, case_input *in) {
  char std[256] = "", buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  int backend = 0, reduction = -1, dialect = -1, lennull = 0;
  int64_t mem = 0;
  bool noname = false;
  int64_t noname_size = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (strncmp(tok, "backend=", 8) == 0) backend = atoi(tok + 8);
    else if (strncmp(tok, "reduction=", 10) == 0) reduction = atoi(tok + 10);
    else if (strncmp(tok, "dialect=", 8) == 0) dialect = atoi(tok + 8);
    else if (strncmp(tok, "lennull=", 8) == 0) lennull = atoi(tok + 8);
    else if (strncmp(tok, "mem=", 4) == 0) mem = atoll(tok + 4);
    else if (strncmp(tok, "lenname=:", 9) == 0) {
      noname = true;
      noname_size = atoll(tok + 9);
    } else {
      size_t l = strlen(std);
      snprintf(std + l, sizeof std - l, "%s%s", l ? "," : "", tok);
    }
  }
  parse_case_opts(std, in);
  in->options.backend = (ein_backend_kind)backend;
  if (reduction >= 0) in->options.reduction = (ein_reduction)reduction;
  if (dialect >= 0) in->options.dialect = (ein_dialect)dialect;
  in->options.memory_limit = mem;
  if (lennull) {
    in->options.lengths = NULL;
    in->options.nlengths = lennull;
  }
  if (noname) {
    int k = in->options.nlengths++;
    in->lengths[k].name = NULL;
    in->lengths[k].size = noname_size;
  }
}

/* -------------------------------------------------------- eval entries */

typedef struct tensor_case {
  const char *expr;   /* text, or "@name" for a generated one */
  const char *inputs; /* tensor specs; "" none; "NULL" a NULL pointer */
  const char *output; /* a tensor spec, or "none" (NULL output) */
  const char *opts;
  ein_status status;
  const char *message; /* exact */
} tensor_case;

static const tensor_case tensor_cases[] = {
#include "bad_tensors.inc"
};

static void free_tensors(spec_tensor *xs, int n) {
  for (int i = 0; i < n; i++) free(xs[i].buf);
}

/* A good evaluation must still work after any failure. */
static void check_usable(ein_ctx *ctx, const char *after) {
  float a[6] = {1, 2, 3, 4, 5, 6}, o[2] = {0, 0};
  int64_t as[2] = {2, 3}, os[1] = {2};
  DLTensor x = {.data = a, .device = {kDLCPU, 0}, .ndim = 2,
                .dtype = {kDLFloat, 32, 1}, .shape = as};
  DLTensor y = {.data = o, .device = {kDLCPU, 0}, .ndim = 1,
                .dtype = {kDLFloat, 32, 1}, .shape = os};
  const DLTensor *xs[1] = {&x};
  ein_status st = ein_eval(ctx, "a b -> a", xs, 1, &y, NULL);
  CHECK(st == EIN_OK && o[0] == 6 && o[1] == 15,
        "context unusable after '%.60s': %s", after,
        ein_last_error(ctx)->message);
}

static void run_tensor_case(ein_ctx *ctx, const tensor_case *c) {
  static spec_tensor xs[80];
  spec_tensor out;
  char *gen = c->expr[0] == '@' ? generated_expr(c->expr) : NULL;
  const char *expr = gen ? gen : c->expr;
  int n = parse_inputs(c->inputs, xs, 80);
  const DLTensor *ptrs[80];
  for (int i = 0; i < n; i++) ptrs[i] = xs[i].t.ndim == -999 ? NULL : &xs[i].t;
  bool has_out = strcmp(c->output, "none") != 0;
  if (has_out) parse_tensor(c->output, &out, true);
  const char *alias = strstr(c->output, "/alias=");
  if (alias) { /* the output's data is input K's buffer */
    free(out.buf);
    out.buf = NULL;
    out.t.data = xs[atoi(alias + 7)].buf;
  }
  case_input in;
  parse_options(c->opts, &in);
  double t0 = now_s();
  ein_status st = ein_eval(ctx, expr, n ? ptrs : NULL, n,
                           has_out ? &out.t : NULL, &in.options);
  double took = now_s() - t0;
  const ein_error *e = ein_last_error(ctx);
  const char *shown = gen ? c->expr : expr;
  if (dump)
    printf("{\"%s\", \"%s\", \"%s\", \"%s\", %s,\n \"%s\"},\n", shown,
           c->inputs, c->output, c->opts, ein_status_name(st), e->message);
  CHECK(st == c->status, "'%.60s' %s -> %s: status %d (%s), want %d (%s)",
        shown, c->inputs, c->output, st, ein_status_name(st), c->status,
        ein_status_name(c->status));
  CHECK(e->status == st, "'%.60s': recorded status %d", shown, e->status);
  CHECK_STR(e->message, c->message, "'%.60s' %s -> %s", shown, c->inputs,
            c->output);
  CHECK(st == EIN_OK || !has_out || !out.buf || sentinel_intact(&out),
        "'%.60s': the output was written by a failing call", shown);
  CHECK(took < ENTRY_SECONDS, "'%.60s' took %.2f s", shown, took);
  if (has_out) free(out.buf);
  free_tensors(xs, n);
  free(gen);
  check_usable(ctx, shown);
}

/* The catalogue of test_errors, evaluated: the same status and message,
 * and an untouched output. */
static const err_case expr_cases[] = {
#include "error_cases.inc"
};

static void run_expr_case(ein_ctx *ctx, const err_case *c) {
  case_input in;
  parse_case_shapes(c->shapes, &in);
  parse_case_opts(c->opts, &in);
  spec_tensor xs[TEST_MAX_OPERANDS], out;
  const DLTensor *ptrs[TEST_MAX_OPERANDS];
  for (int i = 0; i < in.n; i++) {
    char spec[256] = "f32:scalar";
    for (int d = 0, w = 4; d < in.ndims[i]; d++)
      w += snprintf(spec + w, sizeof spec - (size_t)w, "%s%lld", d ? "x" : "",
                    (long long)in.dims[i][d]);
    parse_tensor(spec, &xs[i], false);
    ptrs[i] = &xs[i].t;
  }
  parse_tensor("f32:1", &out, true);
  ein_status st = ein_eval(ctx, c->expr, in.n ? ptrs : NULL, in.n, &out.t,
                           &in.options);
  const ein_error *e = ein_last_error(ctx);
  /* A negative or overflowing shape is caught by the tensor checks before
   * binding, with the tensor's own message; the status is the same. */
  bool tensor_level = strstr(c->message, "tensor ") != NULL;
  CHECK(st == c->status, "eval '%s' %s: status %d (%s), want %d", c->expr,
        c->shapes, st, ein_status_name(st), c->status);
  if (!tensor_level)
    CHECK_STR(e->message, c->message, "eval '%s' %s", c->expr, c->shapes);
  CHECK(sentinel_intact(&out), "eval '%s': output written", c->expr);
  free(out.buf);
  free_tensors(xs, in.n);
}

/* ------------------------------------------------------------- .npy */

typedef struct npy_case {
  const char *name;
  const char *bytes; /* the file, C escapes; see make_npy for "@" forms */
  int len;           /* -1: strlen */
  const char *message;
} npy_case;

static const npy_case npy_cases[] = {
#include "bad_npy.inc"
};

/* Files too long to write inline: "@hdr:<dict>:<data bytes>" makes a
 * version 1 file around the dict (padded to 64 bytes, as numpy does) with
 * that many data bytes; "@v2big" a version 2 header claiming 2 MiB. */
static unsigned char *make_npy(const npy_case *c, size_t *len) {
  if (strncmp(c->bytes, "@hdr:", 5) == 0) {
    const char *dict = c->bytes + 5;
    const char *sep = strrchr(dict, ':');
    size_t dlen = (size_t)(sep - dict);
    size_t data = (size_t)atol(sep + 1);
    size_t hlen = dlen + 1;
    while ((10 + hlen) % 64) hlen++;
    unsigned char *f = malloc(10 + hlen + data + 1);
    memcpy(f, "\x93NUMPY\x01\x00", 8);
    f[8] = (unsigned char)(hlen & 0xFF);
    f[9] = (unsigned char)(hlen >> 8);
    memcpy(f + 10, dict, dlen);
    memset(f + 10 + dlen, ' ', hlen - dlen - 1);
    f[10 + hlen - 1] = '\n';
    for (size_t i = 0; i < data; i++) f[10 + hlen + i] = (unsigned char)i;
    *len = 10 + hlen + data;
    return f;
  }
  if (strcmp(c->bytes, "@v2big") == 0) {
    unsigned char *f = malloc(64);
    memcpy(f, "\x93NUMPY\x02\x00\x00\x00\x20\x00", 12); /* 2 MiB */
    memset(f + 12, ' ', 52);
    *len = 64;
    return f;
  }
  *len = c->len < 0 ? strlen(c->bytes) : (size_t)c->len;
  unsigned char *f = malloc(*len + 1);
  memcpy(f, c->bytes, *len);
  return f;
}

static void run_npy_case(const npy_case *c) {
  size_t len;
  unsigned char *bytes = make_npy(c, &len);
  FILE *f = fmemopen(bytes, len ? len : 1, "rb");
  if (len == 0) fgetc(f); /* fmemopen needs a size; read past the byte */
  npy_array a;
  char msg[512] = "";
  bool ok = npy_read_stream(f, c->name, &a, msg, sizeof msg);
  fclose(f);
  if (dump) printf("{\"%s\", ..., \"%s\"},\n", c->name, msg);
  CHECK(!ok, "%s: read as valid", c->name);
  CHECK(a.data == NULL, "%s: a failed read still owns data", c->name);
  CHECK_STR(msg, c->message, "%s", c->name);
  if (ok) npy_free(&a);
  free(bytes);
}

int main(void) {
  dump = getenv("EIN_DUMP") != NULL;
  setvbuf(stdout, NULL, _IONBF, 0);
  srand(7);
  ein_ctx *ctx;
  if (ein_ctx_create(&ctx) != EIN_OK) return 1;
  size_t ne = sizeof expr_cases / sizeof *expr_cases;
  size_t nt = sizeof tensor_cases / sizeof *tensor_cases;
  size_t nn = sizeof npy_cases / sizeof *npy_cases;
  for (size_t i = 0; i < ne; i++) run_expr_case(ctx, &expr_cases[i]);
  for (size_t i = 0; i < nt; i++) run_tensor_case(ctx, &tensor_cases[i]);
  for (size_t i = 0; i < nn; i++) run_npy_case(&npy_cases[i]);
  check_usable(ctx, "the whole catalogue");
  printf("catalogue: %zu expression entries, %zu tensor and option entries, "
         "%zu .npy entries: %zu in all\n",
         ne, nt, nn, ne + nt + nn);
  CHECK(ne + nt + nn >= 150, "the catalogue has %zu entries", ne + nt + nn);
  ein_ctx_destroy(ctx);
  return test_summary("bad_inputs");
}
