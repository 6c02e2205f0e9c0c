/*
 * napi_dlpack_tensor_extent (include/napi_dlpack.h) as a filter, for the differential test in
 * crates/napi-dlpack/tests/fuzz_validation.rs, which feeds it the descriptors it gives the Rust
 * validator and compares the verdicts. One descriptor per input line:
 *
 *   data byte_offset device_type device_id ndim code bits lanes flags shape_mode strides_mode n
 *   shape[0..n] strides[0..n]
 *
 * (modes: 0 NULL, 1 aligned, 2 one byte off; n values of each are given, n >= ndim when
 * ndim > 0). One answer per line: "E <code>", or "OK numel itemsize min max span contiguous".
 * The data pointer is never dereferenced, so it may be any value.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_dlpack.h"

#define MAX_VALUES 80

/* Room for MAX_VALUES int64s starting one byte in (the misaligned case). */
static int64_t shape_store[MAX_VALUES + 1], strides_store[MAX_VALUES + 1];

static int64_t* place(int64_t* store, int mode, const int64_t* values, int n) {
  if (mode == 0) return NULL;
  if (mode == 1) {
    memcpy(store, values, (size_t)n * sizeof(int64_t));
    return store;
  }
  /* One byte off: the helper must refuse it before reading (nothing is copied, so a read
   * would see garbage and a sanitizer build would flag it). */
  return (int64_t*)((char*)store + 1);
}

int main(void) {
  unsigned long long data, byte_offset, flags;
  long long device_type, device_id, ndim, code, bits, lanes;
  int shape_mode, strides_mode, n, i;
  int64_t shape[MAX_VALUES], strides[MAX_VALUES];
  while (scanf("%llu %llu %lld %lld %lld %lld %lld %lld %llu %d %d %d", &data, &byte_offset,
               &device_type, &device_id, &ndim, &code, &bits, &lanes, &flags, &shape_mode,
               &strides_mode, &n) == 12) {
    DLTensor t;
    napi_dlpack_extent extent;
    const char* verdict;
    if (n < 0 || n > MAX_VALUES) return 2;
    for (i = 0; i < n; i++)
      if (scanf("%" SCNd64, &shape[i]) != 1) return 2;
    for (i = 0; i < n; i++)
      if (scanf("%" SCNd64, &strides[i]) != 1) return 2;
    memset(&t, 0, sizeof t);
    t.data = (void*)(uintptr_t)data;
    t.byte_offset = byte_offset;
    t.device.device_type = (DLDeviceType)device_type;
    t.device.device_id = (int32_t)device_id;
    t.ndim = (int32_t)ndim;
    t.dtype.code = (uint8_t)code;
    t.dtype.bits = (uint8_t)bits;
    t.dtype.lanes = (uint16_t)lanes;
    t.shape = place(shape_store, shape_mode, shape, n);
    t.strides = place(strides_store, strides_mode, strides, n);
    verdict = napi_dlpack_tensor_extent(&t, flags, &extent);
    if (verdict != NULL) {
      printf("E %s\n", verdict);
    } else {
      printf("OK %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRIu64 " %d\n", extent.numel,
             extent.itemsize, extent.min_offset, extent.max_offset, extent.span_bytes,
             extent.c_contiguous ? 1 : 0);
    }
    fflush(stdout); /* a crash then names the descriptor it stopped at */
  }
  return 0;
}
