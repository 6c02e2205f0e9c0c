/*
 * c_addon.c - a plain C Node addon used as an independent DLPack peer in
 * napi-dlpack's tests. It links nothing but Node-API and uses only
 * include/napi_dlpack.h, so anything it accepts or produces proves that the
 * Node capsule ABI works across separately built addons.
 *
 * JS API (see __test__/native/c-addon/smoke.mjs for use):
 *   makeTensor(opts)            -> capsule (producer side); opts as in the
 *                                  comment above make_tensor()
 *   deleterCalls() / resetDeleterCalls()
 *   dataPointer(capsule)        -> BigInt data + byte_offset, without consuming
 *   isConsumed(capsule)         -> boolean
 *   consume(capsule)            -> held tensor (consumer side)
 *   heldInfo(held)              -> plain object describing the DLTensor
 *   heldFloat32(held)           -> Float32Array copy in C order
 *   heldWriteFloat32(held, i, v[, force]) -> writes element i (C order)
 *   release(held)               -> boolean: true if a tensor was still held
 *   heldToCapsule(held)         -> capsule (sends the tensor on)
 *   (environment C_ADDON_REPORT_AT_EXIT=1: prints
 *    "c-addon-deleter-calls-at-exit N" from an atexit handler, which runs
 *    after every environment's cleanup hooks: deleters run at teardown count)
 *   releaseAtTeardown()         -> from now on, makeTensor capsules of this
 *                                  environment that are still unconsumed when
 *                                  it ends are released by an env cleanup hook
 *                                  (see "Teardown" below)
 * Errors are JS Errors whose `code` is a stable string, for capsule problems
 * the one napi_dlpack_status_code() gives.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "napi_dlpack.h"

/* ------------------------------------------------------------------------ */
/* Deleter bookkeeping                                                       */

static int64_t g_deleter_calls = 0; /* accessed atomically: any thread */

static void count_deleter_call(void) {
  __atomic_fetch_add(&g_deleter_calls, 1, __ATOMIC_SEQ_CST);
}

static void report_deleter_calls_at_exit(void) {
  printf("c-addon-deleter-calls-at-exit %lld\n",
         (long long)__atomic_load_n(&g_deleter_calls, __ATOMIC_SEQ_CST));
  fflush(stdout);
}

/* Every tensor made by makeTensor is ONE malloc block that starts with the
 * managed struct, so the deleter just frees `self`. */
static void deleter_versioned(DLManagedTensorVersioned* self) {
  count_deleter_call();
  free(self);
}

static void deleter_legacy(DLManagedTensor* self) {
  count_deleter_call();
  free(self);
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

#define MAX_NDIM 1024 /* fixture limit on shape length and ndim */
#define MAX_DATA_BYTES ((int64_t)1 << 30)

static napi_value throw_code(napi_env env, const char* code, const char* msg) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_error(env, code, msg);
  return NULL;
}

static napi_value throw_status(napi_env env, napi_dlpack_status st,
                               const char* what) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s", what, napi_dlpack_status_code(st));
  return throw_code(env, napi_dlpack_status_code(st), msg);
}

#define NAPI_CALL(env, call)                                           \
  do {                                                                 \
    if ((call) != napi_ok)                                             \
      return throw_code((env), "ERR_DLPACK_NAPI", "Node-API call failed: " #call); \
  } while (0)

static napi_value get_args(napi_env env, napi_callback_info info, size_t n,
                           napi_value* argv) {
  size_t argc = n;
  size_t i;
  napi_value undef;
  NAPI_CALL(env, napi_get_undefined(env, &undef));
  for (i = 0; i < n; i++) argv[i] = undef;
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  return undef;
}

static bool is_nullish(napi_env env, napi_value v) {
  napi_valuetype t = napi_undefined;
  if (v == NULL || napi_typeof(env, v, &t) != napi_ok) return true;
  return t == napi_undefined || t == napi_null;
}

/* Property of an object, or NULL if absent/undefined/null. */
static napi_value opt_prop(napi_env env, napi_value obj, const char* name) {
  napi_value v = NULL;
  if (napi_get_named_property(env, obj, name, &v) != napi_ok) return NULL;
  return is_nullish(env, v) ? NULL : v;
}

static bool prop_is_null(napi_env env, napi_value obj, const char* name) {
  napi_value v = NULL;
  napi_valuetype t = napi_undefined;
  if (napi_get_named_property(env, obj, name, &v) != napi_ok) return false;
  if (napi_typeof(env, v, &t) != napi_ok) return false;
  return t == napi_null;
}

/* Number or BigInt -> int64. Returns false if it is neither. */
static bool to_i64(napi_env env, napi_value v, int64_t* out) {
  napi_valuetype t;
  bool lossless;
  if (napi_typeof(env, v, &t) != napi_ok) return false;
  if (t == napi_number) return napi_get_value_int64(env, v, out) == napi_ok;
  if (t == napi_bigint)
    return napi_get_value_bigint_int64(env, v, out, &lossless) == napi_ok;
  return false;
}

static bool to_bool(napi_env env, napi_value v) {
  bool b = false;
  if (v == NULL) return false;
  if (napi_get_value_bool(env, v, &b) != napi_ok) {
    napi_value coerced;
    if (napi_coerce_to_bool(env, v, &coerced) != napi_ok) return false;
    napi_get_value_bool(env, coerced, &b);
  }
  return b;
}

/* Reads an array of at most `cap` integers. */
static bool read_i64_array(napi_env env, napi_value arr, int64_t* out,
                           uint32_t cap, uint32_t* len) {
  bool is_array = false;
  uint32_t n, i;
  if (napi_is_array(env, arr, &is_array) != napi_ok || !is_array) return false;
  if (napi_get_array_length(env, arr, &n) != napi_ok || n > cap)
    return false;
  for (i = 0; i < n; i++) {
    napi_value e;
    if (napi_get_element(env, arr, i, &e) != napi_ok) return false;
    if (!to_i64(env, e, &out[i])) return false;
  }
  *len = n;
  return true;
}

static napi_value make_i64_number_array(napi_env env, const int64_t* v,
                                        uint32_t n) {
  napi_value arr, num;
  uint32_t i;
  NAPI_CALL(env, napi_create_array_with_length(env, n, &arr));
  for (i = 0; i < n; i++) {
    NAPI_CALL(env, napi_create_double(env, (double)v[i], &num));
    NAPI_CALL(env, napi_set_element(env, arr, i, num));
  }
  return arr;
}

/* Byte offset of the element with flat C-order index `k`, relative to
 * data + byte_offset. NULL strides mean compact row-major. */
static int64_t c_order_offset_bytes(int32_t ndim, const int64_t* shape,
                                    const int64_t* strides, int64_t k,
                                    int64_t esize) {
  int64_t off = 0, contiguous = 1;
  int32_t d;
  for (d = ndim - 1; d >= 0; d--) {
    int64_t extent = shape[d];
    int64_t idx = extent > 0 ? k % extent : 0;
    int64_t step = strides != NULL ? strides[d] : contiguous;
    k = extent > 0 ? k / extent : 0;
    off += idx * step;
    contiguous *= extent > 1 ? extent : 1;
  }
  return off * esize;
}

static int64_t numel_of(int32_t ndim, const int64_t* shape) {
  int64_t n = 1;
  int32_t d;
  for (d = 0; d < ndim; d++) n *= shape[d] > 0 ? shape[d] : 0;
  return n;
}

static bool is_float32(DLDataType t) {
  return t.code == kDLFloat && t.bits == 32 && t.lanes == 1;
}

/* ------------------------------------------------------------------------ */
/* Teardown: what a producer does to release its unconsumed capsules when a   */
/* Worker ends in runtimes that do not finalize externals alive at teardown   */
/* (Bun, Deno), but do run env cleanup hooks. Node finalizes them anyway; its */
/* finalizers then find the tensor gone and only free the payload.            */

typedef struct tracked_capsule {
  napi_dlpack_capsule payload; /* first: all a consumer reads */
  struct teardown_list* list;  /* NULL once the cleanup hook has run */
  struct tracked_capsule* prev;
  struct tracked_capsule* next;
} tracked_capsule;

typedef struct teardown_list {
  tracked_capsule* head;
} teardown_list;

/* Only ever touched on the environment's JS thread (finalizer and hook). */
static void tracked_finalize(NAPI_DLPACK_FINALIZE_ENV env, void* data,
                             void* hint) {
  tracked_capsule* c = (tracked_capsule*)data;
  void* tensor;
  (void)env;
  (void)hint;
  if (c->list != NULL) {
    if (c->prev != NULL) c->prev->next = c->next;
    else c->list->head = c->next;
    if (c->next != NULL) c->next->prev = c->prev;
  }
  tensor = NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&c->payload.tensor, NULL);
  napi_dlpack_tensor_release(c->payload.kind, tensor);
  free(c);
}

static void teardown_hook(void* arg) {
  teardown_list* list = (teardown_list*)arg;
  tracked_capsule* c = list->head;
  while (c != NULL) {
    tracked_capsule* next = c->next;
    void* tensor = NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&c->payload.tensor, NULL);
    napi_dlpack_tensor_release(c->payload.kind, tensor);
    /* The payload stays for the finalizer, if the runtime ever runs it. */
    c->list = NULL;
    c = next;
  }
  free(list);
}

static napi_value release_at_teardown(napi_env env, napi_callback_info info) {
  teardown_list* list = NULL;
  napi_value r;
  (void)info;
  NAPI_CALL(env, napi_get_instance_data(env, (void**)&list));
  if (list == NULL) {
    list = (teardown_list*)calloc(1, sizeof *list);
    if (list == NULL)
      return throw_status(env, NAPI_DLPACK_ERR_NO_MEMORY, "releaseAtTeardown");
    if (napi_add_env_cleanup_hook(env, teardown_hook, list) != napi_ok) {
      free(list);
      return throw_status(env, NAPI_DLPACK_ERR_NAPI, "releaseAtTeardown");
    }
    NAPI_CALL(env, napi_set_instance_data(env, list, NULL, NULL));
  }
  NAPI_CALL(env, napi_get_undefined(env, &r));
  return r;
}

/* Like napi_dlpack_capsule_create, but the capsule joins this environment's
 * teardown list. Same contract: on failure the caller still owns `tensor`. */
static napi_dlpack_status tracked_capsule_create(napi_env env,
                                                 teardown_list* list,
                                                 uint32_t kind, void* tensor,
                                                 napi_value* result) {
  napi_value value;
  tracked_capsule* c = (tracked_capsule*)calloc(1, sizeof *c);
  if (c == NULL) return NAPI_DLPACK_ERR_NO_MEMORY;
  c->payload.abi_version = NAPI_DLPACK_CAPSULE_ABI_VERSION;
  c->payload.kind = kind;
  c->payload.tensor = tensor;
  if (napi_create_external(env, c, tracked_finalize, NULL, &value) != napi_ok) {
    free(c);
    return NAPI_DLPACK_ERR_NAPI;
  }
  if (napi_type_tag_object(env, value, napi_dlpack_capsule_tag()) != napi_ok) {
    (void)NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&c->payload.tensor, NULL);
    return NAPI_DLPACK_ERR_NAPI; /* not linked: the finalizer frees it */
  }
  c->list = list;
  c->next = list->head;
  if (list->head != NULL) list->head->prev = c;
  list->head = c;
  *result = value;
  return NAPI_DLPACK_OK;
}

/* ------------------------------------------------------------------------ */
/* makeTensor                                                                */
/*
 * makeTensor({
 *   dtype?: {code, bits, lanes}   default float32 {2, 32, 1}; any values
 *   device?: [type, id]           default [1, 0] (kDLCPU; memory is host
 *                                  memory whatever is claimed here)
 *   shape: (number|bigint)[]      dims; negative/zero allowed (malformed)
 *   strides?: (number|bigint)[] | null
 *                                 undefined: compact row-major strides stored;
 *                                 null: NULL strides pointer; array: as given
 *                                 (elements, may be negative or 0)
 *   byteOffset?: number           default 0
 *   versioned: boolean            DLManagedTensorVersioned vs DLManagedTensor
 *   readonly?: boolean            ORs DLPACK_FLAG_BITMASK_READ_ONLY into flags
 *   flags?: number                raw flags (versioned only)
 *   version?: [major, minor]      default [1, 3] (versioned only); any value
 *   fill?: 'iota' | 'none'        default 'iota': float32 element with C-order
 *                                 index k holds k (so a strided tensor still
 *                                 reads 0,1,2,... logically); other dtypes get
 *                                 bytes 0,1,2,... over the data region.
 *                                 'none': zeros.
 *   nullData?: boolean            data = NULL (no data region at all)
 *   nullShape?: boolean           shape = NULL
 *   ndim?: number                 overrides ndim (shape length by default).
 *                                 The shape/strides arrays always hold
 *                                 max(ndim, shape.length) entries, extra ones
 *                                 being 1, so reading `ndim` entries stays
 *                                 inside the block.
 *   nullDeleter?: boolean         deleter = NULL. Nobody can then free the
 *                                 block: it LEAKS on purpose, and no deleter
 *                                 call is counted.
 * }) -> capsule
 *
 * Everything lives in one calloc'd block: managed struct, shape, strides,
 * data region. The data region spans every element the shape/strides reach
 * (negative strides included: `data` is placed so that they stay inside it),
 * plus byteOffset, at least 1 byte. The deleter counts itself and frees the
 * block.
 */

static napi_value make_tensor(napi_env env, napi_callback_info info) {
  napi_value argv[1], v, capsule;
  napi_valuetype t;
  int64_t shape_in[MAX_NDIM], strides_in[MAX_NDIM];
  uint32_t len = 0, slen = 0, n_alloc, i;
  bool versioned, has_strides, null_strides, null_data, null_shape,
      null_deleter, fill_iota = true;
  int64_t ndim_field, byte_offset = 0, flags = 0, esize, min_off = 0,
                      max_off = 0, numel, span, region_bytes;
  uint32_t ver_major = DLPACK_MAJOR_VERSION, ver_minor = DLPACK_MINOR_VERSION;
  DLDataType dtype;
  DLDevice device;
  size_t head, arrays_at, data_at, total;
  unsigned char* block;
  DLTensor* tensor;
  int64_t *shape_p, *strides_p;
  unsigned char* region;
  napi_dlpack_status st;

  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if (napi_typeof(env, argv[0], &t) != napi_ok || t != napi_object)
    return throw_code(env, "ERR_INVALID_ARG_TYPE",
                      "makeTensor expects an options object");

  dtype.code = kDLFloat;
  dtype.bits = 32;
  dtype.lanes = 1;
  if ((v = opt_prop(env, argv[0], "dtype")) != NULL) {
    napi_value c = opt_prop(env, v, "code"), b = opt_prop(env, v, "bits"),
               l = opt_prop(env, v, "lanes");
    int64_t x;
    if (c != NULL && to_i64(env, c, &x)) dtype.code = (uint8_t)x;
    if (b != NULL && to_i64(env, b, &x)) dtype.bits = (uint8_t)x;
    if (l != NULL && to_i64(env, l, &x)) dtype.lanes = (uint16_t)x;
  }
  device.device_type = kDLCPU;
  device.device_id = 0;
  if ((v = opt_prop(env, argv[0], "device")) != NULL) {
    int64_t dev[2];
    uint32_t n = 0;
    if (!read_i64_array(env, v, dev, 2, &n) || n != 2)
      return throw_code(env, "ERR_INVALID_ARG_TYPE",
                        "makeTensor: device must be [type, id]");
    device.device_type = (DLDeviceType)dev[0];
    device.device_id = (int32_t)dev[1];
  }

  if ((v = opt_prop(env, argv[0], "shape")) == NULL ||
      !read_i64_array(env, v, shape_in, MAX_NDIM, &len))
    return throw_code(env, "ERR_INVALID_ARG_TYPE",
                      "makeTensor: shape must be an array of integers");
  null_strides = prop_is_null(env, argv[0], "strides");
  has_strides = false;
  if ((v = opt_prop(env, argv[0], "strides")) != NULL) {
    if (!read_i64_array(env, v, strides_in, MAX_NDIM, &slen) || slen != len)
      return throw_code(env, "ERR_INVALID_ARG_TYPE",
                        "makeTensor: strides must be null or an integer "
                        "array as long as shape");
    has_strides = true;
  }
  if (!has_strides) {
    /* compact row-major strides, used for the extent (and stored unless
     * strides: null was asked for) */
    int64_t c = 1;
    for (i = len; i-- > 0;) {
      strides_in[i] = c;
      c *= shape_in[i] > 1 ? shape_in[i] : 1;
    }
  }
  if ((v = opt_prop(env, argv[0], "byteOffset")) != NULL) {
    if (!to_i64(env, v, &byte_offset) || byte_offset < 0 ||
        byte_offset > MAX_DATA_BYTES)
      return throw_code(env, "ERR_OUT_OF_RANGE",
                        "makeTensor: bad byteOffset");
  }
  versioned = to_bool(env, opt_prop(env, argv[0], "versioned"));
  if ((v = opt_prop(env, argv[0], "flags")) != NULL) to_i64(env, v, &flags);
  if (to_bool(env, opt_prop(env, argv[0], "readonly")))
    flags |= (int64_t)DLPACK_FLAG_BITMASK_READ_ONLY;
  if ((v = opt_prop(env, argv[0], "version")) != NULL) {
    int64_t vv[2];
    uint32_t n = 0;
    if (!read_i64_array(env, v, vv, 2, &n) || n != 2)
      return throw_code(env, "ERR_INVALID_ARG_TYPE",
                        "makeTensor: version must be [major, minor]");
    ver_major = (uint32_t)vv[0];
    ver_minor = (uint32_t)vv[1];
  }
  if ((v = opt_prop(env, argv[0], "fill")) != NULL) {
    char buf[16] = {0};
    size_t got = 0;
    if (napi_get_value_string_utf8(env, v, buf, sizeof buf, &got) != napi_ok)
      return throw_code(env, "ERR_INVALID_ARG_TYPE",
                        "makeTensor: fill must be 'iota' or 'none'");
    if (strcmp(buf, "none") == 0)
      fill_iota = false;
    else if (strcmp(buf, "iota") != 0)
      return throw_code(env, "ERR_INVALID_ARG_VALUE",
                        "makeTensor: fill must be 'iota' or 'none'");
  }
  null_data = to_bool(env, opt_prop(env, argv[0], "nullData"));
  null_shape = to_bool(env, opt_prop(env, argv[0], "nullShape"));
  null_deleter = to_bool(env, opt_prop(env, argv[0], "nullDeleter"));
  ndim_field = len;
  if ((v = opt_prop(env, argv[0], "ndim")) != NULL) {
    if (!to_i64(env, v, &ndim_field) || ndim_field < INT32_MIN ||
        ndim_field > INT32_MAX)
      return throw_code(env, "ERR_OUT_OF_RANGE", "makeTensor: bad ndim");
    if (ndim_field > MAX_NDIM)
      return throw_code(env, "ERR_OUT_OF_RANGE",
                        "makeTensor: ndim above the fixture's limit");
  }

  /* Extent of the data in elements, relative to element 0. */
  esize = ((int64_t)dtype.bits * dtype.lanes + 7) / 8;
  numel = 1;
  for (i = 0; i < len; i++) {
    if (shape_in[i] <= 0) numel = 0;
  }
  if (numel != 0) {
    double dspan = 1, dnumel = 1;
    for (i = 0; i < len; i++) {
      double reach = (double)(shape_in[i] - 1) * (double)strides_in[i];
      dnumel *= (double)shape_in[i];
      dspan += fabs(reach);
    }
    if (dnumel * (double)(esize ? esize : 1) > (double)MAX_DATA_BYTES ||
        dspan * (double)(esize ? esize : 1) > (double)MAX_DATA_BYTES)
      return throw_code(env, "ERR_OUT_OF_RANGE",
                        "makeTensor: tensor too large for the fixture");
    for (i = 0; i < len; i++) {
      int64_t reach = (shape_in[i] - 1) * strides_in[i];
      if (reach > 0) max_off += reach;
      else min_off += reach;
    }
    numel = (int64_t)dnumel;
  }
  span = numel == 0 ? 0 : max_off - min_off + 1;
  region_bytes = null_data ? 0 : byte_offset + span * esize;
  if (region_bytes < 1 && !null_data) region_bytes = 1;

  /* One block: managed struct | shape | strides | (pad to 64) data region */
  n_alloc = len;
  if (ndim_field > (int64_t)n_alloc) n_alloc = (uint32_t)ndim_field;
  head = versioned ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor);
  arrays_at = (head + 15) & ~(size_t)15;
  data_at = (arrays_at + 2 * sizeof(int64_t) * (size_t)n_alloc + 63) &
            ~(size_t)63;
  total = data_at + (size_t)region_bytes;
  block = (unsigned char*)calloc(1, total);
  if (block == NULL)
    return throw_code(env, "ERR_DLPACK_NO_MEMORY", "makeTensor: out of memory");
  shape_p = (int64_t*)(void*)(block + arrays_at);
  strides_p = shape_p + n_alloc;
  for (i = 0; i < n_alloc; i++) {
    /* Entries past the given shape (ndim override) read as size-1 dims. */
    shape_p[i] = i < len ? shape_in[i] : 1;
    strides_p[i] = i < len ? strides_in[i] : 1;
  }
  region = block + data_at;

  if (versioned) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)(void*)block;
    m->version.major = ver_major;
    m->version.minor = ver_minor;
    m->manager_ctx = block;
    m->deleter = null_deleter ? NULL : deleter_versioned;
    m->flags = (uint64_t)flags;
    tensor = &m->dl_tensor;
  } else {
    DLManagedTensor* m = (DLManagedTensor*)(void*)block;
    m->manager_ctx = block;
    m->deleter = null_deleter ? NULL : deleter_legacy;
    tensor = &m->dl_tensor;
  }
  /* data points at the lowest-addressed element's base so that negative
   * strides stay inside the region */
  tensor->data = null_data ? NULL : (void*)(region + (-min_off) * esize);
  tensor->device = device;
  tensor->ndim = (int32_t)ndim_field;
  tensor->dtype = dtype;
  tensor->shape = null_shape ? NULL : shape_p;
  tensor->strides = null_strides ? NULL : strides_p;
  tensor->byte_offset = (uint64_t)byte_offset;

  if (fill_iota && !null_data) {
    if (is_float32(dtype)) {
      unsigned char* first = (unsigned char*)tensor->data + byte_offset;
      int64_t k;
      for (k = 0; k < numel; k++) {
        float f = (float)k;
        int64_t off = c_order_offset_bytes((int32_t)len, shape_in,
                                           strides_in, k, 4);
        memcpy(first + off, &f, sizeof f);
      }
    } else {
      int64_t b;
      for (b = 0; b < region_bytes; b++) region[b] = (unsigned char)b;
    }
  }

  {
    uint32_t kind =
        versioned ? NAPI_DLPACK_KIND_VERSIONED : NAPI_DLPACK_KIND_LEGACY;
    teardown_list* list = NULL;
    if (napi_get_instance_data(env, (void**)&list) != napi_ok) list = NULL;
    st = list != NULL ? tracked_capsule_create(env, list, kind, block, &capsule)
                      : napi_dlpack_capsule_create(env, kind, block, &capsule);
  }
  if (st != NAPI_DLPACK_OK) {
    free(block); /* ownership stayed with us; not counted as a deleter call */
    return throw_status(env, st, "makeTensor");
  }
  return capsule;
}

/* ------------------------------------------------------------------------ */
/* Counters                                                                  */

static napi_value deleter_calls(napi_env env, napi_callback_info info) {
  napi_value r;
  (void)info;
  NAPI_CALL(env, napi_create_double(
                     env,
                     (double)__atomic_load_n(&g_deleter_calls, __ATOMIC_SEQ_CST),
                     &r));
  return r;
}

static napi_value reset_deleter_calls(napi_env env, napi_callback_info info) {
  napi_value r;
  (void)info;
  __atomic_store_n(&g_deleter_calls, 0, __ATOMIC_SEQ_CST);
  NAPI_CALL(env, napi_get_undefined(env, &r));
  return r;
}

/* ------------------------------------------------------------------------ */
/* Capsule inspection without consuming                                      */

static napi_value data_pointer(napi_env env, napi_callback_info info) {
  napi_value argv[1], r;
  void* ext = NULL;
  napi_dlpack_capsule* payload;
  void* t;
  DLTensor* dl;
  napi_dlpack_status st;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  st = napi_dlpack_capsule_check(env, argv[0]);
  if (st != NAPI_DLPACK_OK) return throw_status(env, st, "dataPointer");
  NAPI_CALL(env, napi_get_value_external(env, argv[0], &ext));
  payload = (napi_dlpack_capsule*)ext;
  if (payload->abi_version != NAPI_DLPACK_CAPSULE_ABI_VERSION)
    return throw_status(env, NAPI_DLPACK_ERR_ABI_VERSION, "dataPointer");
  t = NAPI_DLPACK_ATOMIC_LOAD_PTR(&payload->tensor);
  if (t == NULL)
    return throw_status(env, NAPI_DLPACK_ERR_CONSUMED, "dataPointer");
  if (payload->kind == NAPI_DLPACK_KIND_VERSIONED) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)t;
    if (m->version.major != DLPACK_MAJOR_VERSION)
      return throw_code(env, "ERR_DLPACK_VERSION",
                        "dataPointer: unsupported DLPack major version");
    dl = &m->dl_tensor;
  } else if (payload->kind == NAPI_DLPACK_KIND_LEGACY) {
    dl = &((DLManagedTensor*)t)->dl_tensor;
  } else {
    return throw_status(env, NAPI_DLPACK_ERR_ABI_VERSION, "dataPointer");
  }
  NAPI_CALL(env, napi_create_bigint_uint64(
                     env, (uint64_t)(uintptr_t)dl->data + dl->byte_offset,
                     &r));
  return r;
}

static napi_value is_consumed(napi_env env, napi_callback_info info) {
  napi_value argv[1], r;
  int consumed = 0;
  napi_dlpack_status st;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  st = napi_dlpack_capsule_is_consumed(env, argv[0], &consumed);
  if (st != NAPI_DLPACK_OK) return throw_status(env, st, "isConsumed");
  NAPI_CALL(env, napi_get_boolean(env, consumed != 0, &r));
  return r;
}

/* ------------------------------------------------------------------------ */
/* Held tensors: what this addon owns after consuming a capsule              */

typedef struct {
  uint32_t kind;
  void* tensor; /* owned; NULL once released or passed on; atomic access */
} held_tensor;

static const napi_type_tag k_held_tag = {0x5d1f0c3a9b7e4a21ULL,
                                         0x8c4e2f6a1d3b7c95ULL};

static void held_finalize(NAPI_DLPACK_FINALIZE_ENV env, void* data,
                          void* hint) {
  held_tensor* h = (held_tensor*)data;
  (void)env;
  (void)hint;
  napi_dlpack_tensor_release(h->kind,
                             NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&h->tensor, NULL));
  free(h);
}

/* The held_tensor behind a JS value, or NULL with an exception pending. */
static held_tensor* get_held(napi_env env, napi_value v) {
  napi_valuetype t;
  bool ok = false;
  void* data = NULL;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_external ||
      napi_check_object_type_tag(env, v, &k_held_tag, &ok) != napi_ok ||
      !ok || napi_get_value_external(env, v, &data) != napi_ok) {
    throw_code(env, "ERR_DLPACK_INVALID_ARGUMENT", "not a held tensor");
    return NULL;
  }
  return (held_tensor*)data;
}

/* The DLTensor of a held tensor that is still owned and readable, or NULL
 * with an exception pending. Versioned tensors of another major version are
 * refused (only their deleter may be used). */
static DLTensor* held_dl(napi_env env, napi_value v, held_tensor** out,
                         uint64_t* flags) {
  held_tensor* h = get_held(env, v);
  void* t;
  if (h == NULL) return NULL;
  t = NAPI_DLPACK_ATOMIC_LOAD_PTR(&h->tensor);
  if (out != NULL) *out = h;
  if (t == NULL) {
    throw_code(env, "ERR_DLPACK_HELD_EMPTY", "held tensor already released");
    return NULL;
  }
  if (flags != NULL) *flags = 0;
  if (h->kind == NAPI_DLPACK_KIND_VERSIONED) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)t;
    if (m->version.major != DLPACK_MAJOR_VERSION) {
      throw_code(env, "ERR_DLPACK_VERSION", "unsupported DLPack major version");
      return NULL;
    }
    if (flags != NULL) *flags = m->flags;
    return &m->dl_tensor;
  }
  return &((DLManagedTensor*)t)->dl_tensor;
}

static napi_value consume(napi_env env, napi_callback_info info) {
  napi_value argv[1], r;
  uint32_t kind = 0;
  void* tensor = NULL;
  held_tensor* h;
  napi_dlpack_status st;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  st = napi_dlpack_capsule_consume(env, argv[0], &kind, &tensor);
  if (st != NAPI_DLPACK_OK) return throw_status(env, st, "consume");
  /* From here on we own the tensor: every failure path must release it. */
  h = (held_tensor*)malloc(sizeof *h);
  if (h == NULL) {
    napi_dlpack_tensor_release(kind, tensor);
    return throw_status(env, NAPI_DLPACK_ERR_NO_MEMORY, "consume");
  }
  h->kind = kind;
  h->tensor = tensor;
  if (napi_create_external(env, h, held_finalize, NULL, &r) != napi_ok) {
    napi_dlpack_tensor_release(kind, tensor);
    free(h);
    return throw_status(env, NAPI_DLPACK_ERR_NAPI, "consume");
  }
  if (napi_type_tag_object(env, r, &k_held_tag) != napi_ok) {
    /* the finalizer will release the tensor when the external is collected;
     * release it now instead so the failure is deterministic */
    napi_dlpack_tensor_release(
        kind, NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&h->tensor, NULL));
    return throw_status(env, NAPI_DLPACK_ERR_NAPI, "consume");
  }
  return r;
}

static napi_value held_info(napi_env env, napi_callback_info info) {
  napi_value argv[1], obj, v, arr;
  held_tensor* h = NULL;
  DLTensor* dl;
  uint64_t flags = 0;
  void* t;
  uint32_t n;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  h = get_held(env, argv[0]);
  if (h == NULL) return NULL;
  t = NAPI_DLPACK_ATOMIC_LOAD_PTR(&h->tensor);
  if (t == NULL)
    return throw_code(env, "ERR_DLPACK_HELD_EMPTY",
                      "held tensor already released");
  NAPI_CALL(env, napi_create_object(env, &obj));
  NAPI_CALL(env, napi_get_boolean(env, h->kind == NAPI_DLPACK_KIND_VERSIONED, &v));
  NAPI_CALL(env, napi_set_named_property(env, obj, "versioned", v));
  if (h->kind == NAPI_DLPACK_KIND_VERSIONED) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)t;
    napi_value x;
    NAPI_CALL(env, napi_create_array_with_length(env, 2, &arr));
    NAPI_CALL(env, napi_create_uint32(env, m->version.major, &x));
    NAPI_CALL(env, napi_set_element(env, arr, 0, x));
    NAPI_CALL(env, napi_create_uint32(env, m->version.minor, &x));
    NAPI_CALL(env, napi_set_element(env, arr, 1, x));
    NAPI_CALL(env, napi_set_named_property(env, obj, "version", arr));
    if (m->version.major != DLPACK_MAJOR_VERSION) {
      /* Another major version: nothing past `deleter` may be read. */
      return obj;
    }
    flags = m->flags;
    dl = &m->dl_tensor;
  } else {
    NAPI_CALL(env, napi_get_null(env, &v));
    NAPI_CALL(env, napi_set_named_property(env, obj, "version", v));
    dl = &((DLManagedTensor*)t)->dl_tensor;
  }
  NAPI_CALL(env, napi_create_double(env, (double)flags, &v));
  NAPI_CALL(env, napi_set_named_property(env, obj, "flags", v));
  NAPI_CALL(env, napi_create_int32(env, dl->ndim, &v));
  NAPI_CALL(env, napi_set_named_property(env, obj, "ndim", v));
  n = dl->ndim > 0 ? (uint32_t)dl->ndim : 0;
  if (dl->shape == NULL) {
    NAPI_CALL(env, napi_get_null(env, &v));
  } else if ((v = make_i64_number_array(env, dl->shape, n)) == NULL) {
    return NULL;
  }
  NAPI_CALL(env, napi_set_named_property(env, obj, "shape", v));
  if (dl->strides == NULL) {
    NAPI_CALL(env, napi_get_null(env, &v));
  } else if ((v = make_i64_number_array(env, dl->strides, n)) == NULL) {
    return NULL;
  }
  NAPI_CALL(env, napi_set_named_property(env, obj, "strides", v));
  NAPI_CALL(env, napi_create_double(env, (double)dl->byte_offset, &v));
  NAPI_CALL(env, napi_set_named_property(env, obj, "byteOffset", v));
  {
    napi_value dt, x;
    NAPI_CALL(env, napi_create_object(env, &dt));
    NAPI_CALL(env, napi_create_uint32(env, dl->dtype.code, &x));
    NAPI_CALL(env, napi_set_named_property(env, dt, "code", x));
    NAPI_CALL(env, napi_create_uint32(env, dl->dtype.bits, &x));
    NAPI_CALL(env, napi_set_named_property(env, dt, "bits", x));
    NAPI_CALL(env, napi_create_uint32(env, dl->dtype.lanes, &x));
    NAPI_CALL(env, napi_set_named_property(env, dt, "lanes", x));
    NAPI_CALL(env, napi_set_named_property(env, obj, "dtype", dt));
    NAPI_CALL(env, napi_create_array_with_length(env, 2, &arr));
    NAPI_CALL(env, napi_create_int32(env, (int32_t)dl->device.device_type, &x));
    NAPI_CALL(env, napi_set_element(env, arr, 0, x));
    NAPI_CALL(env, napi_create_int32(env, dl->device.device_id, &x));
    NAPI_CALL(env, napi_set_element(env, arr, 1, x));
    NAPI_CALL(env, napi_set_named_property(env, obj, "device", arr));
  }
  NAPI_CALL(env, napi_create_bigint_uint64(env, (uint64_t)(uintptr_t)dl->data, &v));
  NAPI_CALL(env, napi_set_named_property(env, obj, "data", v));
  return obj;
}

/* Checks that a held tensor can be read as float32 host memory. */
static DLTensor* held_f32(napi_env env, napi_value v, uint64_t* flags,
                          int64_t* numel) {
  DLTensor* dl = held_dl(env, v, NULL, flags);
  if (dl == NULL) return NULL;
  if (!is_float32(dl->dtype)) {
    throw_code(env, "ERR_DLPACK_DTYPE", "held tensor is not float32");
    return NULL;
  }
  if (dl->device.device_type != kDLCPU) {
    throw_code(env, "ERR_DLPACK_DEVICE", "held tensor is not on the CPU");
    return NULL;
  }
  if (dl->ndim < 0 || (dl->ndim > 0 && dl->shape == NULL)) {
    throw_code(env, "ERR_DLPACK_INVALID_TENSOR", "bad ndim/shape");
    return NULL;
  }
  *numel = numel_of(dl->ndim, dl->shape);
  if (*numel > 0 && dl->data == NULL) {
    throw_code(env, "ERR_DLPACK_INVALID_TENSOR", "NULL data, non-zero size");
    return NULL;
  }
  return dl;
}

static napi_value held_float32(napi_env env, napi_callback_info info) {
  napi_value argv[1], ab, ta;
  void* out = NULL;
  int64_t numel = 0, k;
  DLTensor* dl;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if ((dl = held_f32(env, argv[0], NULL, &numel)) == NULL) return NULL;
  if (numel > MAX_DATA_BYTES / 4)
    return throw_code(env, "ERR_OUT_OF_RANGE", "tensor too large");
  NAPI_CALL(env, napi_create_arraybuffer(env, (size_t)numel * 4, &out, &ab));
  for (k = 0; k < numel; k++) {
    const unsigned char* first =
        (const unsigned char*)dl->data + dl->byte_offset;
    memcpy((float*)out + k,
           first + c_order_offset_bytes(dl->ndim, dl->shape, dl->strides, k, 4),
           sizeof(float));
  }
  NAPI_CALL(env, napi_create_typedarray(env, napi_float32_array, (size_t)numel,
                                        ab, 0, &ta));
  return ta;
}

static napi_value held_write_float32(napi_env env, napi_callback_info info) {
  napi_value argv[4], r;
  int64_t numel = 0, index = 0;
  double value = 0;
  uint64_t flags = 0;
  float f;
  DLTensor* dl;
  if (get_args(env, info, 4, argv) == NULL) return NULL;
  if ((dl = held_f32(env, argv[0], &flags, &numel)) == NULL) return NULL;
  if (!to_i64(env, argv[1], &index) || index < 0 || index >= numel)
    return throw_code(env, "ERR_OUT_OF_RANGE", "index out of range");
  if (napi_get_value_double(env, argv[2], &value) != napi_ok)
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "value must be a number");
  if ((flags & DLPACK_FLAG_BITMASK_READ_ONLY) && !to_bool(env, argv[3]))
    return throw_code(env, "ERR_DLPACK_READ_ONLY",
                      "tensor is flagged read-only (pass force=true)");
  f = (float)value;
  memcpy((unsigned char*)dl->data + dl->byte_offset +
             c_order_offset_bytes(dl->ndim, dl->shape, dl->strides, index, 4),
         &f, sizeof f);
  NAPI_CALL(env, napi_get_undefined(env, &r));
  return r;
}

static napi_value release(napi_env env, napi_callback_info info) {
  napi_value argv[1], r;
  held_tensor* h;
  void* t;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if ((h = get_held(env, argv[0])) == NULL) return NULL;
  t = NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&h->tensor, NULL);
  napi_dlpack_tensor_release(h->kind, t);
  NAPI_CALL(env, napi_get_boolean(env, t != NULL, &r));
  return r;
}

/* Runs the deleter on a new thread (joined before returning): DLPack deleters may be called
 * from any thread, and a producer that keeps JS memory alive must cope with that. */
typedef struct {
  uint32_t kind;
  void* tensor;
} release_job;

static void* release_job_run(void* arg) {
  release_job* job = (release_job*)arg;
  napi_dlpack_tensor_release(job->kind, job->tensor);
  return NULL;
}

static napi_value release_on_thread(napi_env env, napi_callback_info info) {
  napi_value argv[1], r;
  held_tensor* h;
  release_job job;
  pthread_t thread;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if ((h = get_held(env, argv[0])) == NULL) return NULL;
  job.kind = h->kind;
  job.tensor = NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&h->tensor, NULL);
  if (job.tensor != NULL) {
    if (pthread_create(&thread, NULL, release_job_run, &job) != 0) {
      (void)NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&h->tensor, job.tensor);
      return throw_code(env, "ERR_C_ADDON_THREAD", "pthread_create failed");
    }
    pthread_join(thread, NULL);
  }
  NAPI_CALL(env, napi_get_boolean(env, job.tensor != NULL, &r));
  return r;
}

static napi_value held_to_capsule(napi_env env, napi_callback_info info) {
  napi_value argv[1], r;
  held_tensor* h;
  void* t;
  napi_dlpack_status st;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if ((h = get_held(env, argv[0])) == NULL) return NULL;
  t = NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&h->tensor, NULL);
  if (t == NULL)
    return throw_code(env, "ERR_DLPACK_HELD_EMPTY",
                      "held tensor already released");
  st = napi_dlpack_capsule_create(env, h->kind, t, &r);
  if (st != NAPI_DLPACK_OK) {
    /* ownership stayed with us: put it back */
    (void)NAPI_DLPACK_ATOMIC_EXCHANGE_PTR(&h->tensor, t);
    return throw_status(env, st, "heldToCapsule");
  }
  return r;
}

/* ------------------------------------------------------------------------ */

/* Defined in the sections appended below NAPI_MODULE_INIT. */
static napi_value register_protocol_edges(napi_env env, napi_value exports);
static napi_value register_large_tensor_fns(napi_env env, napi_value exports);
/* Defined in the "Hostile layouts" section at the end of this file. */
static bool register_hostile_layouts(napi_env env, napi_value exports);

/* A function the addon exports, and the one loop that exports a table of them (each section
 * of this file registers its own table). */
typedef struct {
  const char* name;
  napi_callback cb;
} c_addon_fn;

static bool export_fns(napi_env env, napi_value exports, const c_addon_fn* fns,
                       size_t count) {
  size_t i;
  for (i = 0; i < count; i++) {
    napi_value fn;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb,
                             NULL, &fn) != napi_ok ||
        napi_set_named_property(env, exports, fns[i].name, fn) != napi_ok)
      return false;
  }
  return true;
}

NAPI_MODULE_INIT() {
  static const c_addon_fn fns[] = {
      {"makeTensor", make_tensor},
      {"deleterCalls", deleter_calls},
      {"resetDeleterCalls", reset_deleter_calls},
      {"dataPointer", data_pointer},
      {"isConsumed", is_consumed},
      {"consume", consume},
      {"heldInfo", held_info},
      {"heldFloat32", held_float32},
      {"heldWriteFloat32", held_write_float32},
      {"release", release},
      {"releaseOnThread", release_on_thread},
      {"heldToCapsule", held_to_capsule},
      {"releaseAtTeardown", release_at_teardown},
  };
  if (!export_fns(env, exports, fns, sizeof fns / sizeof fns[0]))
    return throw_code(env, "ERR_DLPACK_NAPI", "Node-API call failed: export_fns");
  static int report_registered = 0; /* once per process, whichever env loads us first */
  const char* report = getenv("C_ADDON_REPORT_AT_EXIT");
  if (report != NULL && strcmp(report, "1") == 0 &&
      !__atomic_exchange_n(&report_registered, 1, __ATOMIC_SEQ_CST))
    atexit(report_deleter_calls_at_exit);
  return register_protocol_edges(env, exports);
}

/* ======================================================================== */
/* Protocol edge cases (docs/protocol.md §2): values that look like capsules */
/* but are not, capsules of another ABI, the stable prefix of another major  */
/* version, misaligned shape/strides arrays, deleters on foreign threads.    */
/*                                                                          */
/*   makeOddCapsule({ tag?: 'capsule'|'none'|'other', nullPayload?, abi?,   */
/*                    kind?, tensor?: 'null'|'poison' }) -> External         */
/*       a hand-made external; 'poison' puts an address no one may          */
/*       dereference into `tensor`, so only code that reads nothing past    */
/*       the checks survives. Its finalizer frees the payload only.         */
/*   checkCapsule(v)       -> napi_dlpack_status_code(capsule_check(v))     */
/*   payloadTensor(v)      -> BigInt: the raw `tensor` field of an odd      */
/*                            capsule (is it still untouched?)              */
/*   makePrefixOnlyTensor([major, minor]) -> capsule of a versioned tensor  */
/*       whose allocation is only the stable prefix (version, manager_ctx,  */
/*       deleter): 24 bytes; counts in deleterCalls()                       */
/*   makeMisalignedArrays('shape'|'strides') -> capsule of a float32 [2]    */
/*       tensor whose shape or strides pointer is 4 bytes off alignment     */
/*   makeThreadTrackedTensor() -> capsule of a float32 [4] tensor whose     */
/*       deleter records the thread it runs on                              */
/*   trackedDeleterStats() -> { calls, offThread }                          */
/* ======================================================================== */

#define ODD_POISON ((void*)(uintptr_t)0x10)

static const napi_type_tag k_other_tag = {0x0123456789abcdefULL,
                                          0xfedcba9876543210ULL};

static void odd_finalize(NAPI_DLPACK_FINALIZE_ENV env, void* data,
                         void* hint) {
  (void)env;
  (void)hint;
  free(data); /* never the tensor: it is NULL or a poison address */
}

static napi_value make_odd_capsule(napi_env env, napi_callback_info info) {
  napi_value argv[1], v, r;
  napi_dlpack_capsule* payload = NULL;
  const napi_type_tag* tag = napi_dlpack_capsule_tag();
  int64_t x;
  char buf[16] = {0};
  size_t got = 0;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if ((v = opt_prop(env, argv[0], "tag")) != NULL) {
    NAPI_CALL(env, napi_get_value_string_utf8(env, v, buf, sizeof buf, &got));
    if (strcmp(buf, "none") == 0)
      tag = NULL;
    else if (strcmp(buf, "other") == 0)
      tag = &k_other_tag;
  }
  if (!to_bool(env, opt_prop(env, argv[0], "nullPayload"))) {
    payload = (napi_dlpack_capsule*)malloc(sizeof *payload);
    if (payload == NULL)
      return throw_code(env, "ERR_DLPACK_NO_MEMORY", "makeOddCapsule");
    payload->abi_version = NAPI_DLPACK_CAPSULE_ABI_VERSION;
    payload->kind = NAPI_DLPACK_KIND_VERSIONED;
    payload->tensor = ODD_POISON;
    if ((v = opt_prop(env, argv[0], "abi")) != NULL && to_i64(env, v, &x))
      payload->abi_version = (uint32_t)x;
    if ((v = opt_prop(env, argv[0], "kind")) != NULL && to_i64(env, v, &x))
      payload->kind = (uint32_t)x;
    if ((v = opt_prop(env, argv[0], "tensor")) != NULL) {
      memset(buf, 0, sizeof buf);
      NAPI_CALL(env,
                napi_get_value_string_utf8(env, v, buf, sizeof buf, &got));
      if (strcmp(buf, "null") == 0) payload->tensor = NULL;
    }
  }
  if (napi_create_external(env, payload, odd_finalize, NULL, &r) != napi_ok) {
    free(payload);
    return throw_code(env, "ERR_DLPACK_NAPI", "makeOddCapsule");
  }
  if (tag != NULL) NAPI_CALL(env, napi_type_tag_object(env, r, tag));
  return r;
}

static napi_value check_capsule(napi_env env, napi_callback_info info) {
  napi_value argv[1], r;
  const char* code;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  code = napi_dlpack_status_code(napi_dlpack_capsule_check(env, argv[0]));
  NAPI_CALL(env, napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &r));
  return r;
}

static napi_value payload_tensor(napi_env env, napi_callback_info info) {
  napi_value argv[1], r;
  void* data = NULL;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  NAPI_CALL(env, napi_get_value_external(env, argv[0], &data));
  if (data == NULL) return throw_code(env, "ERR_C_ADDON", "NULL payload");
  NAPI_CALL(env, napi_create_bigint_uint64(
                     env,
                     (uint64_t)(uintptr_t)NAPI_DLPACK_ATOMIC_LOAD_PTR(
                         &((napi_dlpack_capsule*)data)->tensor),
                     &r));
  return r;
}

/* The part of DLManagedTensorVersioned every major version keeps. */
typedef struct {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
} versioned_prefix;

static napi_value make_prefix_only_tensor(napi_env env,
                                          napi_callback_info info) {
  napi_value argv[1], r;
  int64_t version[2] = {2, 0};
  uint32_t n = 0;
  versioned_prefix* prefix;
  napi_dlpack_status st;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if (!read_i64_array(env, argv[0], version, 2, &n) || n != 2)
    return throw_code(env, "ERR_INVALID_ARG_TYPE",
                      "makePrefixOnlyTensor expects [major, minor]");
  prefix = (versioned_prefix*)malloc(sizeof *prefix);
  if (prefix == NULL)
    return throw_code(env, "ERR_DLPACK_NO_MEMORY", "makePrefixOnlyTensor");
  prefix->version.major = (uint32_t)version[0];
  prefix->version.minor = (uint32_t)version[1];
  prefix->manager_ctx = NULL;
  /* deleter_versioned counts and frees `self`, which is this block. */
  prefix->deleter = deleter_versioned;
  st = napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_VERSIONED, prefix, &r);
  if (st != NAPI_DLPACK_OK) {
    free(prefix);
    return throw_status(env, st, "makePrefixOnlyTensor");
  }
  return r;
}

typedef struct {
  DLManagedTensorVersioned managed;
  int64_t arrays[5]; /* shape and strides, placed 4 bytes off on demand */
  float data[4];
  pthread_t maker;
} edge_tensor;

static int64_t g_tracked_calls = 0;
static int64_t g_tracked_off_thread = 0;

static void edge_deleter(DLManagedTensorVersioned* self) {
  count_deleter_call();
  free(self);
}

static void tracked_deleter(DLManagedTensorVersioned* self) {
  edge_tensor* t = (edge_tensor*)(void*)self;
  if (!pthread_equal(pthread_self(), t->maker))
    __atomic_fetch_add(&g_tracked_off_thread, 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_add(&g_tracked_calls, 1, __ATOMIC_SEQ_CST);
  free(self);
}

/* A float32 tensor of `n` (<= 4) elements 0, 1, ... with row-major strides;
 * `misalign` is 0, 1 (shape 4 bytes off) or 2 (strides 4 bytes off). */
static edge_tensor* edge_tensor_new(int64_t n, int misalign) {
  edge_tensor* t = (edge_tensor*)calloc(1, sizeof *t);
  char* base;
  int64_t one = 1, i;
  if (t == NULL) return NULL;
  base = (char*)(void*)t->arrays;
  t->managed.version.major = DLPACK_MAJOR_VERSION;
  t->managed.version.minor = DLPACK_MINOR_VERSION;
  t->managed.manager_ctx = t;
  t->managed.deleter = edge_deleter;
  t->managed.dl_tensor.data = t->data;
  t->managed.dl_tensor.device.device_type = kDLCPU;
  t->managed.dl_tensor.ndim = 1;
  t->managed.dl_tensor.dtype.code = kDLFloat;
  t->managed.dl_tensor.dtype.bits = 32;
  t->managed.dl_tensor.dtype.lanes = 1;
  /* shape at arrays[0] (or 4 bytes later), strides at arrays[2] (or later) */
  t->managed.dl_tensor.shape = (int64_t*)(void*)(base + (misalign == 1 ? 4 : 0));
  t->managed.dl_tensor.strides =
      (int64_t*)(void*)(base + 16 + (misalign == 2 ? 4 : 0));
  memcpy(t->managed.dl_tensor.shape, &n, sizeof n);
  memcpy(t->managed.dl_tensor.strides, &one, sizeof one);
  for (i = 0; i < n && i < 4; i++) t->data[i] = (float)i;
  t->maker = pthread_self();
  return t;
}

static napi_value edge_capsule(napi_env env, edge_tensor* t) {
  napi_value r;
  napi_dlpack_status st;
  if (t == NULL) return throw_code(env, "ERR_DLPACK_NO_MEMORY", "edge tensor");
  st = napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_VERSIONED, t, &r);
  if (st != NAPI_DLPACK_OK) {
    free(t);
    return throw_status(env, st, "edge tensor");
  }
  return r;
}

static napi_value make_misaligned_arrays(napi_env env,
                                         napi_callback_info info) {
  napi_value argv[1];
  char buf[16] = {0};
  size_t got = 0;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  NAPI_CALL(env, napi_get_value_string_utf8(env, argv[0], buf, sizeof buf, &got));
  if (strcmp(buf, "shape") != 0 && strcmp(buf, "strides") != 0)
    return throw_code(env, "ERR_INVALID_ARG_VALUE",
                      "makeMisalignedArrays expects 'shape' or 'strides'");
  return edge_capsule(env, edge_tensor_new(2, strcmp(buf, "shape") == 0 ? 1 : 2));
}

static napi_value make_thread_tracked_tensor(napi_env env,
                                             napi_callback_info info) {
  edge_tensor* t = edge_tensor_new(4, 0);
  (void)info;
  if (t != NULL) t->managed.deleter = tracked_deleter;
  return edge_capsule(env, t);
}

static napi_value tracked_deleter_stats(napi_env env, napi_callback_info info) {
  napi_value r, v;
  (void)info;
  NAPI_CALL(env, napi_create_object(env, &r));
  NAPI_CALL(env, napi_create_double(
                     env, (double)__atomic_load_n(&g_tracked_calls, __ATOMIC_SEQ_CST),
                     &v));
  NAPI_CALL(env, napi_set_named_property(env, r, "calls", v));
  NAPI_CALL(env, napi_create_double(
                     env,
                     (double)__atomic_load_n(&g_tracked_off_thread, __ATOMIC_SEQ_CST),
                     &v));
  NAPI_CALL(env, napi_set_named_property(env, r, "offThread", v));
  return r;
}

static napi_value register_protocol_edges(napi_env env, napi_value exports) {
  static const c_addon_fn fns[] = {
      {"makeOddCapsule", make_odd_capsule},
      {"checkCapsule", check_capsule},
      {"payloadTensor", payload_tensor},
      {"makePrefixOnlyTensor", make_prefix_only_tensor},
      {"makeMisalignedArrays", make_misaligned_arrays},
      {"makeThreadTrackedTensor", make_thread_tracked_tensor},
      {"trackedDeleterStats", tracked_deleter_stats},
  };
  if (!export_fns(env, exports, fns, sizeof fns / sizeof fns[0]))
    return throw_code(env, "ERR_DLPACK_NAPI", "Node-API call failed: export_fns");
  return register_large_tensor_fns(env, exports);
}

/* ------------------------------------------------------------------------ */
/* Large tensors (issue 10, item 1): tensors past a runtime's ArrayBuffer     */
/* limit, from a producer that owns a real mapping.                          */
/*
 *   makeMappedTensor({ bytes, shape?, strides? }) -> capsule
 *       uint8 versioned tensor over a fresh mmap(MAP_PRIVATE | MAP_ANONYMOUS
 *       | MAP_NORESERVE) mapping of `bytes` bytes (pages are only backed once
 *       touched). shape defaults to [bytes]; strides (elements) default to
 *       NULL (row-major); they must stay inside the mapping. The deleter
 *       munmaps and counts itself in mappedDeleterCalls().
 *   makeHugeTensor({ shape, bits?, byteOffset? }) -> capsule
 *       int8 (bits 16: int16) versioned tensor claiming `shape` (e.g.
 *       [2 ** 62]) whose data points at a real 4096-byte block: only its first
 *       4096 bytes may ever be touched. byteOffset (default 0, at most 64) is
 *       stored as is (1 misaligns int16). The deleter frees the block and
 *       counts in mappedDeleterCalls().
 *   mappedDeleterCalls() / resetMappedDeleterCalls()
 *   heldReadU8(held, byteIndex) -> number     byte at data + byte_offset + i
 *   heldWriteU8(held, byteIndex, value)       writes that byte
 *       byteIndex must lie inside [lowest, highest element] of the tensor.
 */
#include <sys/mman.h> /* here rather than at the top: this section is self-contained */

#define HUGE_REAL_BYTES 4096

static int64_t g_mapped_deleter_calls = 0; /* atomic: any thread */

typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[2];
  int64_t strides[2];
  size_t mapped_bytes; /* 0: data is a malloc'd block of HUGE_REAL_BYTES */
} large_block;

static void large_deleter(DLManagedTensorVersioned* self) {
  large_block* block = (large_block*)self;
  if (block->mapped_bytes > 0)
    munmap(self->dl_tensor.data, block->mapped_bytes);
  else
    free(self->dl_tensor.data);
  free(block);
  __atomic_fetch_add(&g_mapped_deleter_calls, 1, __ATOMIC_SEQ_CST);
}

/* A versioned tensor over `data` (+ byte_offset) with the dims in
 * `opts.shape` (1 or 2) and optional strides; takes ownership of `data`
 * (released by large_deleter). */
static napi_value large_capsule(napi_env env, napi_value opts, void* data,
                                size_t mapped_bytes, int64_t default_dim,
                                DLDataType dtype, uint64_t byte_offset) {
  napi_value v, capsule;
  uint32_t ndim = 1, nstrides = 0;
  bool has_strides = false;
  napi_dlpack_status st;
  large_block* block = (large_block*)calloc(1, sizeof *block);
  if (block == NULL) goto fail;
  block->shape[0] = default_dim;
  if ((v = opt_prop(env, opts, "shape")) != NULL &&
      (!read_i64_array(env, v, block->shape, 2, &ndim) || ndim == 0))
    goto bad_args;
  if ((v = opt_prop(env, opts, "strides")) != NULL) {
    if (!read_i64_array(env, v, block->strides, 2, &nstrides) ||
        nstrides != ndim)
      goto bad_args;
    has_strides = true;
  }
  block->mapped_bytes = mapped_bytes;
  block->managed.version.major = DLPACK_MAJOR_VERSION;
  block->managed.version.minor = DLPACK_MINOR_VERSION;
  block->managed.deleter = large_deleter;
  block->managed.dl_tensor.data = data;
  block->managed.dl_tensor.byte_offset = byte_offset;
  block->managed.dl_tensor.device.device_type = kDLCPU;
  block->managed.dl_tensor.ndim = (int32_t)ndim;
  block->managed.dl_tensor.dtype = dtype;
  block->managed.dl_tensor.shape = block->shape;
  block->managed.dl_tensor.strides = has_strides ? block->strides : NULL;
  st = napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_VERSIONED,
                                  &block->managed, &capsule);
  if (st != NAPI_DLPACK_OK) {
    large_deleter(&block->managed);
    return throw_status(env, st, "large tensor capsule");
  }
  return capsule;
bad_args:
  free(block);
  if (mapped_bytes > 0)
    munmap(data, mapped_bytes);
  else
    free(data);
  return throw_code(env, "ERR_INVALID_ARG_TYPE",
                    "shape/strides must be arrays of 1 or 2 integers");
fail:
  if (mapped_bytes > 0)
    munmap(data, mapped_bytes);
  else
    free(data);
  return throw_status(env, NAPI_DLPACK_ERR_NO_MEMORY, "large tensor");
}

static napi_value make_mapped_tensor(napi_env env, napi_callback_info info) {
  napi_value argv[1], v;
  int64_t bytes = 0;
  void* data;
  DLDataType uint8 = {kDLUInt, 8, 1};
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if ((v = opt_prop(env, argv[0], "bytes")) == NULL || !to_i64(env, v, &bytes) ||
      bytes <= 0)
    return throw_code(env, "ERR_INVALID_ARG_TYPE",
                      "makeMappedTensor: bytes must be a positive integer");
  data = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED)
    return throw_code(env, "ERR_C_ADDON_MMAP", "mmap failed");
  return large_capsule(env, argv[0], data, (size_t)bytes, bytes, uint8, 0);
}

static napi_value make_huge_tensor(napi_env env, napi_callback_info info) {
  napi_value argv[1], v;
  DLDataType dtype = {kDLInt, 8, 1};
  int64_t bits = 8, byte_offset = 0;
  void* data;
  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if ((v = opt_prop(env, argv[0], "bits")) != NULL &&
      (!to_i64(env, v, &bits) || (bits != 8 && bits != 16)))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "bits must be 8 or 16");
  if ((v = opt_prop(env, argv[0], "byteOffset")) != NULL &&
      (!to_i64(env, v, &byte_offset) || byte_offset < 0 || byte_offset > 64))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "byteOffset must be 0..64");
  dtype.bits = (uint8_t)bits;
  data = calloc(1, HUGE_REAL_BYTES);
  if (data == NULL) return throw_status(env, NAPI_DLPACK_ERR_NO_MEMORY, "huge");
  return large_capsule(env, argv[0], data, 0, HUGE_REAL_BYTES, dtype,
                       (uint64_t)byte_offset);
}

static napi_value mapped_deleter_calls(napi_env env, napi_callback_info info) {
  napi_value r;
  (void)info;
  NAPI_CALL(env, napi_create_double(
                     env,
                     (double)__atomic_load_n(&g_mapped_deleter_calls,
                                             __ATOMIC_SEQ_CST),
                     &r));
  return r;
}

static napi_value reset_mapped_deleter_calls(napi_env env,
                                             napi_callback_info info) {
  napi_value r;
  (void)info;
  __atomic_store_n(&g_mapped_deleter_calls, 0, __ATOMIC_SEQ_CST);
  NAPI_CALL(env, napi_get_undefined(env, &r));
  return r;
}

/* Address of byte `index` (relative to data + byte_offset) of a held host
 * tensor, checked against the bytes its elements reach; NULL with an
 * exception pending otherwise. */
static unsigned char* held_byte(napi_env env, napi_value held,
                                napi_value index_value) {
  DLTensor* dl = held_dl(env, held, NULL, NULL);
  int64_t index = 0, low = 0, high = 0, esize;
  int32_t d;
  if (dl == NULL) return NULL;
  if (dl->device.device_type != kDLCPU || dl->ndim < 0 ||
      (dl->ndim > 0 && dl->shape == NULL)) {
    throw_code(env, "ERR_DLPACK_INVALID_TENSOR", "not a host tensor");
    return NULL;
  }
  esize = (dl->dtype.bits * (int64_t)dl->dtype.lanes + 7) / 8;
  for (d = 0; d < dl->ndim; d++) {
    int64_t extent = dl->shape[d], stride;
    if (extent <= 0) {
      throw_code(env, "ERR_OUT_OF_RANGE", "tensor has no elements");
      return NULL;
    }
    if (dl->strides != NULL) {
      stride = dl->strides[d];
    } else { /* NULL strides: row-major */
      int64_t e;
      stride = 1;
      for (e = d + 1; e < dl->ndim; e++) stride *= dl->shape[e];
    }
    if (stride >= 0)
      high += (extent - 1) * stride;
    else
      low += (extent - 1) * stride;
  }
  if (!to_i64(env, index_value, &index) || index < low * esize ||
      index >= (high + 1) * esize) {
    throw_code(env, "ERR_OUT_OF_RANGE", "byte index outside the tensor");
    return NULL;
  }
  return (unsigned char*)dl->data + dl->byte_offset + index;
}

static napi_value held_read_u8(napi_env env, napi_callback_info info) {
  napi_value argv[2], r;
  unsigned char* byte;
  if (get_args(env, info, 2, argv) == NULL) return NULL;
  if ((byte = held_byte(env, argv[0], argv[1])) == NULL) return NULL;
  NAPI_CALL(env, napi_create_uint32(env, *byte, &r));
  return r;
}

static napi_value held_write_u8(napi_env env, napi_callback_info info) {
  napi_value argv[3], r;
  unsigned char* byte;
  uint32_t value = 0;
  if (get_args(env, info, 3, argv) == NULL) return NULL;
  if ((byte = held_byte(env, argv[0], argv[1])) == NULL) return NULL;
  if (napi_get_value_uint32(env, argv[2], &value) != napi_ok || value > 255)
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "value must be a byte");
  *byte = (unsigned char)value;
  NAPI_CALL(env, napi_get_undefined(env, &r));
  return r;
}

static napi_value register_large_tensor_fns(napi_env env, napi_value exports) {
  static const c_addon_fn fns[] = {
      {"makeMappedTensor", make_mapped_tensor},
      {"makeHugeTensor", make_huge_tensor},
      {"mappedDeleterCalls", mapped_deleter_calls},
      {"resetMappedDeleterCalls", reset_mapped_deleter_calls},
      {"heldReadU8", held_read_u8},
      {"heldWriteU8", held_write_u8},
  };
  if (!export_fns(env, exports, fns, sizeof fns / sizeof fns[0]))
    return throw_code(env, "ERR_DLPACK_NAPI", "Node-API call failed: export_fns");
  if (!register_hostile_layouts(env, exports)) return NULL;
  return exports;
}

/* ======================================================================== */
/* Hostile layouts (issue 10): tensors whose pointers or prefix a careless   */
/* or future producer may hand over. Each is refused by napi-dlpack with a   */
/* stable code and its deleter runs once; c-addon-hostile.spec.ts fails      */
/* an assertion (rather than crash) if the check that refuses it is removed. */
/*                                                                          */
/*   makeMisalignedTensor({ versioned, offset }) -> capsule                 */
/*       the managed struct sits `offset` (1..7) bytes past an 8-byte        */
/*       boundary; float32 [2] = {0, 1}. Its deleter only counts: the struct */
/*       lives in a static pool, so even a (wrong) second call is harmless   */
/*       and shows up in deleterCalls().                                    */
/*   makeRawTensor({ versioned, shape, strides, misalign?, shift? })        */
/*       shape and strides exactly as given (no extent is allocated): data   */
/*       is a 64-byte region of float32 0..15. misalign: 'shape' | 'strides' */
/*       stores that array `shift` (default 4) bytes off its alignment.      */
/*   makePrefixOnlyMajor(major) -> capsule                                 */
/*       a versioned tensor of major `major` whose allocation is ONLY the    */
/*       stable prefix (version, manager_ctx, deleter): reading past it is   */
/*       an out-of-bounds read (valgrind / ASan report it).                  */
/* ======================================================================== */

#define HOSTILE_POOL_SLOTS 64
#define HOSTILE_SLOT_WORDS 32 /* 256 bytes: struct (80) + 7 + shape + data */

static uint64_t g_hostile_pool[HOSTILE_POOL_SLOTS][HOSTILE_SLOT_WORDS];
static uint32_t g_hostile_next = 0; /* accessed atomically */

static void counting_deleter_versioned(DLManagedTensorVersioned* self) {
  (void)self; /* the struct may be misaligned: nothing is read */
  count_deleter_call();
}

static void counting_deleter_legacy(DLManagedTensor* self) {
  (void)self;
  count_deleter_call();
}

static napi_value make_misaligned_tensor(napi_env env,
                                         napi_callback_info info) {
  napi_value argv[1], v, capsule;
  int64_t offset = 1;
  bool versioned;
  uint32_t slot_index;
  unsigned char* slot;
  int64_t* shape;
  float* data;
  DLTensor tensor;
  napi_dlpack_status st;

  if (get_args(env, info, 1, argv) == NULL) return NULL;
  versioned = to_bool(env, opt_prop(env, argv[0], "versioned"));
  if ((v = opt_prop(env, argv[0], "offset")) != NULL &&
      (!to_i64(env, v, &offset) || offset < 1 || offset > 7))
    return throw_code(env, "ERR_OUT_OF_RANGE",
                      "makeMisalignedTensor: offset must be 1..7");
  slot_index = __atomic_fetch_add(&g_hostile_next, 1, __ATOMIC_SEQ_CST) %
               HOSTILE_POOL_SLOTS;
  slot = (unsigned char*)g_hostile_pool[slot_index];
  memset(slot, 0, sizeof g_hostile_pool[0]);
  /* shape and data after the struct, aligned */
  shape = (int64_t*)(void*)(slot + 128);
  data = (float*)(void*)(slot + 192);
  shape[0] = 2;
  data[0] = 0.0f;
  data[1] = 1.0f;
  memset(&tensor, 0, sizeof tensor);
  tensor.data = data;
  tensor.device.device_type = kDLCPU;
  tensor.device.device_id = 0;
  tensor.ndim = 1;
  tensor.dtype.code = kDLFloat;
  tensor.dtype.bits = 32;
  tensor.dtype.lanes = 1;
  tensor.shape = shape;
  tensor.strides = NULL;
  tensor.byte_offset = 0;
  /* Built aligned, then copied byte-wise to the odd address. */
  if (versioned) {
    DLManagedTensorVersioned m;
    memset(&m, 0, sizeof m);
    m.version.major = DLPACK_MAJOR_VERSION;
    m.version.minor = DLPACK_MINOR_VERSION;
    m.manager_ctx = NULL;
    m.deleter = counting_deleter_versioned;
    m.flags = 0;
    m.dl_tensor = tensor;
    memcpy(slot + offset, &m, sizeof m);
  } else {
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    m.manager_ctx = NULL;
    m.deleter = counting_deleter_legacy;
    m.dl_tensor = tensor;
    memcpy(slot + offset, &m, sizeof m);
  }
  st = napi_dlpack_capsule_create(
      env, versioned ? NAPI_DLPACK_KIND_VERSIONED : NAPI_DLPACK_KIND_LEGACY,
      slot + offset, &capsule);
  if (st != NAPI_DLPACK_OK) return throw_status(env, st, "makeMisalignedTensor");
  return capsule;
}

#define RAW_MAX_NDIM 8
#define RAW_DATA_BYTES 64

static napi_value make_raw_tensor(napi_env env, napi_callback_info info) {
  napi_value argv[1], v, capsule;
  int64_t shape_in[RAW_MAX_NDIM], strides_in[RAW_MAX_NDIM], shift = 4;
  uint32_t len = 0, slen = 0, i;
  bool versioned, misalign_shape = false, misalign_strides = false;
  size_t head, arrays_at, data_at, total;
  unsigned char *block, *shape_at, *strides_at;
  float* data;
  DLTensor* tensor;
  napi_dlpack_status st;

  if (get_args(env, info, 1, argv) == NULL) return NULL;
  versioned = to_bool(env, opt_prop(env, argv[0], "versioned"));
  if ((v = opt_prop(env, argv[0], "shape")) == NULL ||
      !read_i64_array(env, v, shape_in, RAW_MAX_NDIM, &len) ||
      (v = opt_prop(env, argv[0], "strides")) == NULL ||
      !read_i64_array(env, v, strides_in, RAW_MAX_NDIM, &slen) || slen != len)
    return throw_code(env, "ERR_INVALID_ARG_TYPE",
                      "makeRawTensor: shape and strides must be integer "
                      "arrays of the same length (at most 8)");
  if ((v = opt_prop(env, argv[0], "misalign")) != NULL) {
    char buf[16] = {0};
    size_t got = 0;
    if (napi_get_value_string_utf8(env, v, buf, sizeof buf, &got) != napi_ok)
      return throw_code(env, "ERR_INVALID_ARG_TYPE",
                        "makeRawTensor: misalign must be 'shape' or 'strides'");
    misalign_shape = strcmp(buf, "shape") == 0;
    misalign_strides = strcmp(buf, "strides") == 0;
    if (!misalign_shape && !misalign_strides)
      return throw_code(env, "ERR_INVALID_ARG_VALUE",
                        "makeRawTensor: misalign must be 'shape' or 'strides'");
  }
  if ((v = opt_prop(env, argv[0], "shift")) != NULL &&
      (!to_i64(env, v, &shift) || shift < 1 || shift > 7))
    return throw_code(env, "ERR_OUT_OF_RANGE", "makeRawTensor: shift must be 1..7");

  /* managed struct | shape (+8 spare) | strides (+8 spare) | data */
  head = versioned ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor);
  arrays_at = (head + 15) & ~(size_t)15;
  data_at = (arrays_at + 2 * (sizeof(int64_t) * len + 8) + 63) & ~(size_t)63;
  total = data_at + RAW_DATA_BYTES;
  block = (unsigned char*)calloc(1, total);
  if (block == NULL)
    return throw_code(env, "ERR_DLPACK_NO_MEMORY", "makeRawTensor: out of memory");
  shape_at = block + arrays_at;
  strides_at = shape_at + sizeof(int64_t) * len + 8;
  if (misalign_shape) shape_at += shift;
  if (misalign_strides) strides_at += shift;
  memcpy(shape_at, shape_in, sizeof(int64_t) * len);
  memcpy(strides_at, strides_in, sizeof(int64_t) * len);
  data = (float*)(void*)(block + data_at);
  for (i = 0; i < RAW_DATA_BYTES / sizeof(float); i++) data[i] = (float)i;

  if (versioned) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)(void*)block;
    m->version.major = DLPACK_MAJOR_VERSION;
    m->version.minor = DLPACK_MINOR_VERSION;
    m->manager_ctx = block;
    m->deleter = deleter_versioned;
    m->flags = 0;
    tensor = &m->dl_tensor;
  } else {
    DLManagedTensor* m = (DLManagedTensor*)(void*)block;
    m->manager_ctx = block;
    m->deleter = deleter_legacy;
    tensor = &m->dl_tensor;
  }
  tensor->data = data;
  tensor->device.device_type = kDLCPU;
  tensor->device.device_id = 0;
  tensor->ndim = (int32_t)len;
  tensor->dtype.code = kDLFloat;
  tensor->dtype.bits = 32;
  tensor->dtype.lanes = 1;
  tensor->shape = (int64_t*)(void*)shape_at;
  tensor->strides = (int64_t*)(void*)strides_at;
  tensor->byte_offset = 0;

  st = napi_dlpack_capsule_create(
      env, versioned ? NAPI_DLPACK_KIND_VERSIONED : NAPI_DLPACK_KIND_LEGACY,
      block, &capsule);
  if (st != NAPI_DLPACK_OK) {
    free(block);
    return throw_status(env, st, "makeRawTensor");
  }
  return capsule;
}

/* The prefix every major version of DLManagedTensorVersioned keeps. */
typedef struct {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
} stable_prefix;

static void prefix_only_deleter(DLManagedTensorVersioned* self) {
  count_deleter_call();
  free(self); /* the allocation is the prefix: nothing else is read */
}

static napi_value make_prefix_only_major(napi_env env,
                                          napi_callback_info info) {
  napi_value argv[1], capsule;
  int64_t major = 2;
  stable_prefix* prefix;
  napi_dlpack_status st;

  if (get_args(env, info, 1, argv) == NULL) return NULL;
  if (!to_i64(env, argv[0], &major) || major < 0 || major > UINT32_MAX)
    return throw_code(env, "ERR_OUT_OF_RANGE",
                      "makePrefixOnlyMajor: major must be a uint32");
  prefix = (stable_prefix*)malloc(sizeof *prefix); /* exactly the prefix */
  if (prefix == NULL)
    return throw_code(env, "ERR_DLPACK_NO_MEMORY", "makePrefixOnlyMajor");
  prefix->version.major = (uint32_t)major;
  prefix->version.minor = 0;
  prefix->manager_ctx = NULL;
  prefix->deleter = prefix_only_deleter;
  st = napi_dlpack_capsule_create(env, NAPI_DLPACK_KIND_VERSIONED, prefix,
                                  &capsule);
  if (st != NAPI_DLPACK_OK) {
    free(prefix);
    return throw_status(env, st, "makePrefixOnlyMajor");
  }
  return capsule;
}

static bool register_hostile_layouts(napi_env env, napi_value exports) {
  static const c_addon_fn fns[] = {
      {"makeMisalignedTensor", make_misaligned_tensor},
      {"makeRawTensor", make_raw_tensor},
      {"makePrefixOnlyMajor", make_prefix_only_major},
  };
  return export_fns(env, exports, fns, sizeof fns / sizeof fns[0]);
}

/* ======================== end of hostile layouts ======================== */
