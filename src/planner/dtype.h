/*
 * dtype.h - the element types einc knows, and their mapping from DLPack.
 *
 * Plans and backends speak ein_dtype, never DLDataType, so a lane count or
 * an exotic type is rejected once, at the API boundary.
 */
#ifndef EIN_DTYPE_H
#define EIN_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include <dlpack/dlpack.h>

typedef enum ein_dtype {
  EIN_DT_F16,
  EIN_DT_BF16,
  EIN_DT_F32,
  EIN_DT_F64,
  EIN_DT_I8,
  EIN_DT_I16,
  EIN_DT_I32,
  EIN_DT_I64,
  EIN_DT_U8,
  EIN_DT_U16,
  EIN_DT_U32,
  EIN_DT_U64,
  EIN_DT_BOOL,
  EIN_DT_C64,  /* complex: two f32, real then imaginary (numpy, C, cuBLAS) */
  EIN_DT_C128, /* two f64 */
  /* fp8 (docs/design.md, "fp8 dtypes"): inputs of ein_eval only, decoded
   * to f32 above the planner; no plan holds them. */
  EIN_DT_F8E4M3, /* float8_e4m3fn: bias 7, no inf, max 448 */
  EIN_DT_F8E5M2, /* float8_e5m2: bias 15, IEEE-like, max 57344 */
  EIN_DT_COUNT
} ein_dtype;

/* Maps a DLPack type (lanes must be 1); false for anything einc lacks. */
bool ein_dtype_from_dl(DLDataType dl, ein_dtype *out);
DLDataType ein_dtype_to_dl(ein_dtype dt);

/* "f32", "bf16", "i64", "bool", "c64", ... */
const char *ein_dtype_name(ein_dtype dt);
/* Parses the names above (also "float32", "float16", "bfloat16", "float64",
 * "complex64", "complex128"). */
bool ein_dtype_parse(const char *name, ein_dtype *out);

size_t ein_dtype_size(ein_dtype dt);
bool ein_dtype_is_float(ein_dtype dt); /* f16 bf16 f32 f64 */
bool ein_dtype_is_signed_int(ein_dtype dt);
bool ein_dtype_is_complex(ein_dtype dt); /* c64 c128 */
bool ein_dtype_is_fp8(ein_dtype dt);     /* f8e4m3 f8e5m2 */

/* The real type of one part of a complex dtype (f32 for c64, f64 for
 * c128); dt itself for the others. */
ein_dtype ein_dtype_real(ein_dtype dt);

/* The type arithmetic on dt is carried out in and intermediates are stored
 * in: f32 for f16 and bf16 (rounded once, at the end), dt otherwise (c64
 * accumulates in c64, as f32 does in f32: docs/design.md, "Complex"). */
ein_dtype ein_dtype_compute(ein_dtype dt);

/* The five accumulators a plan step can name (ein_step.acc_dtype, decided
 * by the planner): the CPU loops and the CUDA code generator both switch
 * on this, so the mapping from a dtype lives here once. Integers
 * accumulate in 64 bits. */
typedef enum ein_acc {
  EIN_ACC_F32,
  EIN_ACC_F64,
  EIN_ACC_I64,
  EIN_ACC_C64,
  EIN_ACC_C128
} ein_acc;
ein_acc ein_acc_of(ein_dtype acc_dtype);

#endif
