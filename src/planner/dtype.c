/* dtype.c - element types: DLPack mapping, names, sizes. */
#include "dtype.h"

#include <string.h>

#include "ein.h" /* the fp8 codes, spelled out as kDLBool is below */

/* kDLBool (6) arrived in DLPack 0.8; older headers (Debian's 0.6) lack the
 * name, so einc spells the code out. */
enum { EIN_DL_BOOL = 6 };

static const struct {
  const char *name, *alias;
  uint8_t code, bits;
} dtype_table[EIN_DT_COUNT] = {
    [EIN_DT_F16] = {"f16", "float16", kDLFloat, 16},
    [EIN_DT_BF16] = {"bf16", "bfloat16", kDLBfloat, 16},
    [EIN_DT_F32] = {"f32", "float32", kDLFloat, 32},
    [EIN_DT_F64] = {"f64", "float64", kDLFloat, 64},
    [EIN_DT_I8] = {"i8", "int8", kDLInt, 8},
    [EIN_DT_I16] = {"i16", "int16", kDLInt, 16},
    [EIN_DT_I32] = {"i32", "int32", kDLInt, 32},
    [EIN_DT_I64] = {"i64", "int64", kDLInt, 64},
    [EIN_DT_U8] = {"u8", "uint8", kDLUInt, 8},
    [EIN_DT_U16] = {"u16", "uint16", kDLUInt, 16},
    [EIN_DT_U32] = {"u32", "uint32", kDLUInt, 32},
    [EIN_DT_U64] = {"u64", "uint64", kDLUInt, 64},
    [EIN_DT_BOOL] = {"bool", "bool_", EIN_DL_BOOL, 8},
    [EIN_DT_C64] = {"c64", "complex64", kDLComplex, 64},
    [EIN_DT_C128] = {"c128", "complex128", kDLComplex, 128},
    [EIN_DT_F8E4M3] = {"f8e4m3", "float8_e4m3fn", EIN_DL_FLOAT8_E4M3FN, 8},
    [EIN_DT_F8E5M2] = {"f8e5m2", "float8_e5m2", EIN_DL_FLOAT8_E5M2, 8},
};

bool ein_dtype_from_dl(DLDataType dl, ein_dtype *out) {
  if (dl.lanes != 1) return false;
  for (int t = 0; t < EIN_DT_COUNT; t++)
    if (dtype_table[t].code == dl.code && dtype_table[t].bits == dl.bits) {
      *out = (ein_dtype)t;
      return true;
    }
  /* Some producers describe bool as an 8-bit unsigned "bool" code, others
   * (older DLPack) as kDLUInt 1-bit; accept the latter too. */
  if (dl.code == kDLUInt && dl.bits == 1) {
    *out = EIN_DT_BOOL;
    return true;
  }
  return false;
}

DLDataType ein_dtype_to_dl(ein_dtype dt) {
  DLDataType dl = {dtype_table[dt].code, dtype_table[dt].bits, 1};
  return dl;
}

const char *ein_dtype_name(ein_dtype dt) {
  return (unsigned)dt < EIN_DT_COUNT ? dtype_table[dt].name : "?";
}

bool ein_dtype_parse(const char *name, ein_dtype *out) {
  for (int t = 0; t < EIN_DT_COUNT; t++)
    if (strcmp(name, dtype_table[t].name) == 0 ||
        strcmp(name, dtype_table[t].alias) == 0) {
      *out = (ein_dtype)t;
      return true;
    }
  return false;
}

size_t ein_dtype_size(ein_dtype dt) { return dtype_table[dt].bits / 8; }

bool ein_dtype_is_float(ein_dtype dt) { return dt <= EIN_DT_F64; }

bool ein_dtype_is_signed_int(ein_dtype dt) {
  return dt >= EIN_DT_I8 && dt <= EIN_DT_I64;
}

bool ein_dtype_is_complex(ein_dtype dt) {
  return dt == EIN_DT_C64 || dt == EIN_DT_C128;
}

bool ein_dtype_is_fp8(ein_dtype dt) {
  return dt == EIN_DT_F8E4M3 || dt == EIN_DT_F8E5M2;
}

ein_dtype ein_dtype_real(ein_dtype dt) {
  return dt == EIN_DT_C64 ? EIN_DT_F32 : dt == EIN_DT_C128 ? EIN_DT_F64 : dt;
}

ein_dtype ein_dtype_compute(ein_dtype dt) {
  return dt == EIN_DT_F16 || dt == EIN_DT_BF16 || ein_dtype_is_fp8(dt)
             ? EIN_DT_F32
             : dt;
}

ein_acc ein_acc_of(ein_dtype acc_dtype) {
  switch (acc_dtype) {
  case EIN_DT_F64: return EIN_ACC_F64;
  case EIN_DT_F32: return EIN_ACC_F32;
  case EIN_DT_C64: return EIN_ACC_C64;
  case EIN_DT_C128: return EIN_ACC_C128;
  default: return EIN_ACC_I64;
  }
}
