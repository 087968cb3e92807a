/*
 * xla_ffi.c - einc's XLA FFI handlers (see xla_ffi.h): an XLA call frame
 * in, ein_eval on its buffers, an XLA error out when einc fails.
 *
 * Written against XLA's stable FFI C ABI as einc declares it
 * (xla_ffi_abi.h: always built, no jaxlib needed). The handlers are registered
 * for the execute stage only and are stateless: ein_eval's plan cache
 * already keeps one plan per expression and layout, so a jitted call
 * after the first is a cache hit.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ein.h>

#include "xla_ffi.h"
#include "xla_ffi_abi.h"

/* What a call's attributes ask for (xla_ffi.h lists them). */
typedef struct einxla_call {
  char *text;            /* owned: the expression, then the length names */
  const char *expr;      /* into text */
  ein_options opt;
  ein_length *lengths;   /* owned: one per size attribute */
} einxla_call;

static xffi_error *fail(const xffi_api *api, xffi_error_code code,
                           const char *fmt, ...) {
  char message[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  xffi_error_create_args args = {0};
  args.struct_size = XFFI_SIZE_UPTO(xffi_error_create_args, errc);
  args.message = message; /* XLA copies it */
  args.errc = code;
  return api->error_create(&args);
}

/* XLA asks a handler, once at registration, which FFI version it was
 * built for and what it promises (nothing: einc may allocate or
 * synchronise, so no command-buffer capture). */
static xffi_error *describe(xffi_call_frame *frame) {
  xffi_metadata_extension *ext =
      (xffi_metadata_extension *)frame->extension_start;
  xffi_metadata *meta = ext->metadata;
  meta->api_version.struct_size = XFFI_SIZE_UPTO(xffi_version, minor_version);
  meta->api_version.extension_start = NULL;
  meta->api_version.major_version = XFFI_VERSION_MAJOR;
  meta->api_version.minor_version = XFFI_VERSION_MINOR;
  meta->traits = 0;
  meta->state_type_id = 0; /* stateless */
  return NULL;
}

static int attr_is(const xffi_bytes *name, const char *want) {
  size_t n = strlen(want);
  return name->len == n && memcmp(name->ptr, want, n) == 0;
}

/* An integer scalar attribute's value, whatever integer type it came as. */
static int scalar_int(const xffi_scalar *s, int64_t *out) {
  switch (s->dtype) {
    case XFFI_PRED: *out = *(const uint8_t *)s->value; return 0;
    case XFFI_S8: *out = *(const int8_t *)s->value; return 0;
    case XFFI_S16: *out = *(const int16_t *)s->value; return 0;
    case XFFI_S32: *out = *(const int32_t *)s->value; return 0;
    case XFFI_S64: *out = *(const int64_t *)s->value; return 0;
    case XFFI_U8: *out = *(const uint8_t *)s->value; return 0;
    case XFFI_U32: *out = *(const uint32_t *)s->value; return 0;
    default: return -1;
  }
}

/* The attributes XLA passes (sorted by name; looked up one by one). */
typedef struct einxla_attrs {
  const xffi_bytes *expr, *reduction, *names;
  const xffi_array *sizes;
  int64_t numpy;
} einxla_attrs;

static const char *collect_attrs(const xffi_attrs *attrs, einxla_attrs *a) {
  memset(a, 0, sizeof *a);
  for (int64_t i = 0; i < attrs->size; i++) {
    const xffi_bytes *name = attrs->names[i];
    xffi_attr_type type = attrs->types[i];
    void *value = attrs->attrs[i];
    int string = type == XFFI_ATTR_STRING;
    if (attr_is(name, "expr") && string) a->expr = value;
    else if (attr_is(name, "reduction") && string) a->reduction = value;
    else if (attr_is(name, "length_names") && string) a->names = value;
    else if (attr_is(name, "length_sizes") && type == XFFI_ATTR_ARRAY)
      a->sizes = value;
    else if (attr_is(name, "numpy") && type == XFFI_ATTR_SCALAR) {
      if (scalar_int(value, &a->numpy) < 0) return "numpy is not an integer";
    } else
      return "an attribute einc does not know, or of the wrong type";
  }
  if (!a->expr) return "no expr attribute";
  if (a->sizes && a->sizes->dtype != XFFI_S64)
    return "length_sizes is not an int64 array";
  return NULL;
}

/* Splits the space-separated names into call->lengths; NULL or the
 * reason they do not match the sizes. */
static const char *split_lengths(char *names, const einxla_attrs *a,
                                 einxla_call *call) {
  size_t want = a->sizes ? a->sizes->size : 0;
  const int64_t *sizes = a->sizes ? a->sizes->data : NULL;
  size_t n = 0;
  call->lengths = calloc(want + 1, sizeof *call->lengths);
  if (!call->lengths) return "out of memory for the lengths";
  char *save = NULL; /* strtok_r: XLA calls from several threads */
  for (char *tok = strtok_r(names, " ", &save); tok;
       tok = strtok_r(NULL, " ", &save)) {
    if (n >= want) return "more length names than sizes";
    call->lengths[n].name = tok;
    call->lengths[n].size = sizes[n];
    n++;
  }
  if (n != want) return "fewer length names than sizes";
  call->opt.lengths = call->lengths;
  call->opt.nlengths = (int)n;
  return NULL;
}

/* The call's options and NUL-terminated texts, from its attributes. */
static const char *read_call(const xffi_attrs *attrs, einxla_call *call) {
  einxla_attrs a;
  const char *why = collect_attrs(attrs, &a);
  if (why) return why;
  size_t elen = a.expr->len, nlen = a.names ? a.names->len : 0;
  call->text = malloc(elen + nlen + 2);
  if (!call->text) return "out of host memory";
  memcpy(call->text, a.expr->ptr, elen);
  call->text[elen] = '\0';
  call->expr = call->text;
  char *names = call->text + elen + 1;
  if (nlen) memcpy(names, a.names->ptr, nlen);
  names[nlen] = '\0';
  call->opt.dialect = a.numpy ? EIN_DIALECT_NUMPY : EIN_DIALECT_EINOPS;
  if (a.reduction) {
    char reduction[16] = {0};
    if (a.reduction->len >= sizeof reduction) return "unknown reduction";
    memcpy(reduction, a.reduction->ptr, a.reduction->len);
    if (ein_reduction_parse(reduction, &call->opt.reduction) != EIN_OK)
      return "unknown reduction";
  }
  return split_lengths(names, &a, call);
}

/* DLPack's kDLBool, which older dlpack.h (Debian's) lacks by name. */
enum { EINXLA_DL_BOOL = 6 };

static int dl_dtype(xffi_dtype t, DLDataType *out) {
  static const struct {
    xffi_dtype xla;
    uint8_t code, bits;
  } table[] = {
      {XFFI_F16, kDLFloat, 16},  {XFFI_F32, kDLFloat, 32},
      {XFFI_F64, kDLFloat, 64},  {XFFI_BF16, kDLBfloat, 16},
      {XFFI_C64, kDLComplex, 64}, {XFFI_C128, kDLComplex, 128},
      {XFFI_S8, kDLInt, 8},      {XFFI_S16, kDLInt, 16},
      {XFFI_S32, kDLInt, 32},    {XFFI_S64, kDLInt, 64},
      {XFFI_U8, kDLUInt, 8},     {XFFI_U16, kDLUInt, 16},
      {XFFI_U32, kDLUInt, 32},   {XFFI_U64, kDLUInt, 64},
      {XFFI_PRED, EINXLA_DL_BOOL, 8},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (table[i].xla == t) {
      *out = (DLDataType){table[i].code, table[i].bits, 1};
      return 0;
    }
  return -1;
}

/* A C-contiguous DLTensor over an XLA buffer (XLA's default layout, which
 * jax.ffi.ffi_call asks for). */
static int wrap_buffer(const xffi_buffer *b, DLDevice device,
                       DLTensor *out) {
  memset(out, 0, sizeof *out);
  if (b->rank > EIN_MAX_DIMS || dl_dtype(b->dtype, &out->dtype) < 0) return -1;
  out->data = b->data;
  out->device = device;
  out->ndim = (int32_t)b->rank;
  out->shape = b->dims;
  return 0;
}

static int64_t elements(const DLTensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* Runs one evaluation on ctx; the stream (CUDA) is set for the call. */
typedef ein_status (*einxla_runner)(const char *expr, const DLTensor *const *in,
                                    int nin, DLTensor *out,
                                    const ein_options *opt, void *stream,
                                    char *message, size_t cap);

/* The frame's buffers as DLTensors, run by `run`, any failure as an XLA
 * error. */
static xffi_error *evaluate(xffi_call_frame *frame, DLDevice device,
                               ein_backend_kind backend, void *stream,
                               einxla_runner run) {
  const xffi_api *api = frame->api;
  if (frame->args.size > EIN_MAX_OPERANDS || frame->rets.size != 1)
    return fail(api, XFFI_ERR_INVALID_ARGUMENT,
                "einc: %lld operands and %lld results (at most %d and 1)",
                (long long)frame->args.size, (long long)frame->rets.size,
                EIN_MAX_OPERANDS);
  int nin = (int)frame->args.size;
  DLTensor out;
  if (wrap_buffer(frame->rets.rets[0], device, &out) < 0)
    return fail(api, XFFI_ERR_INVALID_ARGUMENT,
                "einc: the result has a dtype or rank einc cannot take");
  if (elements(&out) == 0) return NULL; /* nothing to write */
  /* On the heap: XLA's threads may have small stacks, and an expression
   * thousands of operands. */
  DLTensor *in = calloc((size_t)nin + 1, sizeof *in);
  const DLTensor **ins = calloc((size_t)nin + 1, sizeof *ins);
  xffi_error *err = NULL;
  if (!in || !ins)
    err = fail(api, XFFI_ERR_RESOURCE_EXHAUSTED,
               "einc: out of memory for %d operands", nin);
  for (int i = 0; i < nin && !err; i++) {
    if (wrap_buffer(frame->args.args[i], device, &in[i]) < 0)
      err = fail(api, XFFI_ERR_INVALID_ARGUMENT,
                 "einc: operand %d has a dtype or rank einc cannot take", i);
    ins[i] = &in[i];
  }
  if (err) {
    free(in);
    free((void *)ins);
    return err;
  }
  einxla_call call = {0};
  const char *why = read_call(&frame->attrs, &call);
  if (why) {
    err = fail(api, XFFI_ERR_INVALID_ARGUMENT,
               "einc: bad FFI attributes: %s", why);
  } else {
    char message[4096];
    call.opt.backend = backend;
    if (run(call.expr, ins, nin, &out, &call.opt, stream, message,
            sizeof message) != EIN_OK)
      err = fail(api, XFFI_ERR_INVALID_ARGUMENT, "einc: %s",
                 message);
  }
  free(call.text);
  free(call.lengths);
  free(in);
  free((void *)ins);
  return err;
}

/* The contexts: created on first use and kept for the process (an XLA
 * executable may run until the very end). CUDA calls take turns on
 * theirs, because the stream is set on a context. */
static ein_ctx *cpu_ctx, *cuda_ctx;
static pthread_once_t contexts_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;

static void contexts_create(void) {
  if (ein_ctx_create(&cpu_ctx) != EIN_OK) cpu_ctx = NULL;
  if (ein_ctx_create(&cuda_ctx) != EIN_OK) cuda_ctx = NULL;
}

static ein_status eval_on(ein_ctx *ctx, const char *expr,
                          const DLTensor *const *in, int nin, DLTensor *out,
                          const ein_options *opt, char *message, size_t cap) {
  if (!ctx) {
    snprintf(message, cap, "no einc context (out of host memory)");
    return EIN_ERR_NO_MEMORY;
  }
  ein_status st = ein_eval(ctx, expr, in, nin, out, opt);
  if (st != EIN_OK) {
    ein_error_format(ein_last_error(ctx), message, cap);
    if (strncmp(message, "error: ", 7) == 0)
      memmove(message, message + 7, strlen(message + 7) + 1);
  }
  return st;
}

static ein_status run_cpu(const char *expr, const DLTensor *const *in, int nin,
                          DLTensor *out, const ein_options *opt, void *stream,
                          char *message, size_t cap) {
  (void)stream;
  pthread_once(&contexts_once, contexts_create);
  return eval_on(cpu_ctx, expr, in, nin, out, opt, message, cap);
}

static ein_status run_cuda(const char *expr, const DLTensor *const *in,
                           int nin, DLTensor *out, const ein_options *opt,
                           void *stream, char *message, size_t cap) {
  pthread_once(&contexts_once, contexts_create);
  pthread_mutex_lock(&cuda_lock);
  ein_ctx_set_cuda_stream(cuda_ctx, stream);
  ein_status st = eval_on(cuda_ctx, expr, in, nin, out, opt, message, cap);
  ein_ctx_set_cuda_stream(cuda_ctx, NULL);
  pthread_mutex_unlock(&cuda_lock);
  return st;
}

static int is_metadata_query(const xffi_call_frame *frame) {
  return frame->extension_start &&
         frame->extension_start->type == XFFI_EXTENSION_METADATA;
}

static xffi_error *einxla_cpu(xffi_call_frame *frame) {
  if (is_metadata_query(frame)) return describe(frame);
  if (frame->stage != XFFI_STAGE_EXECUTE) return NULL;
  DLDevice host = {kDLCPU, 0};
  return evaluate(frame, host, EIN_BACKEND_CPU, NULL, run_cpu);
}

/* XLA's stream for this call, and the GPU it runs on. */
static xffi_error *cuda_place(xffi_call_frame *frame, void **stream,
                                 DLDevice *device) {
  const xffi_api *api = frame->api;
  if (api->struct_size < XFFI_SIZE_UPTO(xffi_api, device_ordinal_get))
    return fail(api, XFFI_ERR_UNIMPLEMENTED,
                "einc: this XLA's FFI has no device ordinal query");
  xffi_stream_get_args s = {0};
  s.struct_size = XFFI_SIZE_UPTO(xffi_stream_get_args, stream);
  s.ctx = frame->ctx;
  xffi_error *err = api->stream_get(&s);
  if (err) return err;
  xffi_device_ordinal_args d = {0};
  d.struct_size = XFFI_SIZE_UPTO(xffi_device_ordinal_args, device_ordinal);
  d.ctx = frame->ctx;
  err = api->device_ordinal_get(&d);
  if (err) return err;
  *stream = s.stream;
  *device = (DLDevice){kDLCUDA, d.device_ordinal};
  return NULL;
}

static xffi_error *einxla_cuda(xffi_call_frame *frame) {
  if (is_metadata_query(frame)) return describe(frame);
  if (frame->stage != XFFI_STAGE_EXECUTE) return NULL;
  void *stream = NULL; /* (gcc -O2 cannot see cuda_place set it) */
  DLDevice device;
  xffi_error *err = cuda_place(frame, &stream, &device);
  if (err) return err;
  return evaluate(frame, device, EIN_BACKEND_CUDA, stream, run_cuda);
}

/* A function pointer as the void * a capsule holds (C has no cast
 * between the two; their sizes match on every platform XLA runs on). */
static void *as_pointer(xffi_handler *handler) {
  void *p;
  _Static_assert(sizeof p == sizeof handler, "function pointers fit void *");
  memcpy(&p, &handler, sizeof p);
  return p;
}

void *einxla_handler_cpu(void) { return as_pointer(einxla_cpu); }
void *einxla_handler_cuda(void) { return as_pointer(einxla_cuda); }
