/*
 * xla_ffi_abi_check.c - einc's declaration of XLA's FFI ABI
 * (python/src/xla_ffi_abi.h) against the header jaxlib ships: every
 * field einc declares at the offset and size XLA's has, every enum value
 * equal. Compiled (never run: the checks are static assertions) by
 * tests/python/test_jax_export.py with both headers on the include path.
 */
#include <xla/ffi/api/c_api.h>

#include "xla_ffi_abi.h"

#define SAME_VALUE(ours, theirs) \
  _Static_assert((long)(ours) == (long)(theirs), #ours " != " #theirs)
#define SAME_FIELD(ours, theirs, of, tf)                                    \
  _Static_assert(offsetof(ours, of) == offsetof(theirs, tf) &&             \
                     sizeof(((ours *)0)->of) == sizeof(((theirs *)0)->tf), \
                 #ours "." #of " is not " #theirs "." #tf)
#define SAME_SIZE(ours, theirs) \
  _Static_assert(sizeof(ours) == sizeof(theirs), #ours " != " #theirs)

SAME_VALUE(XFFI_VERSION_MAJOR, XLA_FFI_API_MAJOR);
_Static_assert(XFFI_VERSION_MINOR <= XLA_FFI_API_MINOR, "a newer minor");
SAME_VALUE(XFFI_EXTENSION_METADATA, XLA_FFI_Extension_Metadata);
SAME_VALUE(XFFI_ERR_INVALID_ARGUMENT, XLA_FFI_Error_Code_INVALID_ARGUMENT);
SAME_VALUE(XFFI_ERR_RESOURCE_EXHAUSTED,
           XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
SAME_VALUE(XFFI_ERR_UNIMPLEMENTED, XLA_FFI_Error_Code_UNIMPLEMENTED);
SAME_VALUE(XFFI_PRED, XLA_FFI_DataType_PRED);
SAME_VALUE(XFFI_S8, XLA_FFI_DataType_S8);
SAME_VALUE(XFFI_S16, XLA_FFI_DataType_S16);
SAME_VALUE(XFFI_S32, XLA_FFI_DataType_S32);
SAME_VALUE(XFFI_S64, XLA_FFI_DataType_S64);
SAME_VALUE(XFFI_U8, XLA_FFI_DataType_U8);
SAME_VALUE(XFFI_U16, XLA_FFI_DataType_U16);
SAME_VALUE(XFFI_U32, XLA_FFI_DataType_U32);
SAME_VALUE(XFFI_U64, XLA_FFI_DataType_U64);
SAME_VALUE(XFFI_F16, XLA_FFI_DataType_F16);
SAME_VALUE(XFFI_F32, XLA_FFI_DataType_F32);
SAME_VALUE(XFFI_F64, XLA_FFI_DataType_F64);
SAME_VALUE(XFFI_C64, XLA_FFI_DataType_C64);
SAME_VALUE(XFFI_BF16, XLA_FFI_DataType_BF16);
SAME_VALUE(XFFI_C128, XLA_FFI_DataType_C128);
SAME_VALUE(XFFI_ATTR_ARRAY, XLA_FFI_AttrType_ARRAY);
SAME_VALUE(XFFI_ATTR_DICTIONARY, XLA_FFI_AttrType_DICTIONARY);
SAME_VALUE(XFFI_ATTR_SCALAR, XLA_FFI_AttrType_SCALAR);
SAME_VALUE(XFFI_ATTR_STRING, XLA_FFI_AttrType_STRING);
SAME_VALUE(XFFI_STAGE_EXECUTE, XLA_FFI_ExecutionStage_EXECUTE);
SAME_SIZE(xffi_dtype, XLA_FFI_DataType);
SAME_SIZE(xffi_attr_type, XLA_FFI_AttrType);
SAME_SIZE(xffi_stage, XLA_FFI_ExecutionStage);
SAME_SIZE(xffi_error_code, XLA_FFI_Error_Code);
SAME_SIZE(int, XLA_FFI_ArgType);
SAME_SIZE(int, XLA_FFI_RetType);

SAME_FIELD(xffi_extension, XLA_FFI_Extension_Base, struct_size, struct_size);
SAME_FIELD(xffi_extension, XLA_FFI_Extension_Base, type, type);
SAME_FIELD(xffi_extension, XLA_FFI_Extension_Base, next, next);
SAME_FIELD(xffi_version, struct XLA_FFI_Api_Version, struct_size,
           struct_size);
SAME_FIELD(xffi_version, struct XLA_FFI_Api_Version, major_version,
           major_version);
SAME_FIELD(xffi_version, struct XLA_FFI_Api_Version, minor_version,
           minor_version);
SAME_FIELD(xffi_error_create_args, XLA_FFI_Error_Create_Args, message,
           message);
SAME_FIELD(xffi_error_create_args, XLA_FFI_Error_Create_Args, errc, errc);
SAME_FIELD(xffi_buffer, XLA_FFI_Buffer, dtype, dtype);
SAME_FIELD(xffi_buffer, XLA_FFI_Buffer, data, data);
SAME_FIELD(xffi_buffer, XLA_FFI_Buffer, rank, rank);
SAME_FIELD(xffi_buffer, XLA_FFI_Buffer, dims, dims);
SAME_FIELD(xffi_bytes, XLA_FFI_ByteSpan, ptr, ptr);
SAME_FIELD(xffi_bytes, XLA_FFI_ByteSpan, len, len);
SAME_FIELD(xffi_scalar, XLA_FFI_Scalar, dtype, dtype);
SAME_FIELD(xffi_scalar, XLA_FFI_Scalar, value, value);
SAME_FIELD(xffi_array, XLA_FFI_Array, dtype, dtype);
SAME_FIELD(xffi_array, XLA_FFI_Array, size, size);
SAME_FIELD(xffi_array, XLA_FFI_Array, data, data);
SAME_FIELD(xffi_args, XLA_FFI_Args, size, size);
SAME_FIELD(xffi_args, XLA_FFI_Args, types, types);
SAME_FIELD(xffi_args, XLA_FFI_Args, args, args);
SAME_FIELD(xffi_rets, XLA_FFI_Rets, size, size);
SAME_FIELD(xffi_rets, XLA_FFI_Rets, types, types);
SAME_FIELD(xffi_rets, XLA_FFI_Rets, rets, rets);
SAME_FIELD(xffi_attrs, XLA_FFI_Attrs, size, size);
SAME_FIELD(xffi_attrs, XLA_FFI_Attrs, types, types);
SAME_FIELD(xffi_attrs, XLA_FFI_Attrs, names, names);
SAME_FIELD(xffi_attrs, XLA_FFI_Attrs, attrs, attrs);
SAME_FIELD(xffi_call_frame, XLA_FFI_CallFrame, extension_start,
           extension_start);
SAME_FIELD(xffi_call_frame, XLA_FFI_CallFrame, api, api);
SAME_FIELD(xffi_call_frame, XLA_FFI_CallFrame, ctx, ctx);
SAME_FIELD(xffi_call_frame, XLA_FFI_CallFrame, stage, stage);
SAME_FIELD(xffi_call_frame, XLA_FFI_CallFrame, args, args);
SAME_FIELD(xffi_call_frame, XLA_FFI_CallFrame, rets, rets);
SAME_FIELD(xffi_call_frame, XLA_FFI_CallFrame, attrs, attrs);
SAME_FIELD(xffi_stream_get_args, XLA_FFI_Stream_Get_Args, ctx, ctx);
SAME_FIELD(xffi_stream_get_args, XLA_FFI_Stream_Get_Args, stream, stream);
SAME_FIELD(xffi_device_ordinal_args, XLA_FFI_DeviceOrdinal_Get_Args, ctx,
           ctx);
SAME_FIELD(xffi_device_ordinal_args, XLA_FFI_DeviceOrdinal_Get_Args,
           device_ordinal, device_ordinal);
SAME_FIELD(xffi_metadata, XLA_FFI_Metadata, api_version, api_version);
SAME_FIELD(xffi_metadata, XLA_FFI_Metadata, traits, traits);
SAME_FIELD(xffi_metadata, XLA_FFI_Metadata, state_type_id, state_type_id);
SAME_FIELD(xffi_metadata_extension, XLA_FFI_Metadata_Extension,
           extension_base, extension_base);
SAME_FIELD(xffi_metadata_extension, XLA_FFI_Metadata_Extension, metadata,
           metadata);
SAME_FIELD(xffi_api, XLA_FFI_Api, struct_size, struct_size);
SAME_FIELD(xffi_api, XLA_FFI_Api, api_version, api_version);
SAME_FIELD(xffi_api, XLA_FFI_Api, error_create, XLA_FFI_Error_Create);
SAME_FIELD(xffi_api, XLA_FFI_Api, stream_get, XLA_FFI_Stream_Get);
SAME_FIELD(xffi_api, XLA_FFI_Api, device_ordinal_get,
           XLA_FFI_DeviceOrdinal_Get);
