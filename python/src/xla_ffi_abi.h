/*
 * xla_ffi_abi.h - the part of XLA's FFI C ABI that einc's handlers use,
 * declared here so that every build has them (issue 38: a plain
 * `pip install .`, whose isolated build has no jaxlib, gives JAX
 * support with no option).
 *
 * XLA promises this ABI stable within a major version: every struct
 * that may grow starts with its size, new fields go at the end, and a
 * handler reports the version it was written for (xffi_version below).
 * These declarations are einc's own, written from that contract; they
 * are checked field by field (offsets, sizes, enum values) against the
 * header jaxlib ships by tests/python/xla_ffi_abi_check.c whenever both
 * are present (tests/python/test_jax_export.py). Only what einc reads or
 * writes is named; the API table's other entries are opaque pointers.
 *
 * Takes nothing and owns nothing: declarations only.
 */
#ifndef EINPY_XLA_FFI_ABI_H
#define EINPY_XLA_FFI_ABI_H

#include <stddef.h>
#include <stdint.h>

/* The FFI version einc's handlers are written for: major 0 (XLA refuses
 * another major), minor 1, the oldest whose call frame and API table
 * hold everything used here (newer XLA accepts an older minor; entries
 * past an older table's end are checked with its struct_size). */
enum { XFFI_VERSION_MAJOR = 0, XFFI_VERSION_MINOR = 1 };

/* The size of a struct up to and including `field`, as XLA counts it. */
#define XFFI_SIZE_UPTO(type, field) \
  (offsetof(type, field) + sizeof(((type *)0)->field))

typedef struct xffi_error xffi_error;           /* XLA's, opaque */
typedef struct xffi_exec_ctx xffi_exec_ctx;     /* XLA's, opaque */
typedef struct xffi_api xffi_api;

typedef enum { XFFI_EXTENSION_METADATA = 1 } xffi_extension_type;

typedef struct xffi_extension {
  size_t struct_size;
  xffi_extension_type type;
  struct xffi_extension *next;
} xffi_extension;

typedef struct xffi_version {
  size_t struct_size;
  xffi_extension *extension_start;
  int major_version;
  int minor_version;
} xffi_version;

typedef enum {
  XFFI_ERR_INVALID_ARGUMENT = 3,
  XFFI_ERR_RESOURCE_EXHAUSTED = 8,
  XFFI_ERR_UNIMPLEMENTED = 12,
} xffi_error_code;

typedef struct xffi_error_create_args {
  size_t struct_size;
  xffi_extension *extension_start;
  const char *message;
  xffi_error_code errc;
} xffi_error_create_args;

/* The element types einc takes (XLA's PrimitiveType numbers). */
typedef enum {
  XFFI_PRED = 1, XFFI_S8 = 2, XFFI_S16 = 3, XFFI_S32 = 4, XFFI_S64 = 5,
  XFFI_U8 = 6, XFFI_U16 = 7, XFFI_U32 = 8, XFFI_U64 = 9, XFFI_F16 = 10,
  XFFI_F32 = 11, XFFI_F64 = 12, XFFI_C64 = 15, XFFI_BF16 = 16,
  XFFI_C128 = 18,
} xffi_dtype;

typedef struct xffi_buffer {
  size_t struct_size;
  xffi_extension *extension_start;
  xffi_dtype dtype;
  void *data;
  int64_t rank;
  int64_t *dims;
} xffi_buffer;

typedef enum {
  XFFI_ATTR_ARRAY = 1,
  XFFI_ATTR_DICTIONARY = 2,
  XFFI_ATTR_SCALAR = 3,
  XFFI_ATTR_STRING = 4,
} xffi_attr_type;

typedef struct xffi_bytes {
  const char *ptr;
  size_t len;
} xffi_bytes;

typedef struct xffi_scalar {
  xffi_dtype dtype;
  void *value;
} xffi_scalar;

typedef struct xffi_array {
  xffi_dtype dtype;
  size_t size;
  void *data;
} xffi_array;

typedef enum { XFFI_STAGE_EXECUTE = 3 } xffi_stage;

typedef struct xffi_args {       /* the operands */
  size_t struct_size;
  xffi_extension *extension_start;
  int64_t size;
  int *types;                    /* 1: a buffer (the only kind einc gets) */
  void **args;                   /* xffi_buffer * each */
} xffi_args;

typedef struct xffi_rets {       /* the results, laid out as the operands */
  size_t struct_size;
  xffi_extension *extension_start;
  int64_t size;
  int *types;
  void **rets;
} xffi_rets;

typedef struct xffi_attrs {
  size_t struct_size;
  xffi_extension *extension_start;
  int64_t size;
  xffi_attr_type *types;
  xffi_bytes **names;
  void **attrs;
} xffi_attrs;

typedef struct xffi_call_frame {
  size_t struct_size;
  xffi_extension *extension_start;
  const xffi_api *api;
  xffi_exec_ctx *ctx;
  xffi_stage stage;
  xffi_args args;
  xffi_rets rets;
  xffi_attrs attrs;
  void *future;
} xffi_call_frame;

typedef xffi_error *xffi_handler(xffi_call_frame *frame);

typedef struct xffi_stream_get_args {
  size_t struct_size;
  xffi_extension *extension_start;
  xffi_exec_ctx *ctx;
  void *stream;
} xffi_stream_get_args;

typedef struct xffi_device_ordinal_args {
  size_t struct_size;
  xffi_extension *extension_start;
  xffi_exec_ctx *ctx;
  int32_t device_ordinal;
} xffi_device_ordinal_args;

typedef struct xffi_metadata {
  size_t struct_size;
  xffi_version api_version;
  uint32_t traits;
  int64_t state_type_id;
} xffi_metadata;

typedef struct xffi_metadata_extension {
  xffi_extension extension_base;
  xffi_metadata *metadata;
} xffi_metadata_extension;

/* XLA's function table, as each call frame carries it. */
struct xffi_api {
  size_t struct_size;
  xffi_extension *extension_start;
  xffi_version api_version;
  const void *internal_api;
  xffi_error *(*error_create)(xffi_error_create_args *args);
  void *error_get_message, *error_destroy, *handler_register;
  xffi_error *(*stream_get)(xffi_stream_get_args *args);
  void *type_register, *execution_context_get, *state_set, *state_get;
  void *device_memory_allocate, *device_memory_free;
  void *thread_pool_schedule, *thread_pool_num_threads;
  void *future_create, *future_set_available, *future_set_error;
  void *run_id_get;
  xffi_error *(*device_ordinal_get)(xffi_device_ordinal_args *args);
};

#endif /* EINPY_XLA_FFI_ABI_H */
