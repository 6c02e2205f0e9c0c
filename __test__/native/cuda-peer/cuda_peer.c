/*
 * cuda_peer.node: an independent CUDA producer and consumer for the tests of
 * napi-dlpack's CUDA path (the specs of __test__/cuda/). Plain C, Node-API and
 * include/napi_dlpack.h; the CUDA driver API is reached with dlopen/dlsym
 * (no CUDA headers or toolkit needed), so the same addon runs against the
 * fake driver (__test__/native/fake-cuda, a TEST DOUBLE) and against a real GPU.
 *
 * It stands for "some other library in the process" that owns device memory
 * and streams: it allocates with cuMemAlloc, exports that memory through
 * capsules whose deleter frees it (or not), consumes capsules and reads them
 * back on a stream of its choice, and hands work between streams with
 * cuEventRecord + cuStreamWaitEvent like a DLPack producer must.
 *
 * Exports (device ordinals default to 0; pointers and streams are bigints):
 *   alloc(bytes[, device])             -> ptr              (cuMemAlloc_v2)
 *   free(ptr[, device])                                    (cuMemFree_v2)
 *   hostAlloc(bytes) -> ptr   hostFree(ptr)                (pinned host memory)
 *   upload(ptr, bytes[, device])                           (sync HtoD)
 *   uploadAsync(ptr, bytes, stream[, device])              (HtoDAsync on stream)
 *   download(ptr, nbytes[, stream[, device]]) -> Uint8Array (DtoHAsync on
 *                                        stream, then cuStreamSynchronize)
 *   createStream([device]) -> stream  destroyStream(stream[, device])
 *   syncStreams(from, to[, device])    record an event on `from`, make `to`
 *                                      wait on it (what a producer does)
 *   makeTensor({ ptr, shape, dtype?, device?, byteOffset?, strides?,
 *                versioned?, owned?, ordinal? }) -> capsule
 *       dtype {code,bits,lanes} default float32; device [type, id] default
 *       [2, ordinal]: what the DLTensor CLAIMS; `ordinal` is where `ptr` was
 *       allocated (default 0). owned (default true): the deleter frees ptr
 *       (with cuMemFreeHost when host: true, for memory from hostAlloc: a
 *       pinned kDLCUDAHost tensor, as PyTorch's pin_memory() exports).
 *   deleterCalls() -> number
 *   setDeleterDelay(ms): every later deleter sleeps `ms` before it releases
 *       (a slow producer deleter).
 *   printDeleterCallsAtExit(): at process exit (atexit, after the runtime's
 *       environment cleanup hooks) prints "peer-deleter-calls-at-exit N".
 *   consume(capsule[, { stream, read }]) -> { data, device, shape, strides,
 *       byteOffset, bytes? }: takes the tensor, optionally reads its
 *       numel*itemsize contiguous bytes from data+byte_offset on `stream`
 *       (default 1n, the legacy default stream), then calls its deleter.
 *
 * Helpers for ordering, lifetime and context tests (fake driver and GPU):
 *   currentContext() -> bigint         cuCtxGetCurrent of this thread (0n: none)
 *   setCurrentContext(device | null)   make device's primary context current,
 *                                      or (null) pop until none is current
 *   syncStream(stream[, device])       cuStreamSynchronize
 *   resetDevice(device)                cuDevicePrimaryCtxReset_v2, what
 *                                      cudaDeviceReset() in another library
 *                                      does: every allocation of the device's
 *                                      primary context is freed
 *   busy(stream, ms[, device])         cuLaunchHostFunc of a host function that
 *                                      sleeps `ms`: the stream is busy that long
 *   copyAsync(dst, src, bytes, stream[, device])   cuMemcpyDtoDAsync
 *   scribble(ptr, bytes, stream, value[, device])  cuMemsetD8Async
 *   makeTensor({ ..., scribble: { stream, value } }): the deleter does not
 *       free; it enqueues a memset of the tensor's bytes to `value` on
 *       `stream`, like a caching allocator that hands the block out again to
 *       work on its own stream.
 *   releaseOnThread(capsule) -> { before, after }: consumes the capsule and
 *       calls its deleter on a new thread that has no current context; returns
 *       that thread's current context before and after the deleter (bigints).
 *   releaseInHostFunc(capsule, stream[, device]): consumes the capsule and
 *       calls its deleter from a CUDA host function (cuLaunchHostFunc) on
 *       `stream`, where the driver forbids CUDA calls; hostFuncReleases()
 *       counts the host functions that returned (poll it: a deadlocked one
 *       never does).
 *   allocManaged(bytes) -> ptr         cuMemAllocManaged (global)
 *   hostMalloc(bytes) -> ptr  hostMallocFree(ptr)  plain malloc (not CUDA memory)
 *   driverVersion() -> number  deviceName([device]) -> string
 *   memInfo([device]) -> { free, total }           cuMemGetInfo (numbers)
 */
#include <pthread.h>
#include <time.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_dlpack.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUstream;
typedef void* CUevent;
typedef void (*CUhostFn)(void*);

static struct {
  int loaded;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxReset_v2)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree_v2)(CUdeviceptr);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy_v2)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventDestroy_v2)(CUevent);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext*);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuLaunchHostFunc)(CUstream, CUhostFn, void*);
  CUresult (*cuMemAllocManaged)(CUdeviceptr*, size_t, unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuMemGetInfo_v2)(size_t*, size_t*);
} cu;

#define MAX_DEVICES 16
static CUcontext g_ctx[MAX_DEVICES];
static int64_t g_deleter_calls = 0; /* atomic: deleters may run anywhere */
static uint64_t g_deleter_delay_ms = 0; /* atomic: setDeleterDelay */

static napi_value throw_code(napi_env env, const char* code, const char* msg) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_error(env, code, msg);
  return NULL;
}

static napi_value throw_cu(napi_env env, const char* what, CUresult r) {
  char msg[160];
  snprintf(msg, sizeof msg, "cuda-peer: %s failed with CUresult %d", what, r);
  return throw_code(env, "ERR_CUDA_PEER", msg);
}

#define NAPI_CALL(env, call)                                                   \
  do {                                                                         \
    if ((call) != napi_ok)                                                     \
      return throw_code((env), "ERR_CUDA_PEER", "Node-API call failed: " #call); \
  } while (0)

#define CU_CALL(env, call)                              \
  do {                                                  \
    CUresult r_ = (call);                               \
    if (r_ != 0) return throw_cu((env), #call, r_);     \
  } while (0)

#define LOAD(name)                                         \
  do {                                                     \
    *(void**)(&cu.name) = dlsym(h, #name);                 \
    if (cu.name == NULL) return 0;                         \
  } while (0)

static int load_driver(void) {
  void* h;
  if (cu.loaded) return 1;
  h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return 0;
  LOAD(cuInit);
  LOAD(cuDeviceGet);
  LOAD(cuDevicePrimaryCtxRetain);
  LOAD(cuDevicePrimaryCtxReset_v2);
  LOAD(cuCtxSetCurrent);
  LOAD(cuMemAlloc_v2);
  LOAD(cuMemFree_v2);
  LOAD(cuMemHostAlloc);
  LOAD(cuMemFreeHost);
  LOAD(cuMemcpyHtoD_v2);
  LOAD(cuMemcpyHtoDAsync_v2);
  LOAD(cuMemcpyDtoHAsync_v2);
  LOAD(cuStreamCreate);
  LOAD(cuStreamDestroy_v2);
  LOAD(cuStreamSynchronize);
  LOAD(cuStreamWaitEvent);
  LOAD(cuEventCreate);
  LOAD(cuEventRecord);
  LOAD(cuEventDestroy_v2);
  LOAD(cuCtxGetCurrent);
  LOAD(cuCtxPopCurrent_v2);
  LOAD(cuMemsetD8Async);
  LOAD(cuMemcpyDtoDAsync_v2);
  LOAD(cuLaunchHostFunc);
  LOAD(cuMemAllocManaged);
  LOAD(cuDriverGetVersion);
  LOAD(cuDeviceGetName);
  LOAD(cuMemGetInfo_v2);
  if (cu.cuInit(0) != 0) return 0;
  cu.loaded = 1;
  return 1;
}

/* Makes the primary context of `device` current on this thread. 0 = ok. */
static CUresult use_device(int device) {
  CUdevice dev;
  CUresult r;
  if (!load_driver()) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
  if (device < 0 || device >= MAX_DEVICES) return 101; /* INVALID_DEVICE */
  if (g_ctx[device] == NULL) {
    if ((r = cu.cuDeviceGet(&dev, device)) != 0) return r;
    if ((r = cu.cuDevicePrimaryCtxRetain(&g_ctx[device], dev)) != 0) return r;
  }
  return cu.cuCtxSetCurrent(g_ctx[device]);
}

/* ---- argument helpers --------------------------------------------------- */

static bool is_nullish(napi_env env, napi_value v) {
  napi_valuetype t = napi_undefined;
  if (v == NULL || napi_typeof(env, v, &t) != napi_ok) return true;
  return t == napi_undefined || t == napi_null;
}

static bool to_u64(napi_env env, napi_value v, uint64_t* out) {
  napi_valuetype t;
  bool lossless;
  int64_t i;
  if (napi_typeof(env, v, &t) != napi_ok) return false;
  if (t == napi_bigint) return napi_get_value_bigint_uint64(env, v, out, &lossless) == napi_ok;
  if (t == napi_number && napi_get_value_int64(env, v, &i) == napi_ok) {
    *out = (uint64_t)i;
    return true;
  }
  return false;
}

static bool to_i64(napi_env env, napi_value v, int64_t* out) {
  napi_valuetype t;
  bool lossless;
  if (napi_typeof(env, v, &t) != napi_ok) return false;
  if (t == napi_number) return napi_get_value_int64(env, v, out) == napi_ok;
  if (t == napi_bigint) return napi_get_value_bigint_int64(env, v, out, &lossless) == napi_ok;
  return false;
}

static int opt_int(napi_env env, napi_value v, int dflt) {
  int64_t x;
  if (is_nullish(env, v) || !to_i64(env, v, &x)) return dflt;
  return (int)x;
}

static napi_value prop(napi_env env, napi_value obj, const char* name) {
  napi_value v = NULL;
  if (napi_get_named_property(env, obj, name, &v) != napi_ok) return NULL;
  return is_nullish(env, v) ? NULL : v;
}

static bool read_i64_array(napi_env env, napi_value arr, int64_t* out, uint32_t cap, uint32_t* len) {
  bool is_array = false;
  uint32_t n, i;
  if (napi_is_array(env, arr, &is_array) != napi_ok || !is_array) return false;
  if (napi_get_array_length(env, arr, &n) != napi_ok || n > cap) return false;
  for (i = 0; i < n; i++) {
    napi_value e;
    if (napi_get_element(env, arr, i, &e) != napi_ok || !to_i64(env, e, &out[i])) return false;
  }
  *len = n;
  return true;
}

/* Bytes of a TypedArray / Buffer / DataView. */
static bool bytes_of(napi_env env, napi_value v, void** data, size_t* len) {
  bool is_ta = false, is_dv = false;
  napi_typedarray_type type;
  size_t length, offset;
  napi_value ab;
  if (napi_is_typedarray(env, v, &is_ta) == napi_ok && is_ta) {
    if (napi_get_typedarray_info(env, v, &type, &length, data, &ab, &offset) != napi_ok) return false;
    switch (type) {
      case napi_int8_array: case napi_uint8_array: case napi_uint8_clamped_array: *len = length; break;
      case napi_int16_array: case napi_uint16_array: *len = length * 2; break;
      case napi_int32_array: case napi_uint32_array: case napi_float32_array: *len = length * 4; break;
      default: *len = length * 8; break;
    }
    return true;
  }
  if (napi_is_dataview(env, v, &is_dv) == napi_ok && is_dv)
    return napi_get_dataview_info(env, v, len, data, &ab, &offset) == napi_ok;
  return false;
}

static napi_value u64_value(napi_env env, uint64_t x) {
  napi_value v;
  NAPI_CALL(env, napi_create_bigint_uint64(env, x, &v));
  return v;
}

static napi_value undefined_value(napi_env env) {
  napi_value v;
  NAPI_CALL(env, napi_get_undefined(env, &v));
  return v;
}

#define ARGS(n)                                                   \
  size_t argc = n;                                                \
  napi_value argv[n];                                             \
  for (size_t i_ = 0; i_ < n; i_++) argv[i_] = NULL;              \
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL))

static CUstream stream_arg(napi_env env, napi_value v) {
  uint64_t s = 1; /* legacy default stream */
  if (!is_nullish(env, v)) to_u64(env, v, &s);
  return (CUstream)(uintptr_t)s;
}

/* ---- memory and streams ------------------------------------------------- */

static napi_value js_alloc(napi_env env, napi_callback_info info) {
  ARGS(2);
  uint64_t bytes;
  CUdeviceptr ptr = 0;
  if (argv[0] == NULL || !to_u64(env, argv[0], &bytes))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "alloc(bytes[, device])");
  CU_CALL(env, use_device(opt_int(env, argv[1], 0)));
  CU_CALL(env, cu.cuMemAlloc_v2(&ptr, (size_t)bytes));
  return u64_value(env, ptr);
}

static napi_value js_free(napi_env env, napi_callback_info info) {
  ARGS(2);
  uint64_t ptr;
  if (argv[0] == NULL || !to_u64(env, argv[0], &ptr))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "free(ptr[, device])");
  CU_CALL(env, use_device(opt_int(env, argv[1], 0)));
  CU_CALL(env, cu.cuMemFree_v2(ptr));
  return undefined_value(env);
}

static napi_value js_host_alloc(napi_env env, napi_callback_info info) {
  ARGS(1);
  uint64_t bytes;
  void* p = NULL;
  if (argv[0] == NULL || !to_u64(env, argv[0], &bytes))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "hostAlloc(bytes)");
  CU_CALL(env, use_device(0));
  CU_CALL(env, cu.cuMemHostAlloc(&p, (size_t)bytes, 0));
  return u64_value(env, (uint64_t)(uintptr_t)p);
}

static napi_value js_host_free(napi_env env, napi_callback_info info) {
  ARGS(1);
  uint64_t p;
  if (argv[0] == NULL || !to_u64(env, argv[0], &p))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "hostFree(ptr)");
  CU_CALL(env, use_device(0));
  CU_CALL(env, cu.cuMemFreeHost((void*)(uintptr_t)p));
  return undefined_value(env);
}

static napi_value js_upload(napi_env env, napi_callback_info info) {
  ARGS(3);
  uint64_t ptr;
  void* data;
  size_t len;
  if (argv[0] == NULL || !to_u64(env, argv[0], &ptr) || argv[1] == NULL || !bytes_of(env, argv[1], &data, &len))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "upload(ptr, typedArray[, device])");
  CU_CALL(env, use_device(opt_int(env, argv[2], 0)));
  if (len > 0) CU_CALL(env, cu.cuMemcpyHtoD_v2(ptr, data, len));
  return undefined_value(env);
}

static napi_value js_upload_async(napi_env env, napi_callback_info info) {
  ARGS(4);
  uint64_t ptr;
  void* data;
  size_t len;
  if (argv[0] == NULL || !to_u64(env, argv[0], &ptr) || argv[1] == NULL || !bytes_of(env, argv[1], &data, &len))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "uploadAsync(ptr, typedArray, stream[, device])");
  CU_CALL(env, use_device(opt_int(env, argv[3], 0)));
  /* Pageable source: the driver stages it before returning. */
  if (len > 0) CU_CALL(env, cu.cuMemcpyHtoDAsync_v2(ptr, data, len, stream_arg(env, argv[2])));
  return undefined_value(env);
}

static napi_value js_download(napi_env env, napi_callback_info info) {
  ARGS(4);
  uint64_t ptr, nbytes;
  void* out = NULL;
  napi_value ab, u8;
  CUstream stream;
  if (argv[0] == NULL || !to_u64(env, argv[0], &ptr) || argv[1] == NULL || !to_u64(env, argv[1], &nbytes))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "download(ptr, nbytes[, stream[, device]])");
  stream = stream_arg(env, argv[2]);
  CU_CALL(env, use_device(opt_int(env, argv[3], 0)));
  NAPI_CALL(env, napi_create_arraybuffer(env, (size_t)nbytes, &out, &ab));
  if (nbytes > 0) {
    CU_CALL(env, cu.cuMemcpyDtoHAsync_v2(out, ptr, (size_t)nbytes, stream));
    CU_CALL(env, cu.cuStreamSynchronize(stream));
  }
  NAPI_CALL(env, napi_create_typedarray(env, napi_uint8_array, (size_t)nbytes, ab, 0, &u8));
  return u8;
}

static napi_value js_create_stream(napi_env env, napi_callback_info info) {
  ARGS(1);
  CUstream s = NULL;
  CU_CALL(env, use_device(opt_int(env, argv[0], 0)));
  CU_CALL(env, cu.cuStreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */));
  return u64_value(env, (uint64_t)(uintptr_t)s);
}

static napi_value js_destroy_stream(napi_env env, napi_callback_info info) {
  ARGS(2);
  CU_CALL(env, use_device(opt_int(env, argv[1], 0)));
  CU_CALL(env, cu.cuStreamDestroy_v2(stream_arg(env, argv[0])));
  return undefined_value(env);
}

static napi_value js_sync_streams(napi_env env, napi_callback_info info) {
  ARGS(3);
  CUevent ev = NULL;
  CUresult r;
  CU_CALL(env, use_device(opt_int(env, argv[2], 0)));
  CU_CALL(env, cu.cuEventCreate(&ev, 2 /* CU_EVENT_DISABLE_TIMING */));
  r = cu.cuEventRecord(ev, stream_arg(env, argv[0]));
  if (r == 0) r = cu.cuStreamWaitEvent(stream_arg(env, argv[1]), ev, 0);
  cu.cuEventDestroy_v2(ev);
  if (r != 0) return throw_cu(env, "syncStreams", r);
  return undefined_value(env);
}

/* ---- producer ----------------------------------------------------------- */

#define MAX_NDIM 8

typedef struct {
  DLManagedTensorVersioned managed; /* first: the deleter frees `self` */
  int64_t shape[MAX_NDIM];
  int64_t strides[MAX_NDIM];
  CUdeviceptr ptr;
  int ordinal;
  int owned;
  int host; /* ptr is pinned host memory (cuMemHostAlloc): freed with cuMemFreeHost */
  size_t nbytes;
  CUstream scribble_stream; /* scribble: memset on this stream instead of freeing */
  int scribble;
  unsigned char scribble_value;
} peer_tensor;

typedef struct {
  DLManagedTensor managed;
  int64_t shape[MAX_NDIM];
  int64_t strides[MAX_NDIM];
  CUdeviceptr ptr;
  int ordinal;
  int owned;
  int host;
  size_t nbytes;
  CUstream scribble_stream;
  int scribble;
  unsigned char scribble_value;
} peer_tensor_legacy;

/* The memory is released (or handed out again and overwritten: scribble)
 * before the call is counted, so a test that sees the count also sees the
 * scribble enqueued. */
static void release_memory(CUdeviceptr ptr, int ordinal, int owned, int host, int scribble,
                           CUstream stream, unsigned char value, size_t nbytes) {
  uint64_t delay_ms = __atomic_load_n(&g_deleter_delay_ms, __ATOMIC_SEQ_CST);
  if (delay_ms > 0) {
    struct timespec ts = {(time_t)(delay_ms / 1000), (long)(delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  if (scribble) {
    if (use_device(ordinal) == 0 && nbytes > 0) cu.cuMemsetD8Async(ptr, value, nbytes, stream);
  } else if (owned && use_device(ordinal) == 0) {
    if (host)
      cu.cuMemFreeHost((void*)(uintptr_t)ptr);
    else
      cu.cuMemFree_v2(ptr);
  }
  __atomic_fetch_add(&g_deleter_calls, 1, __ATOMIC_SEQ_CST);
}

static void deleter_versioned(DLManagedTensorVersioned* self) {
  peer_tensor* t = (peer_tensor*)self;
  release_memory(t->ptr, t->ordinal, t->owned, t->host, t->scribble, t->scribble_stream,
                 t->scribble_value, t->nbytes);
  free(t);
}

static void deleter_legacy(DLManagedTensor* self) {
  peer_tensor_legacy* t = (peer_tensor_legacy*)self;
  release_memory(t->ptr, t->ordinal, t->owned, t->host, t->scribble, t->scribble_stream,
                 t->scribble_value, t->nbytes);
  free(t);
}

static napi_value js_make_tensor(napi_env env, napi_callback_info info) {
  ARGS(1);
  napi_value v, capsule;
  uint64_t ptr = 0;
  int64_t shape[MAX_NDIM], strides[MAX_NDIM], dev[2], x;
  uint32_t ndim = 0, nstrides = 0, ndev = 0;
  bool versioned = true, owned = true, host = false, has_strides = false;
  int ordinal = 0;
  DLTensor* dl;
  DLDataType dtype = {kDLFloat, 32, 1};
  int64_t byte_offset = 0;
  napi_dlpack_status st;
  void* tensor;
  uint32_t kind;
  int scribble = 0;
  uint64_t scribble_stream = 1;
  int64_t scribble_value = 0;
  size_t nbytes;

  if (argv[0] == NULL || (v = prop(env, argv[0], "ptr")) == NULL || !to_u64(env, v, &ptr))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "makeTensor({ ptr, shape, ... })");
  if ((v = prop(env, argv[0], "shape")) == NULL || !read_i64_array(env, v, shape, MAX_NDIM, &ndim))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "makeTensor: shape must be an array");
  if ((v = prop(env, argv[0], "strides")) != NULL) {
    if (!read_i64_array(env, v, strides, MAX_NDIM, &nstrides) || nstrides != ndim)
      return throw_code(env, "ERR_INVALID_ARG_TYPE", "makeTensor: strides must match shape");
    has_strides = true;
  }
  if ((v = prop(env, argv[0], "ordinal")) != NULL) ordinal = opt_int(env, v, 0);
  dev[0] = kDLCUDA;
  dev[1] = ordinal;
  if ((v = prop(env, argv[0], "device")) != NULL && (!read_i64_array(env, v, dev, 2, &ndev) || ndev != 2))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "makeTensor: device must be [type, id]");
  if ((v = prop(env, argv[0], "dtype")) != NULL) {
    napi_value c = prop(env, v, "code"), b = prop(env, v, "bits"), l = prop(env, v, "lanes");
    if (c != NULL && to_i64(env, c, &x)) dtype.code = (uint8_t)x;
    if (b != NULL && to_i64(env, b, &x)) dtype.bits = (uint8_t)x;
    if (l != NULL && to_i64(env, l, &x)) dtype.lanes = (uint16_t)x;
  }
  if ((v = prop(env, argv[0], "byteOffset")) != NULL) to_i64(env, v, &byte_offset);
  if ((v = prop(env, argv[0], "versioned")) != NULL) napi_get_value_bool(env, v, &versioned);
  if ((v = prop(env, argv[0], "owned")) != NULL) napi_get_value_bool(env, v, &owned);
  if ((v = prop(env, argv[0], "host")) != NULL) napi_get_value_bool(env, v, &host);
  if ((v = prop(env, argv[0], "scribble")) != NULL) {
    napi_value sv = prop(env, v, "value");
    scribble = 1;
    scribble_stream = (uint64_t)(uintptr_t)stream_arg(env, prop(env, v, "stream"));
    if (sv != NULL) to_i64(env, sv, &scribble_value);
  }
  if (!has_strides) {
    int64_t step = 1;
    for (int d = (int)ndim - 1; d >= 0; d--) {
      strides[d] = step;
      step *= shape[d];
    }
  }
  nbytes = (size_t)((dtype.bits * dtype.lanes + 7) / 8);
  for (uint32_t d = 0; d < ndim; d++) nbytes *= (size_t)(shape[d] > 0 ? shape[d] : 0);

  if (versioned) {
    peer_tensor* t = (peer_tensor*)calloc(1, sizeof(peer_tensor));
    if (t == NULL) return throw_code(env, "ERR_CUDA_PEER", "out of memory");
    t->managed.version.major = DLPACK_MAJOR_VERSION;
    t->managed.version.minor = DLPACK_MINOR_VERSION;
    t->managed.deleter = deleter_versioned;
    dl = &t->managed.dl_tensor;
    memcpy(t->shape, shape, sizeof shape);
    memcpy(t->strides, strides, sizeof strides);
    dl->shape = t->shape;
    dl->strides = t->strides;
    t->ptr = ptr;
    t->ordinal = ordinal;
    t->owned = owned;
    t->host = host;
    t->nbytes = nbytes;
    t->scribble = scribble;
    t->scribble_stream = (CUstream)(uintptr_t)scribble_stream;
    t->scribble_value = (unsigned char)scribble_value;
    tensor = t;
    kind = NAPI_DLPACK_KIND_VERSIONED;
  } else {
    peer_tensor_legacy* t = (peer_tensor_legacy*)calloc(1, sizeof(peer_tensor_legacy));
    if (t == NULL) return throw_code(env, "ERR_CUDA_PEER", "out of memory");
    t->managed.deleter = deleter_legacy;
    dl = &t->managed.dl_tensor;
    memcpy(t->shape, shape, sizeof shape);
    memcpy(t->strides, strides, sizeof strides);
    dl->shape = t->shape;
    dl->strides = t->strides;
    t->ptr = ptr;
    t->ordinal = ordinal;
    t->owned = owned;
    t->host = host;
    t->nbytes = nbytes;
    t->scribble = scribble;
    t->scribble_stream = (CUstream)(uintptr_t)scribble_stream;
    t->scribble_value = (unsigned char)scribble_value;
    tensor = t;
    kind = NAPI_DLPACK_KIND_LEGACY;
  }
  dl->data = (void*)(uintptr_t)ptr;
  dl->device.device_type = (DLDeviceType)dev[0];
  dl->device.device_id = (int32_t)dev[1];
  dl->ndim = (int32_t)ndim;
  dl->dtype = dtype;
  dl->byte_offset = (uint64_t)byte_offset;
  st = napi_dlpack_capsule_create(env, kind, tensor, &capsule);
  if (st != NAPI_DLPACK_OK) {
    napi_dlpack_tensor_release(kind, tensor);
    return throw_code(env, napi_dlpack_status_code(st), "makeTensor: capsule creation failed");
  }
  return capsule;
}

static napi_value js_deleter_calls(napi_env env, napi_callback_info info) {
  napi_value v;
  (void)info;
  NAPI_CALL(env, napi_create_int64(env, __atomic_load_n(&g_deleter_calls, __ATOMIC_SEQ_CST), &v));
  return v;
}

static void print_deleter_calls(void) {
  printf("peer-deleter-calls-at-exit %lld\n", (long long)__atomic_load_n(&g_deleter_calls, __ATOMIC_SEQ_CST));
  fflush(stdout);
}

static napi_value js_set_deleter_delay(napi_env env, napi_callback_info info) {
  ARGS(1);
  int64_t ms = 0;
  if (argv[0] == NULL || !to_i64(env, argv[0], &ms) || ms < 0)
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "setDeleterDelay(ms)");
  __atomic_store_n(&g_deleter_delay_ms, (uint64_t)ms, __ATOMIC_SEQ_CST);
  return undefined_value(env);
}

/* The count as the process ends (atexit runs after the runtime's environment
 * cleanup hooks): what a deleter left on a release thread at exit misses. */
static napi_value js_print_deleter_calls_at_exit(napi_env env, napi_callback_info info) {
  (void)info;
  if (atexit(print_deleter_calls) != 0) return throw_code(env, "ERR_CUDA_PEER", "atexit failed");
  return undefined_value(env);
}

/* ---- consumer ----------------------------------------------------------- */

static napi_value i64_array(napi_env env, const int64_t* v, int32_t n) {
  napi_value arr, num;
  NAPI_CALL(env, napi_create_array_with_length(env, (size_t)(n > 0 ? n : 0), &arr));
  for (int32_t i = 0; i < n; i++) {
    NAPI_CALL(env, napi_create_double(env, (double)v[i], &num));
    NAPI_CALL(env, napi_set_element(env, arr, (uint32_t)i, num));
  }
  return arr;
}

static napi_value js_consume(napi_env env, napi_callback_info info) {
  ARGS(2);
  uint32_t kind;
  void* tensor = NULL;
  DLTensor* dl;
  napi_dlpack_status st;
  napi_value result, v, device, ab, u8;
  bool read = false;
  CUstream stream = (CUstream)1;
  CUresult r = 0;

  if (argv[1] != NULL && !is_nullish(env, argv[1])) {
    if ((v = prop(env, argv[1], "read")) != NULL) napi_get_value_bool(env, v, &read);
    stream = stream_arg(env, prop(env, argv[1], "stream"));
  }
  st = napi_dlpack_capsule_consume(env, argv[0], &kind, &tensor);
  if (st != NAPI_DLPACK_OK) return throw_code(env, napi_dlpack_status_code(st), "consume: not a usable capsule");
  dl = kind == NAPI_DLPACK_KIND_VERSIONED ? &((DLManagedTensorVersioned*)tensor)->dl_tensor
                                          : &((DLManagedTensor*)tensor)->dl_tensor;
  if (napi_create_object(env, &result) != napi_ok) goto napi_failed;
  if (napi_create_bigint_uint64(env, (uint64_t)(uintptr_t)dl->data + dl->byte_offset, &v) != napi_ok ||
      napi_set_named_property(env, result, "data", v) != napi_ok)
    goto napi_failed;
  {
    int64_t d[2] = {dl->device.device_type, dl->device.device_id};
    if ((device = i64_array(env, d, 2)) == NULL || napi_set_named_property(env, result, "device", device) != napi_ok)
      goto napi_failed;
  }
  if ((v = i64_array(env, dl->shape, dl->ndim)) == NULL || napi_set_named_property(env, result, "shape", v) != napi_ok)
    goto napi_failed;
  if (dl->strides != NULL &&
      ((v = i64_array(env, dl->strides, dl->ndim)) == NULL || napi_set_named_property(env, result, "strides", v) != napi_ok))
    goto napi_failed;
  if (napi_create_double(env, (double)dl->byte_offset, &v) != napi_ok ||
      napi_set_named_property(env, result, "byteOffset", v) != napi_ok)
    goto napi_failed;
  if (read) {
    size_t nbytes = (size_t)((dl->dtype.bits * dl->dtype.lanes + 7) / 8);
    void* out = NULL;
    for (int32_t d = 0; d < dl->ndim; d++) nbytes *= (size_t)dl->shape[d];
    if (napi_create_arraybuffer(env, nbytes, &out, &ab) != napi_ok) goto napi_failed;
    if (nbytes > 0) {
      r = use_device(dl->device.device_id);
      if (r == 0) r = cu.cuMemcpyDtoHAsync_v2(out, (CUdeviceptr)(uintptr_t)dl->data + dl->byte_offset, nbytes, stream);
      if (r == 0) r = cu.cuStreamSynchronize(stream);
    }
    if (r != 0) {
      napi_dlpack_tensor_release(kind, tensor);
      return throw_cu(env, "consume: reading the tensor", r);
    }
    if (napi_create_typedarray(env, napi_uint8_array, nbytes, ab, 0, &u8) != napi_ok ||
        napi_set_named_property(env, result, "bytes", u8) != napi_ok)
      goto napi_failed;
  }
  napi_dlpack_tensor_release(kind, tensor);
  return result;

napi_failed:
  napi_dlpack_tensor_release(kind, tensor);
  return throw_code(env, "ERR_CUDA_PEER", "consume: Node-API call failed");
}

/* ---- contexts, streams, lifetime helpers -------------------------------- */

static napi_value js_current_context(napi_env env, napi_callback_info info) {
  CUcontext ctx = NULL;
  (void)info;
  if (!load_driver()) return throw_cu(env, "currentContext: loading the driver", 3);
  CU_CALL(env, cu.cuCtxGetCurrent(&ctx));
  return u64_value(env, (uint64_t)(uintptr_t)ctx);
}

static napi_value js_set_current_context(napi_env env, napi_callback_info info) {
  ARGS(1);
  if (!is_nullish(env, argv[0])) {
    CU_CALL(env, use_device(opt_int(env, argv[0], 0)));
    return undefined_value(env);
  }
  if (!load_driver()) return throw_cu(env, "setCurrentContext: loading the driver", 3);
  for (int guard = 0; guard < 64; guard++) {
    CUcontext ctx = NULL, popped = NULL;
    CU_CALL(env, cu.cuCtxGetCurrent(&ctx));
    if (ctx == NULL) return undefined_value(env);
    CU_CALL(env, cu.cuCtxPopCurrent_v2(&popped));
  }
  return throw_code(env, "ERR_CUDA_PEER", "setCurrentContext(null): the context stack does not empty");
}

static napi_value js_sync_stream(napi_env env, napi_callback_info info) {
  ARGS(2);
  CU_CALL(env, use_device(opt_int(env, argv[1], 0)));
  CU_CALL(env, cu.cuStreamSynchronize(stream_arg(env, argv[0])));
  return undefined_value(env);
}

static napi_value js_reset_device(napi_env env, napi_callback_info info) {
  ARGS(1);
  int device = opt_int(env, argv[0], 0);
  CUdevice dev;
  CU_CALL(env, use_device(device));
  CU_CALL(env, cu.cuDeviceGet(&dev, device));
  CU_CALL(env, cu.cuDevicePrimaryCtxReset_v2(dev));
  return undefined_value(env);
}

static void sleep_host_fn(void* user) {
  uint64_t ms = (uint64_t)(uintptr_t)user;
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static napi_value js_busy(napi_env env, napi_callback_info info) {
  ARGS(3);
  int64_t ms = 0;
  if (argv[1] == NULL || !to_i64(env, argv[1], &ms) || ms < 0)
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "busy(stream, ms[, device])");
  CU_CALL(env, use_device(opt_int(env, argv[2], 0)));
  CU_CALL(env, cu.cuLaunchHostFunc(stream_arg(env, argv[0]), sleep_host_fn, (void*)(uintptr_t)ms));
  return undefined_value(env);
}

static napi_value js_copy_async(napi_env env, napi_callback_info info) {
  ARGS(5);
  uint64_t dst, src, bytes;
  if (argv[0] == NULL || !to_u64(env, argv[0], &dst) || argv[1] == NULL || !to_u64(env, argv[1], &src) ||
      argv[2] == NULL || !to_u64(env, argv[2], &bytes))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "copyAsync(dst, src, bytes, stream[, device])");
  CU_CALL(env, use_device(opt_int(env, argv[4], 0)));
  if (bytes > 0) CU_CALL(env, cu.cuMemcpyDtoDAsync_v2(dst, src, (size_t)bytes, stream_arg(env, argv[3])));
  return undefined_value(env);
}

static napi_value js_scribble(napi_env env, napi_callback_info info) {
  ARGS(5);
  uint64_t ptr, bytes;
  int64_t value = 0;
  if (argv[0] == NULL || !to_u64(env, argv[0], &ptr) || argv[1] == NULL || !to_u64(env, argv[1], &bytes) ||
      argv[3] == NULL || !to_i64(env, argv[3], &value))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "scribble(ptr, bytes, stream, value[, device])");
  CU_CALL(env, use_device(opt_int(env, argv[4], 0)));
  if (bytes > 0) CU_CALL(env, cu.cuMemsetD8Async(ptr, (unsigned char)value, (size_t)bytes, stream_arg(env, argv[2])));
  return undefined_value(env);
}

typedef struct {
  uint32_t kind;
  void* tensor;
  CUresult r;
  CUcontext before, after;
} thread_release;

static void* release_thread(void* arg) {
  thread_release* job = (thread_release*)arg;
  job->r = cu.cuCtxGetCurrent(&job->before);
  napi_dlpack_tensor_release(job->kind, job->tensor);
  if (job->r == 0) job->r = cu.cuCtxGetCurrent(&job->after);
  return NULL;
}

static napi_value js_release_on_thread(napi_env env, napi_callback_info info) {
  ARGS(1);
  thread_release job = {0, NULL, 0, NULL, NULL};
  pthread_t thread;
  napi_dlpack_status st;
  napi_value result;
  if (!load_driver()) return throw_cu(env, "releaseOnThread: loading the driver", 3);
  st = napi_dlpack_capsule_consume(env, argv[0], &job.kind, &job.tensor);
  if (st != NAPI_DLPACK_OK) return throw_code(env, napi_dlpack_status_code(st), "releaseOnThread: not a usable capsule");
  if (pthread_create(&thread, NULL, release_thread, &job) != 0) {
    napi_dlpack_tensor_release(job.kind, job.tensor);
    return throw_code(env, "ERR_CUDA_PEER", "releaseOnThread: pthread_create failed");
  }
  pthread_join(thread, NULL);
  if (job.r != 0) return throw_cu(env, "releaseOnThread: cuCtxGetCurrent", job.r);
  NAPI_CALL(env, napi_create_object(env, &result));
  NAPI_CALL(env, napi_set_named_property(env, result, "before", u64_value(env, (uint64_t)(uintptr_t)job.before)));
  NAPI_CALL(env, napi_set_named_property(env, result, "after", u64_value(env, (uint64_t)(uintptr_t)job.after)));
  return result;
}

static int64_t g_hostfn_releases = 0; /* atomic: host functions run on a driver thread */

typedef struct {
  uint32_t kind;
  void* tensor;
} hostfn_release;

static void release_host_fn(void* user) {
  hostfn_release* job = (hostfn_release*)user;
  napi_dlpack_tensor_release(job->kind, job->tensor);
  free(job);
  __atomic_fetch_add(&g_hostfn_releases, 1, __ATOMIC_SEQ_CST);
}

static napi_value js_release_in_host_func(napi_env env, napi_callback_info info) {
  ARGS(3);
  hostfn_release* job;
  napi_dlpack_status st;
  CUresult r;
  uint32_t kind;
  void* tensor;
  CU_CALL(env, use_device(opt_int(env, argv[2], 0)));
  st = napi_dlpack_capsule_consume(env, argv[0], &kind, &tensor);
  if (st != NAPI_DLPACK_OK) return throw_code(env, napi_dlpack_status_code(st), "releaseInHostFunc: not a usable capsule");
  job = (hostfn_release*)malloc(sizeof *job);
  if (job == NULL) {
    napi_dlpack_tensor_release(kind, tensor);
    return throw_code(env, "ERR_CUDA_PEER", "releaseInHostFunc: out of memory");
  }
  job->kind = kind;
  job->tensor = tensor;
  r = cu.cuLaunchHostFunc(stream_arg(env, argv[1]), release_host_fn, job);
  if (r != 0) {
    free(job);
    napi_dlpack_tensor_release(kind, tensor);
    return throw_cu(env, "releaseInHostFunc: cuLaunchHostFunc", r);
  }
  return undefined_value(env);
}

static napi_value js_host_func_releases(napi_env env, napi_callback_info info) {
  napi_value v;
  (void)info;
  NAPI_CALL(env, napi_create_int64(env, __atomic_load_n(&g_hostfn_releases, __ATOMIC_SEQ_CST), &v));
  return v;
}

static napi_value js_alloc_managed(napi_env env, napi_callback_info info) {
  ARGS(2);
  uint64_t bytes;
  CUdeviceptr ptr = 0;
  if (argv[0] == NULL || !to_u64(env, argv[0], &bytes))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "allocManaged(bytes[, device])");
  CU_CALL(env, use_device(opt_int(env, argv[1], 0)));
  CU_CALL(env, cu.cuMemAllocManaged(&ptr, (size_t)bytes, 1 /* CU_MEM_ATTACH_GLOBAL */));
  return u64_value(env, ptr);
}

static napi_value js_host_malloc(napi_env env, napi_callback_info info) {
  ARGS(1);
  uint64_t bytes;
  void* p;
  if (argv[0] == NULL || !to_u64(env, argv[0], &bytes))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "hostMalloc(bytes)");
  p = calloc(1, (size_t)(bytes ? bytes : 1));
  if (p == NULL) return throw_code(env, "ERR_CUDA_PEER", "hostMalloc: out of memory");
  return u64_value(env, (uint64_t)(uintptr_t)p);
}

static napi_value js_host_malloc_free(napi_env env, napi_callback_info info) {
  ARGS(1);
  uint64_t p;
  if (argv[0] == NULL || !to_u64(env, argv[0], &p))
    return throw_code(env, "ERR_INVALID_ARG_TYPE", "hostMallocFree(ptr)");
  free((void*)(uintptr_t)p);
  return undefined_value(env);
}

static napi_value js_driver_version(napi_env env, napi_callback_info info) {
  int version = 0;
  napi_value v;
  (void)info;
  if (!load_driver()) return throw_cu(env, "driverVersion: loading the driver", 3);
  CU_CALL(env, cu.cuDriverGetVersion(&version));
  NAPI_CALL(env, napi_create_int32(env, version, &v));
  return v;
}

static napi_value js_device_name(napi_env env, napi_callback_info info) {
  ARGS(1);
  char name[256] = {0};
  CUdevice dev;
  napi_value v;
  if (!load_driver()) return throw_cu(env, "deviceName: loading the driver", 3);
  CU_CALL(env, cu.cuDeviceGet(&dev, opt_int(env, argv[0], 0)));
  CU_CALL(env, cu.cuDeviceGetName(name, (int)sizeof name - 1, dev));
  NAPI_CALL(env, napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &v));
  return v;
}

static napi_value js_mem_info(napi_env env, napi_callback_info info) {
  ARGS(1);
  size_t free_bytes = 0, total = 0;
  napi_value result, v;
  CU_CALL(env, use_device(opt_int(env, argv[0], 0)));
  CU_CALL(env, cu.cuMemGetInfo_v2(&free_bytes, &total));
  NAPI_CALL(env, napi_create_object(env, &result));
  NAPI_CALL(env, napi_create_double(env, (double)free_bytes, &v));
  NAPI_CALL(env, napi_set_named_property(env, result, "free", v));
  NAPI_CALL(env, napi_create_double(env, (double)total, &v));
  NAPI_CALL(env, napi_set_named_property(env, result, "total", v));
  return result;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
      {"alloc", NULL, js_alloc, NULL, NULL, NULL, napi_enumerable, NULL},
      {"free", NULL, js_free, NULL, NULL, NULL, napi_enumerable, NULL},
      {"hostAlloc", NULL, js_host_alloc, NULL, NULL, NULL, napi_enumerable, NULL},
      {"hostFree", NULL, js_host_free, NULL, NULL, NULL, napi_enumerable, NULL},
      {"upload", NULL, js_upload, NULL, NULL, NULL, napi_enumerable, NULL},
      {"uploadAsync", NULL, js_upload_async, NULL, NULL, NULL, napi_enumerable, NULL},
      {"download", NULL, js_download, NULL, NULL, NULL, napi_enumerable, NULL},
      {"createStream", NULL, js_create_stream, NULL, NULL, NULL, napi_enumerable, NULL},
      {"destroyStream", NULL, js_destroy_stream, NULL, NULL, NULL, napi_enumerable, NULL},
      {"syncStreams", NULL, js_sync_streams, NULL, NULL, NULL, napi_enumerable, NULL},
      {"makeTensor", NULL, js_make_tensor, NULL, NULL, NULL, napi_enumerable, NULL},
      {"deleterCalls", NULL, js_deleter_calls, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setDeleterDelay", NULL, js_set_deleter_delay, NULL, NULL, NULL, napi_enumerable, NULL},
      {"printDeleterCallsAtExit", NULL, js_print_deleter_calls_at_exit, NULL, NULL, NULL, napi_enumerable, NULL},
      {"consume", NULL, js_consume, NULL, NULL, NULL, napi_enumerable, NULL},
      {"currentContext", NULL, js_current_context, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setCurrentContext", NULL, js_set_current_context, NULL, NULL, NULL, napi_enumerable, NULL},
      {"syncStream", NULL, js_sync_stream, NULL, NULL, NULL, napi_enumerable, NULL},
      {"resetDevice", NULL, js_reset_device, NULL, NULL, NULL, napi_enumerable, NULL},
      {"busy", NULL, js_busy, NULL, NULL, NULL, napi_enumerable, NULL},
      {"copyAsync", NULL, js_copy_async, NULL, NULL, NULL, napi_enumerable, NULL},
      {"scribble", NULL, js_scribble, NULL, NULL, NULL, napi_enumerable, NULL},
      {"releaseOnThread", NULL, js_release_on_thread, NULL, NULL, NULL, napi_enumerable, NULL},
      {"releaseInHostFunc", NULL, js_release_in_host_func, NULL, NULL, NULL, napi_enumerable, NULL},
      {"hostFuncReleases", NULL, js_host_func_releases, NULL, NULL, NULL, napi_enumerable, NULL},
      {"allocManaged", NULL, js_alloc_managed, NULL, NULL, NULL, napi_enumerable, NULL},
      {"hostMalloc", NULL, js_host_malloc, NULL, NULL, NULL, napi_enumerable, NULL},
      {"hostMallocFree", NULL, js_host_malloc_free, NULL, NULL, NULL, napi_enumerable, NULL},
      {"driverVersion", NULL, js_driver_version, NULL, NULL, NULL, napi_enumerable, NULL},
      {"deviceName", NULL, js_device_name, NULL, NULL, NULL, napi_enumerable, NULL},
      {"memInfo", NULL, js_mem_info, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  NAPI_CALL(env, napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}
