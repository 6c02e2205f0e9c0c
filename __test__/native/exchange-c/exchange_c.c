/*
 * A plain C addon exercising the exchange table (include/napi_dlpack.h part 3)
 * in both directions, from the header only:
 *
 *  - as a consumer of napi-dlpack's Tensor: borrowSum / borrowScale (borrowed
 *    DLTensor + napi_dlpack_tensor_extent), exportHold / releaseHeld (owning
 *    export), makeTensor (a C-owned tensor returned to JS as a napi-dlpack
 *    Tensor through the default importer), currentStream, borrowStatus,
 *    borrowKeep / keptSum (a borrow outliving a dispose());
 *  - as a producer: the CTensor class, whose prototype carries this addon's
 *    own table (major 1) and whose objects each carry their own per-object
 *    external (the fast path, napi_dlpack_exchange_object_install), and
 *    BadVersionTensor / ChainedTensor, whose tables have major 99 (with no
 *    older table / with the major-1 table behind it);
 *  - hostile values: forgedObject(kind), plain objects carrying a per-object
 *    external that names an unknown major, or no table at all;
 *    lendingPath(value), which of the two discovery paths a value takes;
 *  - the library adapter (part 4): adaptedPointer(value);
 *  - borrow by handle id (minor 2): idBorrowSum(id) reads a Tensor#id or a
 *    Tensor#native with napi_dlpack_handle_id and borrows it through the
 *    default importer kept per environment (napi_dlpack_exchange_borrow_id),
 *    using the extent the producer hands over instead of validating.
 *
 * Counters (deleterCalls, liveCTensors) let tests check that every deleter
 * runs exactly once.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_dlpack.h"

#define THROW(env, code, msg)                      \
  do {                                             \
    napi_throw_error((env), (code), (msg));        \
    return NULL;                                   \
  } while (0)

#define CHECK_NAPI(env, call)                                  \
  do {                                                         \
    if ((call) != napi_ok) THROW(env, "ERR_DLPACK_NAPI", #call); \
  } while (0)

static napi_value get_args(napi_env env, napi_callback_info info, size_t n,
                           napi_value* argv) {
  size_t argc = n;
  size_t i;
  napi_value self;
  if (napi_get_cb_info(env, info, &argc, argv, &self, NULL) != napi_ok)
    return NULL;
  for (i = argc; i < n; i++) napi_get_undefined(env, &argv[i]);
  return self;
}

/* Throws for a failed status; for NAPI_DLPACK_ERR_PRODUCER the producer's
 * exception is already pending and is passed on untouched. */
static napi_value fail_status(napi_env env, napi_dlpack_status st) {
  if (st != NAPI_DLPACK_ERR_PRODUCER)
    napi_throw_error(env, napi_dlpack_status_code(st), "exchange table call failed");
  return NULL;
}

static napi_value make_bigint(napi_env env, uint64_t value) {
  napi_value out = NULL;
  napi_create_bigint_uint64(env, value, &out);
  return out;
}

/* ---- consumer: borrow a tensor -------------------------------------------- */

typedef struct {
  napi_dlpack_borrow borrow;
  DLTensor t; /* borrow.tensor, validated */
  uint64_t flags;
  napi_dlpack_extent extent;
} borrowed;

/* Borrows and validates a float32 host tensor; 0 with an exception thrown
 * (and nothing left to release) on failure. On success the caller ends the
 * borrow with napi_dlpack_exchange_release(env, &out->borrow). */
static int borrow_f32(napi_env env, napi_value value, borrowed* out) {
  const char* code;
  napi_dlpack_status st = napi_dlpack_exchange_borrow(env, value, &out->borrow);
  if (st != NAPI_DLPACK_OK) {
    fail_status(env, st);
    return 0;
  }
  out->t = out->borrow.tensor;
  out->flags = out->borrow.flags;
  code = napi_dlpack_tensor_extent(&out->t, out->flags, &out->extent);
  if (code != NULL) {
    napi_dlpack_exchange_release(env, &out->borrow);
    napi_throw_error(env, code, "invalid borrowed tensor");
    return 0;
  }
  if (out->t.dtype.code != kDLFloat || out->t.dtype.bits != 32 || out->t.dtype.lanes != 1 ||
      out->t.device.device_type != kDLCPU) {
    napi_dlpack_exchange_release(env, &out->borrow);
    napi_throw_error(env, "ERR_DLPACK_DTYPE_MISMATCH", "expected a float32 CPU tensor");
    return 0;
  }
  return 1;
}

/* Visits every element offset (in elements) in row-major order. */
static void for_each_offset(const DLTensor* t, void (*visit)(float*, void*), void* ctx) {
  int64_t index[NAPI_DLPACK_MAX_NDIM] = {0};
  float* first = (float*)((char*)t->data + t->byte_offset);
  int64_t numel = 1, k;
  int32_t d;
  for (d = 0; d < t->ndim; d++) numel *= t->shape[d];
  for (k = 0; k < numel; k++) {
    int64_t offset = 0;
    for (d = 0; d < t->ndim; d++) offset += index[d] * t->strides[d];
    visit(first + offset, ctx);
    for (d = t->ndim - 1; d >= 0; d--) {
      if (++index[d] < t->shape[d]) break;
      index[d] = 0;
    }
  }
}

static void add_to(float* element, void* ctx) { *(double*)ctx += *element; }
static void scale_by(float* element, void* ctx) { *element *= (float)*(double*)ctx; }

/* borrowSum(tensor) -> { sum, pointer, flags, numel, contiguous, spanBytes } */
static napi_value borrow_sum(napi_env env, napi_callback_info info) {
  napi_value argv[1], result, field;
  borrowed b;
  double sum = 0;
  get_args(env, info, 1, argv);
  if (!borrow_f32(env, argv[0], &b)) return NULL;
  for_each_offset(&b.t, add_to, &sum);
  napi_dlpack_exchange_release(env, &b.borrow); /* b.t's fields stay readable: copies */
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_create_double(env, sum, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "sum", field));
  CHECK_NAPI(env, napi_set_named_property(
                      env, result, "pointer",
                      make_bigint(env, (uint64_t)(uintptr_t)b.t.data + b.t.byte_offset)));
  CHECK_NAPI(env, napi_create_double(env, (double)b.flags, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "flags", field));
  CHECK_NAPI(env, napi_create_double(env, (double)b.extent.numel, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "numel", field));
  CHECK_NAPI(env, napi_get_boolean(env, b.extent.c_contiguous != 0, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "contiguous", field));
  CHECK_NAPI(env, napi_create_double(env, (double)b.extent.span_bytes, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "spanBytes", field));
  return result;
}

/* borrowScale(tensor, factor): in place, strided; refuses READ_ONLY. */
static napi_value borrow_scale(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  borrowed b;
  double factor = 1;
  get_args(env, info, 2, argv);
  CHECK_NAPI(env, napi_get_value_double(env, argv[1], &factor));
  if (!borrow_f32(env, argv[0], &b)) return NULL;
  if (b.flags & DLPACK_FLAG_BITMASK_READ_ONLY) {
    napi_dlpack_exchange_release(env, &b.borrow);
    THROW(env, "ERR_DLPACK_READ_ONLY", "the tensor is read-only");
  }
  for_each_offset(&b.t, scale_by, &factor);
  napi_dlpack_exchange_release(env, &b.borrow);
  return NULL;
}

/* A borrow kept across calls: borrowKeep(tensor) starts it, JS may then
 * dispose the tensor, keptSum() reads the memory and ends the borrow. */
static borrowed kept;
static int kept_active = 0;

/* borrowKeep(tensor) */
static napi_value borrow_keep(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  get_args(env, info, 1, argv);
  if (kept_active) THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "a borrow is already kept");
  if (!borrow_f32(env, argv[0], &kept)) return NULL;
  kept_active = 1;
  return NULL;
}

/* keptSum() -> the sum of the kept borrow's elements; then releases it. */
static napi_value kept_sum(napi_env env, napi_callback_info info) {
  napi_value result;
  double sum = 0;
  (void)info;
  if (!kept_active) THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "no borrow is kept");
  for_each_offset(&kept.t, add_to, &sum);
  napi_dlpack_exchange_release(env, &kept.borrow);
  kept_active = 0;
  CHECK_NAPI(env, napi_create_double(env, sum, &result));
  return result;
}

/* borrowStatus(value) -> { code, status }: the status of
 * napi_dlpack_exchange_borrow as its stable code ("OK", "ERR_DLPACK_VERSION",
 * ...) and as its number (codes are shared: NO_EXCHANGE and INVALID_ARG both
 * say ERR_DLPACK_INVALID_ARGUMENT); a producer's exception is passed on. */
static napi_value borrow_status(napi_env env, napi_callback_info info) {
  napi_value argv[1], result, field;
  napi_dlpack_borrow borrow;
  napi_dlpack_status st;
  get_args(env, info, 1, argv);
  st = napi_dlpack_exchange_borrow(env, argv[0], &borrow);
  if (st == NAPI_DLPACK_ERR_PRODUCER) return NULL;
  napi_dlpack_exchange_release(env, &borrow);
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_create_string_utf8(env, napi_dlpack_status_code(st), NAPI_AUTO_LENGTH, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "code", field));
  CHECK_NAPI(env, napi_create_int32(env, (int32_t)st, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "status", field));
  return result;
}

/* borrowInspect(value) -> { flags, code, bits, extent }: borrows any tensor,
 * reports its DLPack flags and dtype, and what napi_dlpack_tensor_extent says
 * of it WITH those flags (an error code, or { numel, itemsize, spanBytes }). */
static napi_value borrow_inspect(napi_env env, napi_callback_info info) {
  napi_value argv[1], result, field, extent_value;
  napi_dlpack_borrow borrow;
  napi_dlpack_extent extent;
  napi_dlpack_status st;
  const char* code;
  get_args(env, info, 1, argv);
  st = napi_dlpack_exchange_borrow(env, argv[0], &borrow);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  code = napi_dlpack_tensor_extent(&borrow.tensor, borrow.flags, &extent);
  napi_dlpack_exchange_release(env, &borrow); /* borrow.tensor's fields are copies */
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_create_uint32(env, (uint32_t)borrow.flags, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "flags", field));
  CHECK_NAPI(env, napi_create_uint32(env, borrow.tensor.dtype.code, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "code", field));
  CHECK_NAPI(env, napi_create_uint32(env, borrow.tensor.dtype.bits, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "bits", field));
  if (code != NULL) {
    CHECK_NAPI(env, napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &extent_value));
  } else {
    CHECK_NAPI(env, napi_create_object(env, &extent_value));
    CHECK_NAPI(env, napi_create_int64(env, extent.numel, &field));
    CHECK_NAPI(env, napi_set_named_property(env, extent_value, "numel", field));
    CHECK_NAPI(env, napi_create_int64(env, extent.itemsize, &field));
    CHECK_NAPI(env, napi_set_named_property(env, extent_value, "itemsize", field));
    CHECK_NAPI(env, napi_create_int64(env, (int64_t)extent.span_bytes, &field));
    CHECK_NAPI(env, napi_set_named_property(env, extent_value, "spanBytes", field));
  }
  CHECK_NAPI(env, napi_set_named_property(env, result, "extent", extent_value));
  return result;
}

/* Whether object[name] exists with the given type (its value in *out). */
static int has_type(napi_env env, napi_value object, const char* name, napi_valuetype want,
                    napi_value* out) {
  napi_valuetype type;
  return napi_get_named_property(env, object, name, out) == napi_ok &&
         napi_typeof(env, *out, &type) == napi_ok && type == want;
}

/* extentOf({ shape, strides, byteOffset, data, bits, code, lanes, flags,
 * deviceType, deviceId, misaligned: 'shape' | 'strides' }) -> code or extent:
 * napi_dlpack_tensor_extent on a hand-made DLTensor (no memory behind it). */
static napi_value extent_of(napi_env env, napi_callback_info info) {
  napi_value argv[1], field, result;
  int64_t shape[NAPI_DLPACK_MAX_NDIM + 2], strides[NAPI_DLPACK_MAX_NDIM + 2];
  uint32_t ndim = 0, i, bits = 32, dtype_code = kDLFloat, lanes = 1, flags = 0;
  int32_t device_type = kDLCPU, device_id = 0;
  char misaligned[16] = "";
  bool has_strides = false, lossless;
  uint64_t data = 0x1000, byte_offset = 0;
  DLTensor t;
  napi_dlpack_extent extent;
  const char* code;
  napi_value shape_value, strides_value;
  get_args(env, info, 1, argv);
  CHECK_NAPI(env, napi_get_named_property(env, argv[0], "shape", &shape_value));
  CHECK_NAPI(env, napi_get_array_length(env, shape_value, &ndim));
  if (ndim > NAPI_DLPACK_MAX_NDIM + 2) THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "too many dims");
  CHECK_NAPI(env, napi_get_named_property(env, argv[0], "strides", &strides_value));
  CHECK_NAPI(env, napi_is_array(env, strides_value, &has_strides));
  for (i = 0; i < ndim; i++) {
    CHECK_NAPI(env, napi_get_element(env, shape_value, i, &field));
    CHECK_NAPI(env, napi_get_value_bigint_int64(env, field, &shape[i], &lossless));
    strides[i] = 0;
    if (has_strides) {
      CHECK_NAPI(env, napi_get_element(env, strides_value, i, &field));
      CHECK_NAPI(env, napi_get_value_bigint_int64(env, field, &strides[i], &lossless));
    }
  }
  /* Optional fields: read only when present with the right type (runtimes differ in what a
   * conversion of `undefined` returns). */
  if (has_type(env, argv[0], "data", napi_bigint, &field))
    napi_get_value_bigint_uint64(env, field, &data, &lossless);
  if (has_type(env, argv[0], "byteOffset", napi_bigint, &field))
    napi_get_value_bigint_uint64(env, field, &byte_offset, &lossless);
  if (has_type(env, argv[0], "bits", napi_number, &field))
    napi_get_value_uint32(env, field, &bits);
  if (has_type(env, argv[0], "code", napi_number, &field))
    napi_get_value_uint32(env, field, &dtype_code);
  if (has_type(env, argv[0], "lanes", napi_number, &field))
    napi_get_value_uint32(env, field, &lanes);
  if (has_type(env, argv[0], "flags", napi_number, &field))
    napi_get_value_uint32(env, field, &flags);
  if (has_type(env, argv[0], "deviceType", napi_number, &field))
    napi_get_value_int32(env, field, &device_type);
  if (has_type(env, argv[0], "deviceId", napi_number, &field))
    napi_get_value_int32(env, field, &device_id);
  if (has_type(env, argv[0], "misaligned", napi_string, &field))
    napi_get_value_string_utf8(env, field, misaligned, sizeof misaligned, NULL);
  memset(&t, 0, sizeof t);
  t.data = (void*)(uintptr_t)data;
  t.device.device_type = (DLDeviceType)device_type;
  t.device.device_id = device_id;
  t.ndim = (int32_t)ndim;
  t.dtype.code = (uint8_t)dtype_code;
  t.dtype.bits = (uint8_t)bits;
  t.dtype.lanes = (uint16_t)lanes;
  t.shape = shape;
  t.strides = has_strides ? strides : NULL;
  /* A pointer one byte off: the helper must refuse it before reading through it. */
  if (strcmp(misaligned, "shape") == 0) t.shape = (int64_t*)((char*)shape + 1);
  if (strcmp(misaligned, "strides") == 0) t.strides = (int64_t*)((char*)strides + 1);
  t.byte_offset = byte_offset;
  code = napi_dlpack_tensor_extent(&t, flags, &extent);
  if (code != NULL) {
    CHECK_NAPI(env, napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &result));
    return result;
  }
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_create_bigint_int64(env, extent.numel, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "numel", field));
  CHECK_NAPI(env, napi_create_bigint_int64(env, extent.min_offset, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "minOffset", field));
  CHECK_NAPI(env, napi_create_bigint_int64(env, extent.max_offset, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "maxOffset", field));
  CHECK_NAPI(env, napi_create_bigint_uint64(env, extent.span_bytes, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "spanBytes", field));
  CHECK_NAPI(env, napi_get_boolean(env, extent.c_contiguous != 0, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "contiguous", field));
  return result;
}

/* ---- consumer: owning export ----------------------------------------------- */

#define MAX_HELD 64
static DLManagedTensorVersioned* held[MAX_HELD];
static int held_count = 0;

/* exportHold(tensor) -> pointer of the first element; the export is held. */
static napi_value export_hold(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  DLManagedTensorVersioned* tensor = NULL;
  napi_dlpack_status st;
  get_args(env, info, 1, argv);
  if (held_count == MAX_HELD) THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "too many held");
  st = napi_dlpack_exchange_export(env, argv[0], &tensor);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  held[held_count++] = tensor;
  return make_bigint(env, (uint64_t)(uintptr_t)tensor->dl_tensor.data + tensor->dl_tensor.byte_offset);
}

/* heldFlags(i) -> DLPack flags of held export i. */
static napi_value held_flags(napi_env env, napi_callback_info info) {
  napi_value argv[1], result;
  uint32_t i = 0;
  get_args(env, info, 1, argv);
  CHECK_NAPI(env, napi_get_value_uint32(env, argv[0], &i));
  if ((int)i >= held_count) THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "no such export");
  CHECK_NAPI(env, napi_create_double(env, (double)held[i]->flags, &result));
  return result;
}

/* releaseHeld() -> how many exports were released (each deleter once). */
static napi_value release_held(napi_env env, napi_callback_info info) {
  napi_value result;
  int released = held_count;
  (void)info;
  while (held_count > 0) {
    napi_dlpack_tensor_release(NAPI_DLPACK_KIND_VERSIONED, held[--held_count]);
    held[held_count] = NULL;
  }
  CHECK_NAPI(env, napi_create_int32(env, released, &result));
  return result;
}

/* ---- producer of results: C memory returned as a napi-dlpack Tensor -------- */

static volatile int deleter_calls = 0; /* deleters may run on other threads */
static uint64_t last_pointer = 0;

typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[1];
  int64_t strides[1];
  float data[];
} c_owned;

static void c_owned_deleter(DLManagedTensorVersioned* self) {
  __atomic_fetch_add(&deleter_calls, 1, __ATOMIC_SEQ_CST);
  free(self->manager_ctx);
}

/* makeTensor(n, readonly) -> a napi-dlpack Tensor over C memory holding 0..n-1. */
static napi_value make_tensor(napi_env env, napi_callback_info info) {
  napi_value argv[2], out = NULL;
  uint32_t n = 0, i;
  bool readonly = false;
  c_owned* owned;
  napi_dlpack_status st;
  get_args(env, info, 2, argv);
  CHECK_NAPI(env, napi_get_value_uint32(env, argv[0], &n));
  napi_get_value_bool(env, argv[1], &readonly);
  owned = (c_owned*)malloc(sizeof(c_owned) + sizeof(float) * (n ? n : 1));
  if (owned == NULL) THROW(env, "ERR_DLPACK_NO_MEMORY", "malloc failed");
  for (i = 0; i < n; i++) owned->data[i] = (float)i;
  owned->shape[0] = n;
  owned->strides[0] = 1;
  memset(&owned->managed, 0, sizeof owned->managed);
  owned->managed.version.major = DLPACK_MAJOR_VERSION;
  owned->managed.version.minor = DLPACK_MINOR_VERSION;
  owned->managed.manager_ctx = owned;
  owned->managed.deleter = c_owned_deleter;
  owned->managed.flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  owned->managed.dl_tensor.data = owned->data;
  owned->managed.dl_tensor.device.device_type = kDLCPU;
  owned->managed.dl_tensor.ndim = 1;
  owned->managed.dl_tensor.dtype.code = kDLFloat;
  owned->managed.dl_tensor.dtype.bits = 32;
  owned->managed.dl_tensor.dtype.lanes = 1;
  owned->managed.dl_tensor.shape = owned->shape;
  owned->managed.dl_tensor.strides = owned->strides;
  last_pointer = (uint64_t)(uintptr_t)owned->data;
  /* Ownership passes here on every path: on failure the deleter has run. */
  st = napi_dlpack_exchange_to_value(env, &owned->managed, &out);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  return out;
}

/* makeBadTensor() -> hands a tensor with ndim -1 to the importer (must be
 * refused with ERR_DLPACK_NDIM, its deleter run once). */
static napi_value make_bad_tensor(napi_env env, napi_callback_info info) {
  napi_value out = NULL;
  c_owned* owned;
  napi_dlpack_status st;
  (void)info;
  owned = (c_owned*)calloc(1, sizeof(c_owned) + sizeof(float));
  if (owned == NULL) THROW(env, "ERR_DLPACK_NO_MEMORY", "calloc failed");
  owned->managed.version.major = DLPACK_MAJOR_VERSION;
  owned->managed.manager_ctx = owned;
  owned->managed.deleter = c_owned_deleter;
  owned->managed.dl_tensor.data = owned->data;
  owned->managed.dl_tensor.device.device_type = kDLCPU;
  owned->managed.dl_tensor.ndim = -1;
  owned->managed.dl_tensor.dtype.code = kDLFloat;
  owned->managed.dl_tensor.dtype.bits = 32;
  owned->managed.dl_tensor.dtype.lanes = 1;
  st = napi_dlpack_exchange_to_value(env, &owned->managed, &out);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  return out;
}

static napi_value deleter_count(napi_env env, napi_callback_info info) {
  napi_value result;
  (void)info;
  CHECK_NAPI(env, napi_create_int32(env, __atomic_load_n(&deleter_calls, __ATOMIC_SEQ_CST), &result));
  return result;
}

static napi_value last_made_pointer(napi_env env, napi_callback_info info) {
  (void)info;
  return make_bigint(env, last_pointer);
}

/* currentStream(value, deviceType) -> bigint, or null for NULL. */
static napi_value current_stream(napi_env env, napi_callback_info info) {
  napi_value argv[3], result;
  const napi_dlpack_exchange_api* api = NULL;
  int32_t device_type = kDLCPU, device_id = 0;
  void* stream = (void*)0xdead;
  napi_dlpack_status st;
  napi_valuetype id_type;
  get_args(env, info, 3, argv);
  CHECK_NAPI(env, napi_get_value_int32(env, argv[1], &device_type));
  CHECK_NAPI(env, napi_typeof(env, argv[2], &id_type));
  if (id_type == napi_number) CHECK_NAPI(env, napi_get_value_int32(env, argv[2], &device_id));
  st = napi_dlpack_exchange_api_find(env, argv[0], &api);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  if (api->current_work_stream == NULL) THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "no current_work_stream");
  if (api->current_work_stream(env, device_type, device_id, &stream) != 0) return NULL;
  if (stream == NULL) {
    CHECK_NAPI(env, napi_get_null(env, &result));
    return result;
  }
  return make_bigint(env, (uint64_t)(uintptr_t)stream);
}

/* ---- producer: CTensor, a third-party tensor class with its own table ------ */

static volatile int live_ctensors = 0;

/* A 2x3 float32 matrix holding 0..5, row-major; shared (refcounted) by the JS
 * object and the owning exports made of it. */
typedef struct {
  napi_dlpack_object header; /* first: the per-object external's data */
  int refs;                  /* atomic: the wrap, the external, borrows, exports */
  float data[6];
  int64_t shape[2];
  int64_t strides[2];
  int readonly;
} ctensor;

static void ctensor_unref(ctensor* t) {
  if (__atomic_sub_fetch(&t->refs, 1, __ATOMIC_SEQ_CST) == 0) {
    __atomic_fetch_sub(&live_ctensors, 1, __ATOMIC_SEQ_CST);
    free(t);
  }
}

static void ctensor_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  ctensor_unref((ctensor*)data);
}

static ctensor* ctensor_of(napi_env env, napi_value value) {
  void* data = NULL;
  if (napi_unwrap(env, value, &data) != napi_ok || data == NULL) {
    napi_throw_error(env, "ERR_DLPACK_INVALID_ARGUMENT", "not a CTensor");
    return NULL;
  }
  return (ctensor*)data;
}

/* Fills a DLTensor viewing `t` (no count taken). */
static void ct_fill(const ctensor* t, DLTensor* out, uint64_t* flags) {
  memset(out, 0, sizeof *out);
  out->data = (void*)t->data;
  out->device.device_type = kDLCPU;
  out->ndim = 2;
  out->dtype.code = kDLFloat;
  out->dtype.bits = 32;
  out->dtype.lanes = 1;
  out->shape = (int64_t*)t->shape;
  out->strides = (int64_t*)t->strides;
  *flags = t->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
}

static volatile int object_borrows = 0, value_borrows = 0;

/* A borrow holds a count on the matrix (its token), so the JS object may be
 * collected during it. */
static void ct_lend(ctensor* t, DLTensor* out, uint64_t* flags, void** keep_alive) {
  ct_fill(t, out, flags);
  __atomic_fetch_add(&t->refs, 1, __ATOMIC_SEQ_CST);
  *keep_alive = t;
}

static int ct_dltensor_from_value(napi_env env, napi_value value, DLTensor* out, uint64_t* flags,
                                  void** keep_alive) {
  ctensor* t = ctensor_of(env, value);
  if (t == NULL) return -1;
  value_borrows++;
  ct_lend(t, out, flags, keep_alive);
  return 0;
}

/* The fast path: `object` is the data of the per-object external (the
 * ctensor itself, which starts with its napi_dlpack_object). */
static int ct_dltensor_from_object(napi_env env, napi_value value, void* object, DLTensor* out,
                                   uint64_t* flags, void** keep_alive) {
  (void)env;
  (void)value;
  object_borrows++;
  ct_lend((ctensor*)object, out, flags, keep_alive);
  return 0;
}

static void ct_release_borrow(napi_env env, void* keep_alive) {
  (void)env;
  if (keep_alive != NULL) ctensor_unref((ctensor*)keep_alive);
}

static void ct_export_deleter(DLManagedTensorVersioned* self) {
  __atomic_fetch_add(&deleter_calls, 1, __ATOMIC_SEQ_CST);
  ctensor_unref((ctensor*)self->manager_ctx);
  free(self);
}

static int ct_managed_from_value(napi_env env, napi_value value, DLManagedTensorVersioned** out) {
  uint64_t flags = 0;
  DLManagedTensorVersioned* managed;
  ctensor* t = ctensor_of(env, value);
  if (t == NULL) return -1;
  managed = (DLManagedTensorVersioned*)calloc(1, sizeof *managed);
  if (managed == NULL) {
    napi_throw_error(env, "ERR_DLPACK_NO_MEMORY", "calloc failed");
    return -1;
  }
  ct_fill(t, &managed->dl_tensor, &flags);
  managed->version.major = DLPACK_MAJOR_VERSION;
  managed->version.minor = DLPACK_MINOR_VERSION;
  managed->flags = flags;
  managed->manager_ctx = t;
  managed->deleter = ct_export_deleter;
  __atomic_fetch_add(&t->refs, 1, __ATOMIC_SEQ_CST);
  *out = managed;
  return 0;
}

static int ct_current_work_stream(napi_env env, int32_t device_type, int32_t device_id, void** out) {
  (void)env;
  (void)device_type;
  (void)device_id;
  *out = NULL;
  return 0;
}

static const napi_dlpack_exchange_api ctensor_api = {
    {{NAPI_DLPACK_EXCHANGE_API_MAJOR, NAPI_DLPACK_EXCHANGE_API_MINOR}, NULL},
    ct_dltensor_from_value,
    ct_release_borrow,
    ct_managed_from_value,
    NULL, /* this producer makes no objects from foreign tensors */
    ct_current_work_stream,
    ct_dltensor_from_object,
    NULL, /* no handle ids */
    NULL /* so no slot table */};

/* A future major this consumer generation cannot read, alone or in front of
 * the major-1 table. */
static const napi_dlpack_exchange_api_header future_api = {{99, 0}, NULL};
static const napi_dlpack_exchange_api_header chained_api = {
    {99, 0}, &ctensor_api.header};

/* new CTensor(readonly?): the class's table header is the constructor's data. */
static napi_value ctensor_construct(napi_env env, napi_callback_info info) {
  napi_value argv[1] = {NULL};
  size_t argc = 1;
  bool readonly = false;
  int i;
  ctensor* t;
  void* api = NULL;
  napi_value self = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, &self, &api) != napi_ok || self == NULL)
    THROW(env, "ERR_DLPACK_NAPI", "napi_get_cb_info failed");
  if (argc > 0) napi_get_value_bool(env, argv[0], &readonly);
  t = (ctensor*)calloc(1, sizeof *t);
  if (t == NULL) THROW(env, "ERR_DLPACK_NO_MEMORY", "calloc failed");
  t->header.api = (const napi_dlpack_exchange_api_header*)api;
  t->refs = 1;
  for (i = 0; i < 6; i++) t->data[i] = (float)i;
  t->shape[0] = 2;
  t->shape[1] = 3;
  t->strides[0] = 3;
  t->strides[1] = 1;
  t->readonly = readonly;
  __atomic_fetch_add(&live_ctensors, 1, __ATOMIC_SEQ_CST);
  if (napi_wrap(env, self, t, ctensor_finalize, NULL, NULL) != napi_ok) {
    ctensor_unref(t);
    THROW(env, "ERR_DLPACK_NAPI", "napi_wrap failed");
  }
  /* The per-object external holds its own count (JS may keep the external
   * after the object is gone). */
  __atomic_fetch_add(&t->refs, 1, __ATOMIC_SEQ_CST);
  if (napi_dlpack_exchange_object_install(env, self, NULL, &t->header, ctensor_finalize, NULL) !=
      NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_NAPI", "napi_dlpack_exchange_object_install failed");
  return self;
}

/* CTensor#pointer / #values(): the C side's view, for identity checks. */
static napi_value ctensor_pointer(napi_env env, napi_callback_info info) {
  napi_value self = get_args(env, info, 0, NULL);
  ctensor* t = ctensor_of(env, self);
  if (t == NULL) return NULL;
  return make_bigint(env, (uint64_t)(uintptr_t)t->data);
}

static napi_value ctensor_values(napi_env env, napi_callback_info info) {
  napi_value self = get_args(env, info, 0, NULL), result, value;
  uint32_t i;
  ctensor* t = ctensor_of(env, self);
  if (t == NULL) return NULL;
  CHECK_NAPI(env, napi_create_array_with_length(env, 6, &result));
  for (i = 0; i < 6; i++) {
    CHECK_NAPI(env, napi_create_double(env, t->data[i], &value));
    CHECK_NAPI(env, napi_set_element(env, result, i, value));
  }
  return result;
}

static napi_value live_ctensor_count(napi_env env, napi_callback_info info) {
  napi_value result;
  (void)info;
  CHECK_NAPI(env, napi_create_int32(env, __atomic_load_n(&live_ctensors, __ATOMIC_SEQ_CST), &result));
  return result;
}

/* Defines a CTensor-like class whose prototype carries `api`. */
static napi_status define_class(napi_env env, napi_value exports, const char* name,
                                const napi_dlpack_exchange_api_header* api) {
  napi_value cls, prototype;
  napi_property_descriptor methods[] = {
      {"pointer", NULL, ctensor_pointer, NULL, NULL, NULL, napi_default, NULL},
      {"values", NULL, ctensor_values, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_status status = napi_define_class(env, name, NAPI_AUTO_LENGTH, ctensor_construct,
                                         (void*)api, 2, methods, &cls);
  if (status != napi_ok) return status;
  status = napi_get_named_property(env, cls, "prototype", &prototype);
  if (status != napi_ok) return status;
  if (napi_dlpack_exchange_api_install(env, prototype, api) != NAPI_DLPACK_OK)
    return napi_generic_failure;
  return napi_set_named_property(env, exports, name, cls);
}

/* A header of no table this consumer generation reads, for forged objects. */
static napi_dlpack_object forged_future = {&future_api};
static napi_dlpack_object forged_empty = {NULL};

/* forgedObject(kind) -> a plain object whose own exchange property is a
 * per-object external naming a major-99 table ("future") or no table
 * ("empty"), or an untagged external ("untagged"). */
static napi_value forged_object(napi_env env, napi_callback_info info) {
  napi_value argv[1], result, external, key;
  char kind[16] = {0};
  size_t length = 0;
  napi_dlpack_object* data;
  get_args(env, info, 1, argv);
  CHECK_NAPI(env, napi_get_value_string_utf8(env, argv[0], kind, sizeof kind, &length));
  CHECK_NAPI(env, napi_create_object(env, &result));
  if (napi_dlpack_exchange_key(env, &key) != NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_NAPI", "napi_dlpack_exchange_key failed");
  if (strcmp(kind, "untagged") == 0) {
    CHECK_NAPI(env, napi_create_external(env, &forged_future, NULL, NULL, &external));
    CHECK_NAPI(env, napi_set_property(env, result, key, external));
    return result;
  }
  data = strcmp(kind, "future") == 0 ? &forged_future : &forged_empty;
  if (napi_dlpack_exchange_object_install(env, result, key, data, NULL, NULL) != NAPI_DLPACK_OK) {
    /* the helper refuses a header naming no table: tag one by hand */
    CHECK_NAPI(env, napi_create_external(env, data, NULL, NULL, &external));
    CHECK_NAPI(env, napi_type_tag_object(env, external, napi_dlpack_object_tag()));
    CHECK_NAPI(env, napi_set_property(env, result, key, external));
  }
  return result;
}

/* lendingPath(value) -> "object" (a per-object external), "table" (the table
 * itself) or the status code of napi_dlpack_exchange_find. */
static napi_value lending_path(napi_env env, napi_callback_info info) {
  napi_value argv[1], result;
  const napi_dlpack_exchange_api* api = NULL;
  void* object = NULL;
  napi_dlpack_status st;
  const char* text;
  get_args(env, info, 1, argv);
  st = napi_dlpack_exchange_find(env, argv[0], &api, &object);
  text = st != NAPI_DLPACK_OK ? napi_dlpack_status_code(st) : object != NULL ? "object" : "table";
  CHECK_NAPI(env, napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &result));
  return result;
}

/* borrowCounts() -> { object, value }: CTensor borrows by each path. */
static napi_value borrow_counts(napi_env env, napi_callback_info info) {
  napi_value result, field;
  (void)info;
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_create_int32(env, object_borrows, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "object", field));
  CHECK_NAPI(env, napi_create_int32(env, value_borrows, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "value", field));
  return result;
}

/* ---- consumer: the library adapter (part 4) ------------------------------- */

/* adaptedPointer(value): asks napi-dlpack's library adapter for a capsule of
 * `value` (an ONNX Runtime tensor, an Arrow vector, ...), consumes it, reads
 * the address of its first element and whether it is READ_ONLY, and releases
 * it: { pointer, readonly }, or null when there is no adapter or it did not
 * recognise the value. The adapter's refusal (a coded Error) is passed on. */
static napi_value adapted_pointer(napi_env env, napi_callback_info info) {
  napi_value argv[1], capsule, out, field;
  napi_dlpack_status st;
  uint32_t kind = 0;
  void* taken = NULL;
  DLManagedTensorVersioned* tensor;
  bool pending = false;
  get_args(env, info, 1, argv);
  st = napi_dlpack_adapt(env, argv[0], &capsule);
  if (st != NAPI_DLPACK_OK) {
    napi_is_exception_pending(env, &pending);
    return pending ? NULL : fail_status(env, st);
  }
  if (capsule == NULL) {
    CHECK_NAPI(env, napi_get_null(env, &out));
    return out;
  }
  st = napi_dlpack_capsule_consume(env, capsule, &kind, &taken);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  if (kind != NAPI_DLPACK_KIND_VERSIONED) {
    napi_dlpack_tensor_release(kind, taken);
    THROW(env, "ERR_DLPACK_CAPSULE_ABI", "the adapter's capsule is not versioned");
  }
  tensor = (DLManagedTensorVersioned*)taken;
  CHECK_NAPI(env, napi_create_object(env, &out));
  field = make_bigint(env, (uint64_t)(uintptr_t)tensor->dl_tensor.data +
                               tensor->dl_tensor.byte_offset);
  CHECK_NAPI(env, napi_set_named_property(env, out, "pointer", field));
  CHECK_NAPI(env, napi_get_boolean(env, (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, &field));
  CHECK_NAPI(env, napi_set_named_property(env, out, "readonly", field));
  napi_dlpack_tensor_release(kind, taken);
  return out;
}

/* selectDepth(n) -> whether napi_dlpack_exchange_api_select finds the major-1
 * table at the end of a chain of n tables (the others of major 99). */
static napi_value select_depth(napi_env env, napi_callback_info info) {
  static napi_dlpack_exchange_api_header chain[40];
  napi_value argv[1], result;
  uint32_t n = 0, i;
  get_args(env, info, 1, argv);
  CHECK_NAPI(env, napi_get_value_uint32(env, argv[0], &n));
  if (n < 1 || n > 40) THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "1..40 tables");
  for (i = 0; i < n; i++) {
    chain[i].version.major = i == n - 1 ? NAPI_DLPACK_EXCHANGE_API_MAJOR : 99;
    chain[i].version.minor = 0;
    chain[i].prev_api = i == n - 1 ? NULL : &chain[i + 1];
  }
  CHECK_NAPI(env, napi_get_boolean(env,
                                   napi_dlpack_exchange_api_select(&chain[0]) ==
                                       (const napi_dlpack_exchange_api*)&chain[n - 1],
                                   &result));
  return result;
}

/* installOn(value) -> the status of napi_dlpack_exchange_object_install on
 * `value` (any exception it left is cleared); installFinalized() -> how many
 * of those externals were finalized. The data is static: only the count of
 * finalizer runs matters. */
static napi_dlpack_object install_data = {&ctensor_api.header};
static volatile int install_finalized = 0;

static void install_finalize(NAPI_DLPACK_FINALIZE_ENV env, void* data, void* hint) {
  (void)env;
  (void)data;
  (void)hint;
  __atomic_fetch_add(&install_finalized, 1, __ATOMIC_SEQ_CST);
}

static napi_value install_on(napi_env env, napi_callback_info info) {
  napi_value argv[1], result, ignored;
  bool pending = false;
  napi_dlpack_status st;
  get_args(env, info, 1, argv);
  st = napi_dlpack_exchange_object_install(env, argv[0], NULL, &install_data, install_finalize,
                                           NULL);
  napi_is_exception_pending(env, &pending);
  if (pending) napi_get_and_clear_last_exception(env, &ignored);
  CHECK_NAPI(env, napi_create_int32(env, (int32_t)st, &result));
  return result;
}

static napi_value install_finalized_count(napi_env env, napi_callback_info info) {
  napi_value result;
  (void)info;
  CHECK_NAPI(env, napi_create_int32(env, install_finalized, &result));
  return result;
}

/* ---- keys kept per environment (header part 5) ---------------------------- */

/* This environment's keys (instance data: a worker has its own). */
static napi_dlpack_keys* keys_of(napi_env env) {
  void* data = NULL;
  napi_get_instance_data(env, &data);
  return (napi_dlpack_keys*)data;
}

static void free_keys(napi_env env, void* data, void* hint) {
  (void)hint;
  napi_dlpack_keys_delete(env, (napi_dlpack_keys*)data);
  free(data);
}

/* keyedBorrow(value) -> { sum, pointer } through the _by_key forms with the
 * kept key (borrow, then an owning export, released at once). */
static napi_value keyed_borrow(napi_env env, napi_callback_info info) {
  napi_value argv[1], key, result, field;
  napi_dlpack_borrow borrow;
  napi_dlpack_extent extent;
  DLManagedTensorVersioned* exported = NULL;
  napi_dlpack_status st;
  const float* first;
  double sum = 0;
  int64_t i;
  get_args(env, info, 1, argv);
  if (napi_dlpack_keys_get(env, keys_of(env), &key, NULL) != NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_NAPI", "no keys");
  st = napi_dlpack_exchange_borrow_by_key(env, argv[0], key, &borrow);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  if (napi_dlpack_tensor_extent(&borrow.tensor, borrow.flags, &extent) != NULL ||
      !extent.c_contiguous || borrow.tensor.dtype.code != kDLFloat || borrow.tensor.dtype.bits != 32) {
    napi_dlpack_exchange_release(env, &borrow);
    THROW(env, "ERR_DLPACK_DTYPE_MISMATCH", "expected a contiguous float32 tensor");
  }
  first = (const float*)((const char*)borrow.tensor.data + borrow.tensor.byte_offset);
  for (i = 0; i < extent.numel; i++) sum += first[i];
  napi_dlpack_exchange_release(env, &borrow);
  st = napi_dlpack_exchange_export_by_key(env, argv[0], key, &exported);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  field = make_bigint(env, (uint64_t)(uintptr_t)exported->dl_tensor.data + exported->dl_tensor.byte_offset);
  napi_dlpack_tensor_release(NAPI_DLPACK_KIND_VERSIONED, exported);
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_set_named_property(env, result, "pointer", field));
  CHECK_NAPI(env, napi_create_double(env, sum, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "sum", field));
  return result;
}

/* keyedAdaptedPointer(value): adaptedPointer through napi_dlpack_adapt_by_key. */
static napi_value keyed_adapted_pointer(napi_env env, napi_callback_info info) {
  napi_value argv[1], key, capsule, out;
  napi_dlpack_status st;
  uint32_t kind = 0;
  void* taken = NULL;
  get_args(env, info, 1, argv);
  if (napi_dlpack_keys_get(env, keys_of(env), NULL, &key) != NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_NAPI", "no keys");
  st = napi_dlpack_adapt_by_key(env, argv[0], key, &capsule);
  if (st != NAPI_DLPACK_OK) return NULL; /* the adapter's coded error is pending */
  if (capsule == NULL) {
    CHECK_NAPI(env, napi_get_null(env, &out));
    return out;
  }
  st = napi_dlpack_capsule_consume(env, capsule, &kind, &taken);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  out = make_bigint(env, (uint64_t)(uintptr_t)((DLManagedTensorVersioned*)taken)->dl_tensor.data +
                             ((DLManagedTensorVersioned*)taken)->dl_tensor.byte_offset);
  napi_dlpack_tensor_release(kind, taken);
  return out;
}

/* ---- consumer: borrow by handle id ----------------------------------------- */

/* idBorrowSum(idOrNative) -> { sum, pointer, numel, contiguous, flags }: the
 * id read from a number or an id external, the default importer looked up
 * with the kept key, the extent taken from the producer. A value that is no
 * id is ERR_DLPACK_INVALID_ARGUMENT; a stale id the producer's coded error. */
static napi_value id_borrow_sum(napi_env env, napi_callback_info info) {
  napi_value argv[1], key, result, field;
  const napi_dlpack_exchange_api* api = NULL;
  napi_dlpack_borrow borrow;
  napi_dlpack_extent extent;
  napi_dlpack_status st;
  uint64_t id = 0;
  const float* first;
  double sum = 0;
  int64_t i;
  get_args(env, info, 1, argv);
  st = napi_dlpack_handle_id(env, argv[0], &id);
  if (st != NAPI_DLPACK_OK) THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "not a tensor handle id");
  if (napi_dlpack_keys_get(env, keys_of(env), &key, NULL) != NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_NAPI", "no keys");
  st = napi_dlpack_exchange_default_by_key(env, key, &api);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  st = napi_dlpack_exchange_borrow_id(env, api, id, &borrow, &extent);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  if (!extent.c_contiguous || borrow.tensor.dtype.code != kDLFloat || borrow.tensor.dtype.bits != 32) {
    napi_dlpack_exchange_release(env, &borrow);
    THROW(env, "ERR_DLPACK_DTYPE_MISMATCH", "expected a contiguous float32 tensor");
  }
  first = (const float*)((const char*)borrow.tensor.data + borrow.tensor.byte_offset);
  for (i = 0; i < extent.numel; i++) sum += first[i];
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_create_double(env, sum, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "sum", field));
  CHECK_NAPI(env, napi_set_named_property(
                      env, result, "pointer",
                      make_bigint(env, (uint64_t)(uintptr_t)borrow.tensor.data + borrow.tensor.byte_offset)));
  CHECK_NAPI(env, napi_create_double(env, (double)extent.numel, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "numel", field));
  CHECK_NAPI(env, napi_get_boolean(env, extent.c_contiguous != 0, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "contiguous", field));
  CHECK_NAPI(env, napi_create_double(env, (double)borrow.flags, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "flags", field));
  napi_dlpack_exchange_release(env, &borrow);
  return result;
}

/* idLentTwice(idOrNative) -> { same, pointer, numel, readOnly }: borrows the id
 * twice through the table's borrow_id, reading the producer's record in place
 * (napi_dlpack_lent_tensor): both borrows are the same record, which names the
 * tensor's memory; both are released, the second first. */
static napi_value id_lent_twice(napi_env env, napi_callback_info info) {
  napi_value argv[1], key, result, field;
  const napi_dlpack_exchange_api* api = NULL;
  napi_dlpack_borrow_id_fn borrow_id;
  const napi_dlpack_lent_tensor* first;
  const napi_dlpack_lent_tensor* second;
  napi_dlpack_status st;
  uint64_t id = 0;
  get_args(env, info, 1, argv);
  if (napi_dlpack_handle_id(env, argv[0], &id) != NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "not a tensor handle id");
  if (napi_dlpack_keys_get(env, keys_of(env), &key, NULL) != NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_NAPI", "no keys");
  st = napi_dlpack_exchange_default_by_key(env, key, &api);
  if (st != NAPI_DLPACK_OK) return fail_status(env, st);
  borrow_id = napi_dlpack_exchange_api_id_borrow(api);
  if (borrow_id == NULL) THROW(env, "ERR_DLPACK_NAPI", "the table does not borrow by id");
  first = borrow_id(env, id);
  if (first == NULL) return NULL;
  second = borrow_id(env, id);
  if (second == NULL) {
    api->release_borrow(env, first->keep_alive);
    return NULL;
  }
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_get_boolean(env, first == second, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "same", field));
  CHECK_NAPI(env, napi_set_named_property(
                      env, result, "pointer",
                      make_bigint(env, (uint64_t)(uintptr_t)first->tensor.data + first->tensor.byte_offset)));
  CHECK_NAPI(env, napi_create_double(env, (double)first->extent.numel, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "numel", field));
  CHECK_NAPI(env, napi_get_boolean(env, (first->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, &field));
  CHECK_NAPI(env, napi_set_named_property(env, result, "readOnly", field));
  api->release_borrow(env, second->keep_alive);
  api->release_borrow(env, first->keep_alive);
  return result;
}

/* benchBorrowId(idOrNative): one borrow by id and its release per call, the
 * default importer kept per environment (the hot path of a C consumer). */
static napi_value bench_borrow_id(napi_env env, napi_callback_info info) {
  /* Tables live for the process: one pointer serves every environment that
   * has napi-dlpack loaded (a bench runs on one thread). */
  static const napi_dlpack_exchange_api* api = NULL;
  static napi_dlpack_borrow_id_fn borrow_id = NULL;
  napi_value argv[1], key;
  const napi_dlpack_lent_tensor* lent;
  uint64_t id = 0;
  get_args(env, info, 1, argv);
  if (borrow_id == NULL) {
    if (napi_dlpack_keys_get(env, keys_of(env), &key, NULL) != NAPI_DLPACK_OK ||
        napi_dlpack_exchange_default_by_key(env, key, &api) != NAPI_DLPACK_OK ||
        (borrow_id = napi_dlpack_exchange_api_id_borrow(api)) == NULL)
      THROW(env, "ERR_DLPACK_NAPI", "no default importer that borrows by id");
  }
  if (napi_dlpack_handle_id(env, argv[0], &id) != NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_INVALID_ARGUMENT", "not a tensor handle id");
  /* The record in place: nothing copied. */
  lent = borrow_id(env, id);
  if (lent == NULL) return NULL;
  api->release_borrow(env, lent->keep_alive);
  return NULL;
}

/* For benches/callgrind/header-keys.mjs: one borrow and release per call, the
 * key made per call (benchBorrow) or kept (benchBorrowKeyed); benchFloor does
 * nothing (the cost of the call itself). */
static napi_value bench_borrow(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  napi_dlpack_borrow borrow;
  get_args(env, info, 1, argv);
  if (napi_dlpack_exchange_borrow(env, argv[0], &borrow) != NAPI_DLPACK_OK) THROW(env, "ERR_DLPACK_NAPI", "borrow");
  napi_dlpack_exchange_release(env, &borrow);
  return NULL;
}

static napi_value bench_borrow_keyed(napi_env env, napi_callback_info info) {
  napi_value argv[1], key;
  napi_dlpack_borrow borrow;
  get_args(env, info, 1, argv);
  if (napi_dlpack_keys_get(env, keys_of(env), &key, NULL) != NAPI_DLPACK_OK ||
      napi_dlpack_exchange_borrow_by_key(env, argv[0], key, &borrow) != NAPI_DLPACK_OK)
    THROW(env, "ERR_DLPACK_NAPI", "borrow");
  napi_dlpack_exchange_release(env, &borrow);
  return NULL;
}

static napi_value bench_floor(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  get_args(env, info, 1, argv);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor functions[] = {
      {"borrowSum", NULL, borrow_sum, NULL, NULL, NULL, napi_default, NULL},
      {"borrowScale", NULL, borrow_scale, NULL, NULL, NULL, napi_default, NULL},
      {"borrowStatus", NULL, borrow_status, NULL, NULL, NULL, napi_default, NULL},
      {"borrowInspect", NULL, borrow_inspect, NULL, NULL, NULL, napi_default, NULL},
      {"selectDepth", NULL, select_depth, NULL, NULL, NULL, napi_default, NULL},
      {"keyedBorrow", NULL, keyed_borrow, NULL, NULL, NULL, napi_default, NULL},
      {"keyedAdaptedPointer", NULL, keyed_adapted_pointer, NULL, NULL, NULL, napi_default, NULL},
      {"benchBorrow", NULL, bench_borrow, NULL, NULL, NULL, napi_default, NULL},
      {"benchBorrowKeyed", NULL, bench_borrow_keyed, NULL, NULL, NULL, napi_default, NULL},
      {"benchFloor", NULL, bench_floor, NULL, NULL, NULL, napi_default, NULL},
      {"idBorrowSum", NULL, id_borrow_sum, NULL, NULL, NULL, napi_default, NULL},
      {"idLentTwice", NULL, id_lent_twice, NULL, NULL, NULL, napi_default, NULL},
      {"benchBorrowId", NULL, bench_borrow_id, NULL, NULL, NULL, napi_default, NULL},
      {"installOn", NULL, install_on, NULL, NULL, NULL, napi_default, NULL},
      {"installFinalized", NULL, install_finalized_count, NULL, NULL, NULL, napi_default, NULL},
      {"borrowKeep", NULL, borrow_keep, NULL, NULL, NULL, napi_default, NULL},
      {"keptSum", NULL, kept_sum, NULL, NULL, NULL, napi_default, NULL},
      {"extentOf", NULL, extent_of, NULL, NULL, NULL, napi_default, NULL},
      {"exportHold", NULL, export_hold, NULL, NULL, NULL, napi_default, NULL},
      {"heldFlags", NULL, held_flags, NULL, NULL, NULL, napi_default, NULL},
      {"releaseHeld", NULL, release_held, NULL, NULL, NULL, napi_default, NULL},
      {"makeTensor", NULL, make_tensor, NULL, NULL, NULL, napi_default, NULL},
      {"makeBadTensor", NULL, make_bad_tensor, NULL, NULL, NULL, napi_default, NULL},
      {"deleterCalls", NULL, deleter_count, NULL, NULL, NULL, napi_default, NULL},
      {"lastMadePointer", NULL, last_made_pointer, NULL, NULL, NULL, napi_default, NULL},
      {"currentStream", NULL, current_stream, NULL, NULL, NULL, napi_default, NULL},
      {"liveCTensors", NULL, live_ctensor_count, NULL, NULL, NULL, napi_default, NULL},
      {"forgedObject", NULL, forged_object, NULL, NULL, NULL, napi_default, NULL},
      {"lendingPath", NULL, lending_path, NULL, NULL, NULL, napi_default, NULL},
      {"borrowCounts", NULL, borrow_counts, NULL, NULL, NULL, napi_default, NULL},
      {"adaptedPointer", NULL, adapted_pointer, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_dlpack_keys* keys;
  if (napi_define_properties(env, exports, sizeof functions / sizeof functions[0], functions) !=
      napi_ok)
    return NULL;
  keys = (napi_dlpack_keys*)malloc(sizeof *keys);
  if (keys == NULL || napi_dlpack_keys_create(env, keys) != NAPI_DLPACK_OK ||
      napi_set_instance_data(env, keys, free_keys, NULL) != napi_ok) {
    free(keys);
    return NULL;
  }
  if (define_class(env, exports, "CTensor", &ctensor_api.header) != napi_ok ||
      define_class(env, exports, "BadVersionTensor", &future_api) != napi_ok ||
      define_class(env, exports, "ChainedTensor", &chained_api) != napi_ok)
    return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
