/*
 * fuzz_npy.c - libFuzzer target for the .npy reader of `einc eval`
 * (src/cli/npy.c): the input is the file. A file the reader accepts must
 * describe a tensor that einc's checks accept too, and its shape must
 * account for exactly the data that followed the header.
 *   build-fuzz/fuzz/fuzz_npy fuzz/corpus-npy -max_total_time=600
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtype.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  FILE *f = fmemopen((void *)data, size, "rb");
  if (!f) return 0;
  npy_array a;
  char msg[512];
  if (npy_read_stream(f, "fuzz.npy", &a, msg, sizeof msg)) {
    ein_dtype dt;
    if (!ein_dtype_from_dl(a.t.dtype, &dt) || a.t.ndim < 0 ||
        a.t.ndim > EIN_MAX_DIMS)
      abort();
    int64_t numel = 1;
    for (int d = 0; d < a.t.ndim; d++) {
      if (a.t.shape[d] < 0) abort();
      numel *= a.t.shape[d];
    }
    if ((size_t)numel * ein_dtype_size(dt) > size) abort();
    /* Touch every byte: the buffer must hold what the shape says. */
    volatile unsigned char sink = 0;
    for (int64_t i = 0; i < numel * (int64_t)ein_dtype_size(dt); i++)
      sink ^= ((const unsigned char *)a.data)[i];
    (void)sink;
    npy_free(&a);
  }
  fclose(f);
  return 0;
}
