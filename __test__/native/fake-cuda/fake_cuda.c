/*
 * fake-cuda: a TEST DOUBLE of the CUDA driver API, built as libcuda.so.
 *
 * This is NOT a CUDA driver. It runs no kernels. It exists so that CI
 * machines without a GPU can exercise the CUDA code path of napi-dlpack
 * (cudarc with dynamic loading) end to end. Never install it system-wide.
 *
 * Model (details in README.md):
 *  - "Device memory" lives in ordinary heap buffers. The addresses handed out
 *    come from a reserved PROT_NONE range, so a host dereference of a device
 *    pointer faults instead of silently working.
 *  - Streams are FIFO queues of operations. In immediate mode (default) an
 *    operation runs as soon as it is enqueued. In deferred mode it runs only
 *    when something synchronises its stream; cross-stream ordering comes only
 *    from cuStreamWaitEvent (and the legacy default stream rules).
 *  - Every entry point is counted, and any entry point can be made to fail.
 *
 * Signatures, enum values and symbol names follow cudarc 0.19.10's generated
 * bindings for `cuda-12080` (src/driver/sys/mod.rs).
 */
#define _GNU_SOURCE
#include "fake_cuda.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------ */
/* ABI types (as in cuda.h / cudarc sys bindings)                           */
/* ------------------------------------------------------------------------ */

typedef int CUresult;               /* enum cudaError_enum, 32 bit */
typedef int CUdevice;               /* CUdevice_v1 = int */
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 */
typedef struct fake_ctx *CUcontext;
typedef struct fake_stream *CUstream;
typedef struct fake_event *CUevent;
typedef void (*CUhostFn)(void *userData);
typedef struct { char bytes[16]; } CUuuid;

/* CUresult values used by the implementation. */
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

/* Every CUresult of the CUDA 12.8 headers (cudarc cuda-12080). Only these may
 * ever be returned: cudarc models CUresult as a #[repr(u32)] Rust enum, so an
 * unknown value would be undefined behaviour on the Rust side. */
#define FAKE_CU_ERRORS(X) \
    X(0, CUDA_SUCCESS, "no error") \
    X(1, CUDA_ERROR_INVALID_VALUE, "invalid argument") \
    X(2, CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
    X(3, CUDA_ERROR_NOT_INITIALIZED, "initialization error (cuInit has not been called)") \
    X(4, CUDA_ERROR_DEINITIALIZED, "driver shutting down") \
    X(5, CUDA_ERROR_PROFILER_DISABLED, "profiler disabled") \
    X(6, CUDA_ERROR_PROFILER_NOT_INITIALIZED, "profiler not initialized") \
    X(7, CUDA_ERROR_PROFILER_ALREADY_STARTED, "profiler already started") \
    X(8, CUDA_ERROR_PROFILER_ALREADY_STOPPED, "profiler already stopped") \
    X(34, CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library") \
    X(46, CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) busy or unavailable") \
    X(100, CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
    X(101, CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
    X(102, CUDA_ERROR_DEVICE_NOT_LICENSED, "device not licensed") \
    X(200, CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid") \
    X(201, CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
    X(202, CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current") \
    X(205, CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed") \
    X(206, CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed") \
    X(207, CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped") \
    X(208, CUDA_ERROR_ALREADY_MAPPED, "resource already mapped") \
    X(209, CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device") \
    X(210, CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired") \
    X(211, CUDA_ERROR_NOT_MAPPED, "resource not mapped") \
    X(212, CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "resource not mapped as array") \
    X(213, CUDA_ERROR_NOT_MAPPED_AS_POINTER, "resource not mapped as pointer") \
    X(214, CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered") \
    X(215, CUDA_ERROR_UNSUPPORTED_LIMIT, "limit is not supported on this architecture") \
    X(216, CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "exclusive-thread device already in use") \
    X(217, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices") \
    X(218, CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed") \
    X(219, CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid OpenGL or DirectX context") \
    X(220, CUDA_ERROR_NVLINK_UNCORRECTABLE, "uncorrectable NVLink error detected") \
    X(221, CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found") \
    X(222, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain") \
    X(223, CUDA_ERROR_JIT_COMPILATION_DISABLED, "PTX JIT compilation was disabled") \
    X(224, CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "the provided execution affinity is not supported") \
    X(225, CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "device-side synchronization is not supported") \
    X(226, CUDA_ERROR_CONTAINED, "a contained error occurred") \
    X(300, CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid") \
    X(301, CUDA_ERROR_FILE_NOT_FOUND, "file not found") \
    X(302, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found") \
    X(303, CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed") \
    X(304, CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS") \
    X(400, CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") \
    X(401, CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
    X(402, CUDA_ERROR_LOSSY_QUERY, "attempted introspection would be semantically lossy") \
    X(500, CUDA_ERROR_NOT_FOUND, "named symbol not found") \
    X(600, CUDA_ERROR_NOT_READY, "device not ready") \
    X(700, CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered") \
    X(701, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch") \
    X(702, CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated") \
    X(703, CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "launch uses incompatible texturing mode") \
    X(704, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled") \
    X(705, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled") \
    X(708, CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process") \
    X(709, CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed") \
    X(710, CUDA_ERROR_ASSERT, "device-side assert triggered") \
    X(711, CUDA_ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted") \
    X(712, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped") \
    X(713, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
    X(714, CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error") \
    X(715, CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered") \
    X(716, CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address") \
    X(717, CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space") \
    X(718, CUDA_ERROR_INVALID_PC, "invalid program counter") \
    X(719, CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure") \
    X(720, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch") \
    X(721, CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory not completely freed") \
    X(800, CUDA_ERROR_NOT_PERMITTED, "operation not permitted") \
    X(801, CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
    X(802, CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized") \
    X(803, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination") \
    X(804, CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "forward compatibility was attempted on non supported HW") \
    X(805, CUDA_ERROR_MPS_CONNECTION_FAILED, "MPS client failed to connect to the MPS control daemon or the MPS server") \
    X(806, CUDA_ERROR_MPS_RPC_FAILURE, "the remote procedural call between the MPS server and the MPS client failed") \
    X(807, CUDA_ERROR_MPS_SERVER_NOT_READY, "MPS server is not ready to accept new MPS client requests") \
    X(808, CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "the hardware resources required to create MPS client have been exhausted") \
    X(809, CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "the hardware resources required to support device connections have been exhausted") \
    X(810, CUDA_ERROR_MPS_CLIENT_TERMINATED, "the MPS client has been terminated by the server") \
    X(811, CUDA_ERROR_CDP_NOT_SUPPORTED, "the module is using CUDA Dynamic Parallelism, but the current configuration does not support it") \
    X(812, CUDA_ERROR_CDP_VERSION_MISMATCH, "CUDA Dynamic Parallelism version mismatch") \
    X(900, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
    X(901, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture") \
    X(902, CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences") \
    X(903, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began") \
    X(904, CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work") \
    X(905, CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream") \
    X(906, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "operation would make the legacy stream depend on a capturing blocking stream") \
    X(907, CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on an event last recorded in a capturing stream") \
    X(908, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "attempt to terminate a thread-local capture sequence from another thread") \
    X(909, CUDA_ERROR_TIMEOUT, "wait operation timed out") \
    X(910, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update") \
    X(911, CUDA_ERROR_EXTERNAL_DEVICE, "an async error has occurred in external entity outside of CUDA") \
    X(912, CUDA_ERROR_INVALID_CLUSTER_SIZE, "a kernel launch error has occurred due to cluster misconfiguration") \
    X(913, CUDA_ERROR_FUNCTION_NOT_LOADED, "the function handle is not loaded when calling an API that requires a loaded function") \
    X(914, CUDA_ERROR_INVALID_RESOURCE_TYPE, "one or more resources passed in are not valid resource types for the operation") \
    X(915, CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "one or more resources are insufficient or non-applicable for the operation") \
    X(916, CUDA_ERROR_KEY_ROTATION, "an error happened during the key rotation sequence") \
    X(999, CUDA_ERROR_UNKNOWN, "unknown error")

/* CUresult values that CUDA 13.x drivers return and the 12.8 headers (and
 * cudarc's cuda-12080 enum) lack. The fake returns them only when a test
 * injects one as a fault: a consumer that reads results as cudarc's enum
 * would be undefined behaviour then, which is what such a test is about. */
#define FAKE_CU_ERRORS_13(X) \
    X(36, CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "the call requires a newer driver") \
    X(47, CUDA_ERROR_MULTICAST_RESOURCE_FULL, "multicast resources are exhausted") \
    X(227, CUDA_ERROR_INSUFFICIENT_LOADER_VERSION, "the loader version is insufficient") \
    X(917, CUDA_ERROR_STREAM_DETACHED, "the stream is detached") \
    X(918, CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, "graph recapture failed") \
    X(919, CUDA_ERROR_FABRIC_NOT_READY, "the fabric is not ready")

struct err_desc { int code; const char *name; const char *text; };
#define ERR_ROW(code, name, text) { code, #name, text },
static const struct err_desc g_errors[] = { FAKE_CU_ERRORS(ERR_ROW) FAKE_CU_ERRORS_13(ERR_ROW) };
#undef ERR_ROW
#define N_ERRORS (sizeof g_errors / sizeof g_errors[0])

static const struct err_desc *find_error(int code) {
    for (size_t i = 0; i < N_ERRORS; i++)
        if (g_errors[i].code == code) return &g_errors[i];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Entry point registry (names, counters, faults)                           */
/* ------------------------------------------------------------------------ */

/* Entry points with a real implementation. */
#define FAKE_IMPLEMENTED(X) \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorString) X(cuGetErrorName) \
    X(cuGetProcAddress) X(cuGetProcAddress_v2) \
    X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetUuid) \
    X(cuDeviceGetUuid_v2) X(cuDeviceTotalMem_v2) X(cuDeviceGetAttribute) \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) \
    X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxReset_v2) \
    X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) \
    X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuCtxGetStreamPriorityRange) \
    X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2) \
    X(cuStreamSynchronize) X(cuStreamQuery) X(cuStreamWaitEvent) \
    X(cuStreamIsCapturing) X(cuLaunchHostFunc) \
    X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize) \
    X(cuEventDestroy_v2) X(cuEventElapsedTime) X(cuEventElapsedTime_v2) \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemFreeAsync) \
    X(cuMemAllocManaged) X(cuMemHostAlloc) X(cuMemAllocHost_v2) X(cuMemFreeHost) \
    X(cuMemGetInfo_v2) X(cuMemGetAddressRange_v2) \
    X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoD_v2) \
    X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) \
    X(cuMemcpy) X(cuMemcpyAsync) \
    X(cuMemsetD8_v2) X(cuMemsetD32_v2) X(cuMemsetD8Async) X(cuMemsetD32Async) \
    X(cuPointerGetAttribute) X(cuPointerGetAttributes)

/* Entry points that cudarc's safe/result API can reach but the fake does not
 * model. They exist so that such a call yields Err(CUDA_ERROR_NOT_SUPPORTED)
 * (and a message on stderr) instead of cudarc's "Missing symbol" panic. */
#define FAKE_UNSUPPORTED(X) \
    X(cuCtxCreate_v3) X(cuCtxCreate_v4) X(cuCtxDestroy_v2) X(cuCtxSetFlags) \
    X(cuCtxGetLimit) X(cuCtxSetLimit) X(cuCtxGetCacheConfig) X(cuCtxSetCacheConfig) \
    X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool) X(cuDeviceSetMemPool) \
    X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemPoolTrimTo) \
    X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute) X(cuMemAllocFromPoolAsync) \
    X(cuMemcpyPeerAsync) X(cuMemPrefetchAsync_v2) X(cuMemAdvise_v2) \
    X(cuStreamAttachMemAsync) X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) \
    X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphUpload) \
    X(cuGraphDestroy) X(cuGraphExecDestroy) \
    X(cuModuleLoad) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) \
    X(cuModuleGetGlobal_v2) X(cuLaunchKernel) X(cuLaunchCooperativeKernel) \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuFuncSetCacheConfig) \
    X(cuOccupancyAvailableDynamicSMemPerBlock) \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags) \
    X(cuOccupancyMaxPotentialBlockSize) X(cuOccupancyMaxPotentialBlockSizeWithFlags) \
    X(cuOccupancyMaxActiveClusters) X(cuOccupancyMaxPotentialClusterSize) \
    X(cuImportExternalMemory) X(cuExternalMemoryGetMappedBuffer) \
    X(cuDestroyExternalMemory) X(cuProfilerStart) X(cuProfilerStop)

#define EP_ENUM(n) EP_##n,
enum { FAKE_IMPLEMENTED(EP_ENUM) FAKE_UNSUPPORTED(EP_ENUM) EP_COUNT };
#undef EP_ENUM
#define EP_NAME(n) #n,
static const char *const g_ep_names[EP_COUNT] = {
    FAKE_IMPLEMENTED(EP_NAME) FAKE_UNSUPPORTED(EP_NAME)
};
#undef EP_NAME

struct fault { int armed; unsigned remaining; int result; int persistent; };

/* ------------------------------------------------------------------------ */
/* Global state                                                             */
/* ------------------------------------------------------------------------ */

#define MAX_DEVICES 8
#define CTX_STACK_MAX 16
#define ARENA_ALIGN 512u
#define POISON_BYTE 0xA5

enum alloc_kind { K_DEVICE = 1, K_MANAGED = 2, K_PINNED = 3 };

struct alloc {
    uintptr_t base;          /* address the user sees */
    size_t size;             /* requested size */
    size_t extent;           /* reserved span (device arena) or mapping size */
    unsigned char *storage;  /* where the bytes live (== base unless K_DEVICE) */
    int kind;
    int ordinal;
    int from_pool;
    int free_requested;
    unsigned long long buffer_id;
};

struct alloc_table { struct alloc *v; size_t n, cap; };

struct fake_ctx { uint32_t magic; int ordinal; int refcount; };

enum op_kind { OP_WAIT, OP_COPY, OP_SET, OP_FREE, OP_MARK, OP_HOSTFN };

struct op {
    struct op *next;
    int kind;
    int ep;                      /* entry point that queued it (diagnostics) */
    size_t n;                    /* bytes (copy) or elements (memset) */
    int dst_is_dev, src_is_dev;
    uintptr_t dst, src;          /* device addresses or host pointers */
    unsigned char *src_owned;    /* snapshot of pageable host source */
    unsigned value;              /* memset value */
    unsigned elem;               /* memset element size (1 or 4) */
    uint64_t wait_id, wait_seq;  /* OP_WAIT */
    uint64_t event_id, event_gen;/* OP_MARK */
    CUhostFn fn;                 /* OP_HOSTFN */
    void *user;
};

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u
#define CTX_MAGIC 0x43545854u
#define CU_STREAM_NON_BLOCKING 1u

struct fake_stream {
    uint32_t magic;
    uint64_t id;
    unsigned flags;
    int priority;
    struct fake_ctx *ctx;   /* the context the stream belongs to */
    int destroyed;
    struct op *head, *tail;
    uint64_t enq, done;     /* ops ever enqueued / executed */
    struct fake_stream *next;
};

struct fake_event {
    uint32_t magic;
    uint64_t id;
    unsigned flags;
    struct fake_ctx *ctx;
    int recorded;
    uint64_t stream_id, seq, gen;
    int stamped;
    struct timespec when;
    struct fake_event *next;
};

static pthread_mutex_t G = PTHREAD_MUTEX_INITIALIZER;

/* configuration (environment, read at load) */
static int g_device_count = 1;
static int g_env_deferred = 0;
static int g_mempools = 1;
static int g_driver_version = 12080;
static size_t g_total_mem = (size_t)16 << 30;
static int g_trace = 0;

/* runtime state */
static int g_initialized = 0;
static int g_deferred = 0;
static struct fake_ctx g_ctx[MAX_DEVICES];
/* The default streams of each device's (primary) context, as in CUDA: the
 * handles NULL / CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name the ones of
 * the calling thread's current context. Ids LEGACY_ID0 + ordinal and
 * PTDS_ID0 + ordinal (created streams get ids from g_next_id, above both). */
#define LEGACY_ID0 0x100u
#define PTDS_ID0 0x200u
static struct fake_stream g_legacy[MAX_DEVICES];
static struct fake_stream g_ptds[MAX_DEVICES];
static struct fake_stream *g_streams = NULL;   /* created streams (incl. destroyed, undrained) */
static struct fake_event *g_events = NULL;
static uint64_t g_next_id = 0x1000;
static unsigned long long g_next_buffer_id = 1;
static struct alloc_table g_dev = { NULL, 0, 0 };   /* K_DEVICE, sorted by base */
static struct alloc_table g_host = { NULL, 0, 0 };  /* K_MANAGED, K_PINNED, sorted */
static uintptr_t g_arena_base = 0, g_arena_end = 0, g_rover = 0;
static size_t g_dev_bytes[MAX_DEVICES];

/* counters */
static unsigned long long g_calls[EP_COUNT];
static struct fault g_faults[EP_COUNT];
static long long g_live_dev = 0, g_live_host = 0, g_live_streams = 0, g_live_events = 0;
static long long g_host_syncs = 0, g_async_errors = 0, g_cross_context_frees = 0;
/* Host addresses of the last copy from host memory and the last copy into host memory (0:
 * none since the last reset): tests check that a copy read or wrote the tensor's own memory,
 * not a staging copy of it. */
static long long g_last_host_source = 0, g_last_host_destination = 0;
static CUresult g_async_error = CUDA_SUCCESS;

/* per thread */
static __thread struct fake_ctx *tls_stack[CTX_STACK_MAX];
static __thread int tls_depth = 0;
static __thread int tls_in_host_fn = 0;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "fake-cuda: %s\n", buf);
}

static int find_ep(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < EP_COUNT; i++)
        if (strcmp(g_ep_names[i], name) == 0) return i;
    return -1;
}

static long long env_ll(const char *name, long long dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end = NULL;
    long long x = strtoll(v, &end, 0);
    if (end == v) return dflt;
    return x;
}

static void set_fault_locked(int ep, unsigned nth, int result, int persistent) {
    struct fault *f = &g_faults[ep];
    if (nth == 0) { memset(f, 0, sizeof *f); return; }
    f->armed = 1;
    f->remaining = nth;
    f->result = result;
    f->persistent = persistent;
}

/* FAKE_CUDA_FAULTS="cuMemAlloc_v2:1:2,cuInit:1:34+" (name:nth:result, '+' =
 * every call from the nth on). Applied once when the library is loaded. */
static void parse_env_faults(void) {
    const char *v = getenv("FAKE_CUDA_FAULTS");
    if (!v || !*v) return;
    char *copy = strdup(v);
    if (!copy) return;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char name[128];
        unsigned nth = 0;
        int result = 0;
        char plus = 0;
        int got = sscanf(tok, " %127[^:]:%u:%d%c", name, &nth, &result, &plus);
        int ep = got >= 3 ? find_ep(name) : -1;
        if (ep < 0 || !find_error(result) || result == 0) {
            note("ignoring malformed FAKE_CUDA_FAULTS entry '%s'", tok);
            continue;
        }
        set_fault_locked(ep, nth, result, got == 4 && plus == '+');
    }
    free(copy);
}

__attribute__((constructor)) static void fake_cuda_load(void) {
    long long n = env_ll("FAKE_CUDA_DEVICE_COUNT", 1);
    if (n < 0) n = 0;
    if (n > MAX_DEVICES) n = MAX_DEVICES;
    g_device_count = (int)n;
    g_env_deferred = env_ll("FAKE_CUDA_DEFERRED", 0) != 0;
    g_deferred = g_env_deferred;
    g_mempools = env_ll("FAKE_CUDA_MEMORY_POOLS", 1) != 0;
    g_driver_version = (int)env_ll("FAKE_CUDA_DRIVER_VERSION", 12080);
    long long mib = env_ll("FAKE_CUDA_TOTAL_MEM_MIB", 16384);
    if (mib > 0) g_total_mem = (size_t)mib << 20;
    g_trace = env_ll("FAKE_CUDA_TRACE", 0) != 0;
    for (int i = 0; i < MAX_DEVICES; i++) {
        g_ctx[i].magic = CTX_MAGIC;
        g_ctx[i].ordinal = i;
        g_ctx[i].refcount = 0;
        g_legacy[i].magic = g_ptds[i].magic = STREAM_MAGIC;
        g_legacy[i].id = LEGACY_ID0 + (unsigned)i;
        g_ptds[i].id = PTDS_ID0 + (unsigned)i;
        g_legacy[i].ctx = g_ptds[i].ctx = &g_ctx[i];
    }
    parse_env_faults();
}

/* Called at the top of every entry point: count, trace, fault, lock.
 * On CUDA_SUCCESS the global lock is held and must be released by leave(). */
static CUresult enter(int ep) {
    __atomic_add_fetch(&g_calls[ep], 1, __ATOMIC_RELAXED);
    if (g_trace) fprintf(stderr, "fake-cuda: call %s\n", g_ep_names[ep]);
    if (tls_in_host_fn) {
        note("%s called from inside a host function (cuLaunchHostFunc); CUDA forbids this",
             g_ep_names[ep]);
        return CUDA_ERROR_NOT_PERMITTED;
    }
    pthread_mutex_lock(&G);
    struct fault *f = &g_faults[ep];
    if (f->armed) {
        if (f->remaining > 1) {
            f->remaining--;
        } else {
            int r = f->result;
            if (!f->persistent) memset(f, 0, sizeof *f);
            pthread_mutex_unlock(&G);
            if (g_trace) fprintf(stderr, "fake-cuda: injected fault %s -> %d\n", g_ep_names[ep], r);
            return r;
        }
    }
    return CUDA_SUCCESS;
}

static void sweep_streams(void);

static CUresult leave(CUresult r) {
    sweep_streams();
    pthread_mutex_unlock(&G);
    return r;
}

#define BEGIN(name) \
    do { CUresult enter_r_ = enter(EP_##name); if (enter_r_ != CUDA_SUCCESS) return enter_r_; } while (0)
#define RETURN(r) return leave(r)

static struct fake_ctx *current_ctx(void) {
    return tls_depth > 0 ? tls_stack[tls_depth - 1] : NULL;
}

static int valid_ctx(struct fake_ctx *c) {
    return c && c >= &g_ctx[0] && c < &g_ctx[g_device_count] && c->magic == CTX_MAGIC;
}

static CUresult need_init(void) {
    return g_initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult need_ctx(struct fake_ctx **out) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    struct fake_ctx *c = current_ctx();
    if (!valid_ctx(c) || c->refcount <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (out) *out = c;
    return CUDA_SUCCESS;
}

static CUresult need_device(CUdevice dev) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= g_device_count) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ------------------------------------------------------------------------ */
/* Allocation bookkeeping                                                   */
/* ------------------------------------------------------------------------ */

static int arena_reserve(void) {
    if (g_arena_base) return 0;
    for (size_t sz = (size_t)1 << 40; sz >= ((size_t)1 << 30); sz >>= 1) {
        void *p = mmap(NULL, sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            g_arena_base = (uintptr_t)p;
            g_arena_end = g_arena_base + sz;
            g_rover = g_arena_base;
            return 0;
        }
    }
    return -1;
}

/* index of the first element with base >= p */
static size_t lower_bound(const struct alloc_table *t, uintptr_t p) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].base < p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static struct alloc *table_find(const struct alloc_table *t, uintptr_t p) {
    size_t i = lower_bound(t, p + 1); /* first with base > p */
    if (i == 0) return NULL;
    struct alloc *a = &t->v[i - 1];
    return (p - a->base < a->size) ? a : NULL;
}

static int table_insert(struct alloc_table *t, const struct alloc *a) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct alloc *v = realloc(t->v, cap * sizeof *v);
        if (!v) return -1;
        t->v = v;
        t->cap = cap;
    }
    size_t i = lower_bound(t, a->base);
    memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
    t->v[i] = *a;
    t->n++;
    return 0;
}

static void table_remove(struct alloc_table *t, struct alloc *a) {
    size_t i = (size_t)(a - t->v);
    memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
    t->n--;
}

/* Any allocation (device, managed or pinned) containing p. */
static struct alloc *find_alloc(uintptr_t p, struct alloc_table **which) {
    struct alloc *a = table_find(&g_dev, p);
    if (a) { if (which) *which = &g_dev; return a; }
    a = table_find(&g_host, p);
    if (a && which) *which = &g_host;
    return a;
}

static int in_arena(uintptr_t p) { return g_arena_base && p >= g_arena_base && p < g_arena_end; }

/* Storage for [p, p+n) if it lies inside one allocation. */
static unsigned char *resolve(uintptr_t p, size_t n, int allow_free_requested) {
    struct alloc *a = find_alloc(p, NULL);
    if (!a) return NULL;
    if (a->free_requested && !allow_free_requested) return NULL;
    size_t off = p - a->base;
    if (n > a->size - off) return NULL;
    return a->storage + off;
}

/* Next-fit placement in the arena, so freed addresses are not reused soon
 * (use-after-free then fails loudly instead of hitting a new allocation). */
static uintptr_t arena_place(size_t extent) {
    for (int pass = 0; pass < 2; pass++) {
        uintptr_t cand = pass == 0 ? g_rover : g_arena_base;
        size_t i = lower_bound(&g_dev, cand);
        if (i > 0) {
            uintptr_t prev_end = g_dev.v[i - 1].base + g_dev.v[i - 1].extent;
            if (prev_end > cand) cand = prev_end;
        }
        for (;;) {
            uintptr_t limit = i < g_dev.n ? g_dev.v[i].base : g_arena_end;
            if (cand <= limit && limit - cand >= extent) {
                g_rover = cand + extent;
                return cand;
            }
            if (i >= g_dev.n) break;
            cand = g_dev.v[i].base + g_dev.v[i].extent;
            i++;
        }
    }
    return 0;
}

static CUresult alloc_device(struct fake_ctx *c, size_t size, int from_pool, CUdeviceptr *out) {
    int ord = c->ordinal;
    if (size > g_total_mem || g_dev_bytes[ord] > g_total_mem - size) return CUDA_ERROR_OUT_OF_MEMORY;
    if (arena_reserve() != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc a;
    memset(&a, 0, sizeof a);
    a.size = size;
    a.extent = round_up(size ? size : 1, ARENA_ALIGN);
    a.base = arena_place(a.extent);
    if (!a.base) return CUDA_ERROR_OUT_OF_MEMORY;
    a.storage = malloc(size ? size : 1);
    if (!a.storage) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(a.storage, POISON_BYTE, size);
    a.kind = K_DEVICE;
    a.ordinal = ord;
    a.from_pool = from_pool;
    a.buffer_id = g_next_buffer_id++;
    if (table_insert(&g_dev, &a) != 0) { free(a.storage); return CUDA_ERROR_OUT_OF_MEMORY; }
    g_dev_bytes[ord] += size;
    g_live_dev++;
    *out = (CUdeviceptr)a.base;
    return CUDA_SUCCESS;
}

static CUresult alloc_hostlike(struct fake_ctx *c, size_t size, int kind, uintptr_t *out) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t extent = round_up(size ? size : 1, page);
    if (kind == K_MANAGED &&
        (size > g_total_mem || g_dev_bytes[c->ordinal] > g_total_mem - size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, extent, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, POISON_BYTE, size);
    struct alloc a;
    memset(&a, 0, sizeof a);
    a.base = (uintptr_t)p;
    a.size = size ? size : 1;
    a.extent = extent;
    a.storage = p;
    a.kind = kind;
    a.ordinal = c->ordinal;
    a.buffer_id = g_next_buffer_id++;
    if (table_insert(&g_host, &a) != 0) { munmap(p, extent); return CUDA_ERROR_OUT_OF_MEMORY; }
    if (kind == K_MANAGED) { g_dev_bytes[c->ordinal] += a.size; g_live_dev++; }
    else g_live_host++;
    *out = a.base;
    return CUDA_SUCCESS;
}

/* Really release an allocation (free already accounted as requested). */
static void release_alloc(struct alloc_table *t, struct alloc *a) {
    if (a->kind == K_DEVICE) {
        free(a->storage);
        g_dev_bytes[a->ordinal] -= a->size;
    } else {
        if (a->kind == K_MANAGED) g_dev_bytes[a->ordinal] -= a->size;
        munmap(a->storage, a->extent);
    }
    table_remove(t, a);
}

/* ------------------------------------------------------------------------ */
/* Streams, events, the operation queue                                     */
/* ------------------------------------------------------------------------ */

static struct fake_stream *stream_by_id(uint64_t id) {
    if (id >= LEGACY_ID0 && id < LEGACY_ID0 + MAX_DEVICES) return &g_legacy[id - LEGACY_ID0];
    if (id >= PTDS_ID0 && id < PTDS_ID0 + MAX_DEVICES) return &g_ptds[id - PTDS_ID0];
    for (struct fake_stream *s = g_streams; s; s = s->next)
        if (s->id == id) return s;
    return NULL;
}

static struct fake_event *event_by_id(uint64_t id) {
    for (struct fake_event *e = g_events; e; e = e->next)
        if (e->id == id) return e;
    return NULL;
}

/* Resolve a CUstream handle. NULL and CU_STREAM_LEGACY (0x1) are the legacy
 * default stream, CU_STREAM_PER_THREAD (0x2) the per-thread default stream, of
 * the current context; both need one, like in the real driver. */
static CUresult lookup_stream(CUstream h, struct fake_stream **out) {
    uintptr_t v = (uintptr_t)h;
    if (v == 0 || v == 1 || v == 2) {
        struct fake_ctx *c = NULL;
        CUresult r = need_ctx(&c);
        if (r) return r;
        *out = v == 2 ? &g_ptds[c->ordinal] : &g_legacy[c->ordinal];
        return CUDA_SUCCESS;
    }
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    for (struct fake_stream *s = g_streams; s; s = s->next)
        if (s == h && !s->destroyed) { *out = s; return CUDA_SUCCESS; }
    return CUDA_ERROR_INVALID_HANDLE;
}

static CUresult lookup_event(CUevent h, struct fake_event **out) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    for (struct fake_event *e = g_events; e; e = e->next)
        if (e == h) { *out = e; return CUDA_SUCCESS; }
    return CUDA_ERROR_INVALID_HANDLE;
}

static struct op *new_op(int kind, int ep) {
    struct op *op = calloc(1, sizeof *op);
    if (op) { op->kind = kind; op->ep = ep; }
    return op;
}

static void push_raw(struct fake_stream *s, struct op *op) {
    op->next = NULL;
    if (s->tail) s->tail->next = op; else s->head = op;
    s->tail = op;
    s->enq++;
}

static int is_legacy(const struct fake_stream *s) {
    return s >= &g_legacy[0] && s < &g_legacy[MAX_DEVICES];
}

static struct fake_stream *legacy_of(const struct fake_ctx *c) { return &g_legacy[c->ordinal]; }

static int is_blocking(const struct fake_stream *s) {
    return !is_legacy(s) && !(s->flags & CU_STREAM_NON_BLOCKING);
}

static void push_wait(struct fake_stream *s, uint64_t id, uint64_t seq, int ep) {
    struct op *w = new_op(OP_WAIT, ep);
    if (!w) return; /* out of host memory: ordering degrades, never crashes */
    w->wait_id = id;
    w->wait_seq = seq;
    push_raw(s, w);
}

static void flush(struct fake_stream *s, uint64_t upto);

/* Queue an operation; implicit legacy-stream ordering: work on the legacy
 * stream waits for all pending work of blocking streams, and work on a
 * blocking stream waits for pending legacy-stream work. Non-blocking streams
 * (cudarc's new_stream) are not ordered against the legacy stream. */
static void enqueue(struct fake_stream *s, struct op *op) {
    if (is_legacy(s)) {
        struct fake_stream *p = &g_ptds[s->ctx->ordinal];
        if (p->enq > p->done) push_wait(s, p->id, p->enq, op->ep);
        for (struct fake_stream *b = g_streams; b; b = b->next)
            if (b->ctx == s->ctx && is_blocking(b) && b->enq > b->done)
                push_wait(s, b->id, b->enq, op->ep);
    } else if (is_blocking(s)) {
        struct fake_stream *l = legacy_of(s->ctx);
        if (l->enq > l->done) push_wait(s, l->id, l->enq, op->ep);
    }
    push_raw(s, op);
    if (!g_deferred) flush(s, s->enq);
}

static void async_fault(const struct op *op, uintptr_t addr, size_t n) {
    g_async_errors++;
    if (g_async_error == CUDA_SUCCESS) g_async_error = CUDA_ERROR_ILLEGAL_ADDRESS;
    fprintf(stderr,
            "fake-cuda: queued %s touched device memory 0x%llx (+%zu bytes) that is no longer "
            "allocated when it ran: use-after-free or missing stream/event ordering\n",
            g_ep_names[op->ep], (unsigned long long)addr, n);
}

static void exec_op(struct op *op) {
    switch (op->kind) {
    case OP_WAIT: {
        struct fake_stream *t = stream_by_id(op->wait_id);
        if (t) flush(t, op->wait_seq);
        break;
    }
    case OP_COPY: {
        unsigned char *d = op->dst_is_dev ? resolve(op->dst, op->n, 1) : (unsigned char *)op->dst;
        const unsigned char *s = op->src_is_dev ? resolve(op->src, op->n, 1)
                                 : op->src_owned ? op->src_owned : (const unsigned char *)op->src;
        if (!d) async_fault(op, op->dst, op->n);
        else if (!s) async_fault(op, op->src, op->n);
        else memmove(d, s, op->n);
        free(op->src_owned);
        op->src_owned = NULL;
        break;
    }
    case OP_SET: {
        unsigned char *d = resolve(op->dst, op->n * op->elem, 1);
        if (!d) { async_fault(op, op->dst, op->n * op->elem); break; }
        if (op->elem == 1) {
            memset(d, (int)(op->value & 0xFF), op->n);
        } else {
            uint32_t v = op->value;
            for (size_t i = 0; i < op->n; i++) memcpy(d + 4 * i, &v, 4);
        }
        break;
    }
    case OP_FREE: {
        struct alloc_table *t = NULL;
        struct alloc *a = find_alloc(op->dst, &t);
        if (a && a->base == op->dst) release_alloc(t, a);
        break;
    }
    case OP_MARK: {
        struct fake_event *e = event_by_id(op->event_id);
        if (e && e->gen == op->event_gen) {
            clock_gettime(CLOCK_MONOTONIC, &e->when);
            e->stamped = 1;
        }
        break;
    }
    case OP_HOSTFN:
        tls_in_host_fn = 1;
        op->fn(op->user);
        tls_in_host_fn = 0;
        break;
    }
}

/* Run queued work of s until `upto` operations have executed. Waits recurse
 * into the stream they depend on; dependencies always point at work queued
 * earlier, so there are no cycles. */
static void flush(struct fake_stream *s, uint64_t upto) {
    while (s->done < upto && s->head) {
        struct op *op = s->head;
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        exec_op(op);
        s->done++;
        free(op->src_owned);
        free(op);
    }
}

static void flush_all(void) {
    for (int i = 0; i < MAX_DEVICES; i++) {
        flush(&g_legacy[i], g_legacy[i].enq);
        flush(&g_ptds[i], g_ptds[i].enq);
    }
    for (struct fake_stream *s = g_streams; s; s = s->next) flush(s, s->enq);
}

/* Free destroyed streams whose queue has drained. */
static void sweep_streams(void) {
    struct fake_stream **pp = &g_streams;
    while (*pp) {
        struct fake_stream *s = *pp;
        if (s->destroyed && s->done == s->enq) {
            *pp = s->next;
            s->magic = 0;
            free(s);
        } else {
            pp = &s->next;
        }
    }
}

static CUresult take_async_error(void) {
    CUresult r = g_async_error;
    g_async_error = CUDA_SUCCESS;
    return r;
}

static int event_complete(const struct fake_event *e) {
    if (!e->recorded) return 1;
    struct fake_stream *t = stream_by_id(e->stream_id);
    return !t || t->done >= e->seq;
}

static void event_flush(const struct fake_event *e) {
    if (!e->recorded) return;
    struct fake_stream *t = stream_by_id(e->stream_id);
    if (t) flush(t, e->seq);
}

/* ------------------------------------------------------------------------ */
/* Initialisation, version, errors, proc address                            */
/* ------------------------------------------------------------------------ */

EXPORT CUresult cuInit(unsigned int Flags) {
    BEGIN(cuInit);
    if (Flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (g_device_count == 0) RETURN(CUDA_ERROR_NO_DEVICE);
    g_initialized = 1;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDriverGetVersion(int *driverVersion) {
    BEGIN(cuDriverGetVersion);
    if (!driverVersion) RETURN(CUDA_ERROR_INVALID_VALUE);
    *driverVersion = g_driver_version;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
    BEGIN(cuGetErrorString);
    if (!pStr) RETURN(CUDA_ERROR_INVALID_VALUE);
    const struct err_desc *d = find_error(error);
    *pStr = d ? d->text : NULL;
    RETURN(d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
    BEGIN(cuGetErrorName);
    if (!pStr) RETURN(CUDA_ERROR_INVALID_VALUE);
    const struct err_desc *d = find_error(error);
    *pStr = d ? d->name : NULL;
    RETURN(d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

static void *proc_lookup(const char *symbol); /* table at the end of the file */

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    unsigned long long flags, int *symbolStatus) {
    BEGIN(cuGetProcAddress_v2);
    (void)cudaVersion;
    (void)flags;
    if (!symbol || !pfn) RETURN(CUDA_ERROR_INVALID_VALUE);
    void *f = proc_lookup(symbol);
    *pfn = f;
    if (symbolStatus) *symbolStatus = f ? 0 : 1; /* SUCCESS / SYMBOL_NOT_FOUND */
    RETURN(f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND);
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                 unsigned long long flags) {
    BEGIN(cuGetProcAddress);
    (void)cudaVersion;
    (void)flags;
    if (!symbol || !pfn) RETURN(CUDA_ERROR_INVALID_VALUE);
    void *f = proc_lookup(symbol);
    *pfn = f;
    RETURN(f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND);
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

EXPORT CUresult cuDeviceGetCount(int *count) {
    BEGIN(cuDeviceGetCount);
    if (!count) RETURN(CUDA_ERROR_INVALID_VALUE);
    /* With FAKE_CUDA_DEVICE_COUNT=0 cuInit fails with NO_DEVICE (like a real
     * driver on a GPU-less machine) but the count is still reported as 0. */
    if (g_device_count == 0) { *count = 0; RETURN(CUDA_SUCCESS); }
    if (!g_initialized) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    *count = g_device_count;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    BEGIN(cuDeviceGet);
    if (!device) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r = need_device(ordinal);
    if (r) RETURN(r);
    *device = ordinal;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    BEGIN(cuDeviceGetName);
    CUresult r = need_device(dev);
    if (r) RETURN(r);
    if (!name || len <= 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    snprintf(name, (size_t)len, "Fake CUDA Device %d (fake-cuda test double)", dev);
    RETURN(CUDA_SUCCESS);
}

static CUresult device_uuid(CUuuid *uuid, CUdevice dev) {
    CUresult r = need_device(dev);
    if (r) return r;
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, "fakecuda-dev-00", 16);
    uuid->bytes[15] = (char)('0' + dev);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    BEGIN(cuDeviceGetUuid);
    RETURN(device_uuid(uuid, dev));
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
    BEGIN(cuDeviceGetUuid_v2);
    RETURN(device_uuid(uuid, dev));
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    BEGIN(cuDeviceTotalMem_v2);
    CUresult r = need_device(dev);
    if (r) RETURN(r);
    if (!bytes) RETURN(CUDA_ERROR_INVALID_VALUE);
    *bytes = g_total_mem;
    RETURN(CUDA_SUCCESS);
}

static int device_attribute(int attrib, int dev) {
    switch (attrib) {
    case 1: return 1024;          /* MAX_THREADS_PER_BLOCK */
    case 2: case 3: return 1024;  /* MAX_BLOCK_DIM_X/Y */
    case 4: return 64;            /* MAX_BLOCK_DIM_Z */
    case 5: return 2147483647;    /* MAX_GRID_DIM_X */
    case 6: case 7: return 65535; /* MAX_GRID_DIM_Y/Z */
    case 8: return 49152;         /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 9: return 65536;         /* TOTAL_CONSTANT_MEMORY */
    case 10: return 32;           /* WARP_SIZE */
    case 11: return 2147483647;   /* MAX_PITCH */
    case 12: return 65536;        /* MAX_REGISTERS_PER_BLOCK */
    case 13: return 1410000;      /* CLOCK_RATE (kHz) */
    case 16: return 8;            /* MULTIPROCESSOR_COUNT */
    case 19: return 1;            /* CAN_MAP_HOST_MEMORY */
    case 31: return 1;            /* CONCURRENT_KERNELS */
    case 33: return 0x10 + dev;   /* PCI_BUS_ID */
    case 36: return 1215000;      /* MEMORY_CLOCK_RATE */
    case 37: return 256;          /* GLOBAL_MEMORY_BUS_WIDTH */
    case 38: return 4 << 20;      /* L2_CACHE_SIZE */
    case 39: return 2048;         /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 40: return 2;            /* ASYNC_ENGINE_COUNT */
    case 41: return 1;            /* UNIFIED_ADDRESSING */
    case 75: return 8;            /* COMPUTE_CAPABILITY_MAJOR */
    case 76: return 0;            /* COMPUTE_CAPABILITY_MINOR */
    case 78: return 1;            /* STREAM_PRIORITIES_SUPPORTED */
    case 81: return 167936;       /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
    case 82: return 65536;        /* MAX_REGISTERS_PER_MULTIPROCESSOR */
    case 83: return 1;            /* MANAGED_MEMORY */
    case 89: return 1;            /* CONCURRENT_MANAGED_ACCESS */
    case 95: return 1;            /* COOPERATIVE_LAUNCH */
    case 97: return 166912;       /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    case 106: return 32;          /* MAX_BLOCKS_PER_MULTIPROCESSOR */
    case 115: return g_mempools;  /* MEMORY_POOLS_SUPPORTED */
    default: return 0;
    }
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    BEGIN(cuDeviceGetAttribute);
    CUresult r = need_device(dev);
    if (r) RETURN(r);
    if (!pi || attrib < 1 || attrib >= 144) RETURN(CUDA_ERROR_INVALID_VALUE); /* 144 = ..._MAX */
    *pi = device_attribute(attrib, dev);
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* Contexts                                                                 */
/* ------------------------------------------------------------------------ */

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    BEGIN(cuDevicePrimaryCtxRetain);
    CUresult r = need_device(dev);
    if (r) RETURN(r);
    if (!pctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    g_ctx[dev].refcount++;
    *pctx = &g_ctx[dev];
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    BEGIN(cuDevicePrimaryCtxRelease_v2);
    CUresult r = need_device(dev);
    if (r) RETURN(r);
    if (g_ctx[dev].refcount <= 0) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (--g_ctx[dev].refcount == 0) flush_all(); /* the context goes away: drain its work */
    RETURN(CUDA_SUCCESS);
}

/* What cudaDeviceReset() does: the context's queued work runs, then every allocation of the
 * device (device, managed and pinned memory) is freed. The context itself, its streams and
 * events stay usable (a real driver makes them anew on the next use). */
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    BEGIN(cuDevicePrimaryCtxReset_v2);
    CUresult r = need_device(dev);
    if (r) RETURN(r);
    flush_all();
    struct alloc_table *tables[2] = { &g_dev, &g_host };
    for (int t = 0; t < 2; t++) {
        for (size_t i = tables[t]->n; i-- > 0;) {
            struct alloc *a = &tables[t]->v[i];
            if (a->ordinal != dev) continue;
            if (!a->free_requested) {
                if (a->kind == K_PINNED) g_live_host--;
                else g_live_dev--;
            }
            a->free_requested = 1;
            release_alloc(tables[t], a);
        }
    }
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    BEGIN(cuDevicePrimaryCtxGetState);
    CUresult r = need_device(dev);
    if (r) RETURN(r);
    if (!flags || !active) RETURN(CUDA_ERROR_INVALID_VALUE);
    *flags = 0;
    *active = g_ctx[dev].refcount > 0;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
    BEGIN(cuCtxGetCurrent);
    CUresult r = need_init();
    if (r) RETURN(r);
    if (!pctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    *pctx = current_ctx();
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    BEGIN(cuCtxSetCurrent);
    CUresult r = need_init();
    if (r) RETURN(r);
    if (ctx == NULL) {
        if (tls_depth > 0) tls_depth--;
        RETURN(CUDA_SUCCESS);
    }
    if (!valid_ctx(ctx)) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (tls_depth == 0) tls_depth = 1;
    tls_stack[tls_depth - 1] = ctx;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    BEGIN(cuCtxPushCurrent_v2);
    CUresult r = need_init();
    if (r) RETURN(r);
    if (!valid_ctx(ctx)) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (tls_depth >= CTX_STACK_MAX) RETURN(CUDA_ERROR_INVALID_VALUE);
    tls_stack[tls_depth++] = ctx;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
    BEGIN(cuCtxPopCurrent_v2);
    CUresult r = need_init();
    if (r) RETURN(r);
    if (tls_depth == 0) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    struct fake_ctx *c = tls_stack[--tls_depth];
    if (pctx) *pctx = c;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
    BEGIN(cuCtxGetDevice);
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) RETURN(r);
    if (!device) RETURN(CUDA_ERROR_INVALID_VALUE);
    *device = c->ordinal;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxSynchronize(void) {
    BEGIN(cuCtxSynchronize);
    CUresult r = need_ctx(NULL);
    if (r) RETURN(r);
    flush_all();
    g_host_syncs++;
    RETURN(take_async_error());
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
    BEGIN(cuCtxGetStreamPriorityRange);
    CUresult r = need_ctx(NULL);
    if (r) RETURN(r);
    if (leastPriority) *leastPriority = 0;
    if (greatestPriority) *greatestPriority = -5;
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                  */
/* ------------------------------------------------------------------------ */

static CUresult stream_create(CUstream *ph, unsigned flags, int priority) {
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    if (!ph || (flags & ~CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    struct fake_stream *s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = STREAM_MAGIC;
    s->id = g_next_id++;
    s->flags = flags;
    s->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
    s->ctx = c;
    s->next = g_streams;
    g_streams = s;
    g_live_streams++;
    *ph = s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
    BEGIN(cuStreamCreate);
    RETURN(stream_create(phStream, Flags, 0));
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
    BEGIN(cuStreamCreateWithPriority);
    RETURN(stream_create(phStream, flags, priority));
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
    BEGIN(cuStreamDestroy_v2);
    uintptr_t v = (uintptr_t)hStream;
    if (v <= 2) RETURN(g_initialized ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_NOT_INITIALIZED);
    struct fake_stream *s = NULL;
    CUresult r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    /* Like the real driver, pending work still completes later (when
     * something synchronises it); the handle is invalid from now on. */
    s->destroyed = 1;
    g_live_streams--;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    BEGIN(cuStreamSynchronize);
    struct fake_stream *s = NULL;
    CUresult r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    flush(s, s->enq);
    g_host_syncs++;
    RETURN(take_async_error());
}

EXPORT CUresult cuStreamQuery(CUstream hStream) {
    BEGIN(cuStreamQuery);
    struct fake_stream *s = NULL;
    CUresult r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    if (s->done == s->enq) RETURN(CUDA_SUCCESS);
    /* Deferred mode: report NOT_READY once, then let the work run so that a
     * polling loop terminates. */
    flush(s, s->enq);
    RETURN(CUDA_ERROR_NOT_READY);
}

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    BEGIN(cuStreamWaitEvent);
    struct fake_stream *s = NULL;
    struct fake_event *e = NULL;
    CUresult r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    r = lookup_event(hEvent, &e);
    if (r) RETURN(r);
    if (Flags & ~1u) RETURN(CUDA_ERROR_INVALID_VALUE);
    /* Waiting on a never-recorded or already complete event is a no-op. The
     * dependency is captured now: re-recording e later does not affect it. */
    if (!event_complete(e)) {
        struct op *op = new_op(OP_WAIT, EP_cuStreamWaitEvent);
        if (!op) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        op->wait_id = e->stream_id;
        op->wait_seq = e->seq;
        enqueue(s, op);
    }
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamIsCapturing(CUstream hStream, int *captureStatus) {
    BEGIN(cuStreamIsCapturing);
    struct fake_stream *s = NULL;
    CUresult r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    if (!captureStatus) RETURN(CUDA_ERROR_INVALID_VALUE);
    *captureStatus = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData) {
    BEGIN(cuLaunchHostFunc);
    struct fake_stream *s = NULL;
    CUresult r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    if (!fn) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct op *op = new_op(OP_HOSTFN, EP_cuLaunchHostFunc);
    if (!op) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    op->fn = fn;
    op->user = userData;
    enqueue(s, op);
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

#define CU_EVENT_DISABLE_TIMING 2u

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
    BEGIN(cuEventCreate);
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) RETURN(r);
    if (!phEvent || (Flags & ~7u)) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct fake_event *e = calloc(1, sizeof *e);
    if (!e) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    e->magic = EVENT_MAGIC;
    e->id = g_next_id++;
    e->flags = Flags;
    e->ctx = c;
    e->next = g_events;
    g_events = e;
    g_live_events++;
    *phEvent = e;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    BEGIN(cuEventRecord);
    struct fake_event *e = NULL;
    struct fake_stream *s = NULL;
    CUresult r = lookup_event(hEvent, &e);
    if (r) RETURN(r);
    r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    if (s->ctx && s->ctx != e->ctx) RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct op *op = new_op(OP_MARK, EP_cuEventRecord);
    if (!op) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    e->gen++;
    e->recorded = 1;
    e->stamped = 0;
    op->event_id = e->id;
    op->event_gen = e->gen;
    e->stream_id = s->id;
    enqueue(s, op);
    /* enqueue may have added implicit waits before the marker; the event
     * covers everything queued on s so far. In immediate mode it has run. */
    e->seq = s->enq;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuEventQuery(CUevent hEvent) {
    BEGIN(cuEventQuery);
    struct fake_event *e = NULL;
    CUresult r = lookup_event(hEvent, &e);
    if (r) RETURN(r);
    if (event_complete(e)) RETURN(CUDA_SUCCESS);
    event_flush(e); /* NOT_READY once, then the work runs (see cuStreamQuery) */
    RETURN(CUDA_ERROR_NOT_READY);
}

EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
    BEGIN(cuEventSynchronize);
    struct fake_event *e = NULL;
    CUresult r = lookup_event(hEvent, &e);
    if (r) RETURN(r);
    event_flush(e);
    g_host_syncs++;
    RETURN(take_async_error());
}

EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
    BEGIN(cuEventDestroy_v2);
    struct fake_event *e = NULL;
    CUresult r = lookup_event(hEvent, &e);
    if (r) RETURN(r);
    for (struct fake_event **pp = &g_events; *pp; pp = &(*pp)->next) {
        if (*pp == e) { *pp = e->next; break; }
    }
    e->magic = 0;
    free(e);
    g_live_events--;
    RETURN(CUDA_SUCCESS);
}

static CUresult elapsed(float *ms, CUevent hStart, CUevent hEnd) {
    struct fake_event *a = NULL, *b = NULL;
    CUresult r = lookup_event(hStart, &a);
    if (r) return r;
    r = lookup_event(hEnd, &b);
    if (r) return r;
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    if (!event_complete(a) || !event_complete(b) || !a->stamped || !b->stamped)
        return CUDA_ERROR_NOT_READY;
    double d = (double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
               (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6;
    *ms = (float)d;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
    BEGIN(cuEventElapsedTime);
    RETURN(elapsed(pMilliseconds, hStart, hEnd));
}

EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
    BEGIN(cuEventElapsedTime_v2);
    RETURN(elapsed(pMilliseconds, hStart, hEnd));
}

/* ------------------------------------------------------------------------ */
/* Memory management                                                        */
/* ------------------------------------------------------------------------ */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    BEGIN(cuMemAlloc_v2);
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) RETURN(r);
    if (!dptr || bytesize == 0) RETURN(CUDA_ERROR_INVALID_VALUE); /* as documented */
    RETURN(alloc_device(c, bytesize, 0, dptr));
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    BEGIN(cuMemAllocAsync);
    struct fake_ctx *c = NULL;
    struct fake_stream *s = NULL;
    CUresult r = need_ctx(&c);
    if (r) RETURN(r);
    r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    if (!dptr) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (bytesize == 0) { *dptr = 0; RETURN(CUDA_SUCCESS); } /* cudarc's CudaStream::null() */
    RETURN(alloc_device(c, bytesize, 1, dptr));
}

/* Validate a pointer passed to a free: must be the base of a live
 * allocation of the given kinds whose free has not been requested. */
static CUresult check_free(uintptr_t p, int kind_a, int kind_b, struct alloc **out) {
    struct alloc *a = find_alloc(p, NULL);
    if (!a || a->base != p || a->free_requested || (a->kind != kind_a && a->kind != kind_b))
        return CUDA_ERROR_INVALID_VALUE;
    *out = a;
    return CUDA_SUCCESS;
}

/* A free ordered in another context than the allocation's (on another
 * device's stream): the driver accepts it, but it is not ordered after the
 * work queued in the allocation's own context. Counted and noted. */
static void note_cross_context_free(const struct alloc *a, const struct fake_ctx *c, int ep) {
    if (!c || c->ordinal == a->ordinal) return;
    g_cross_context_frees++;
    note("%s: memory of device %d freed in the context of device %d (not ordered after its "
         "own device's work)", g_ep_names[ep], a->ordinal, c->ordinal);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    BEGIN(cuMemFree_v2);
    CUresult r = need_ctx(NULL);
    if (r) RETURN(r);
    if (dptr == 0) RETURN(CUDA_SUCCESS);
    struct alloc *a = NULL;
    r = check_free((uintptr_t)dptr, K_DEVICE, K_MANAGED, &a);
    if (r) RETURN(r);
    note_cross_context_free(a, current_ctx(), EP_cuMemFree_v2);
    /* cuMemFree implicitly synchronises the device: drain all queues first
     * (not counted as a host sync). */
    flush_all();
    struct alloc_table *t = NULL;
    a = find_alloc((uintptr_t)dptr, &t);
    a->free_requested = 1;
    g_live_dev--;
    release_alloc(t, a);
    RETURN(take_async_error());
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    BEGIN(cuMemFreeAsync);
    struct fake_stream *s = NULL;
    CUresult r = lookup_stream(hStream, &s);
    if (r) RETURN(r);
    if (dptr == 0) RETURN(CUDA_SUCCESS);
    struct alloc *a = NULL;
    r = check_free((uintptr_t)dptr, K_DEVICE, K_MANAGED, &a);
    if (r) RETURN(r);
    note_cross_context_free(a, s->ctx, EP_cuMemFreeAsync);
    struct op *op = new_op(OP_FREE, EP_cuMemFreeAsync);
    if (!op) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    a->free_requested = 1;
    g_live_dev--;
    op->dst = (uintptr_t)dptr;
    enqueue(s, op);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    BEGIN(cuMemAllocManaged);
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) RETURN(r);
    if (!dptr || bytesize == 0 || (flags != 1 && flags != 2)) RETURN(CUDA_ERROR_INVALID_VALUE);
    uintptr_t p = 0;
    r = alloc_hostlike(c, bytesize, K_MANAGED, &p);
    if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)p;
    RETURN(r);
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags) {
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    if (!pp || (flags & ~7u)) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p = 0;
    r = alloc_hostlike(c, bytesize, K_PINNED, &p);
    if (r == CUDA_SUCCESS) *pp = (void *)p;
    return r;
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
    BEGIN(cuMemHostAlloc);
    RETURN(host_alloc(pp, bytesize, Flags));
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
    BEGIN(cuMemAllocHost_v2);
    RETURN(host_alloc(pp, bytesize, 0));
}

EXPORT CUresult cuMemFreeHost(void *p) {
    BEGIN(cuMemFreeHost);
    CUresult r = need_ctx(NULL);
    if (r) RETURN(r);
    struct alloc *a = NULL;
    r = check_free((uintptr_t)p, K_PINNED, K_PINNED, &a);
    if (r) RETURN(r);
    flush_all(); /* queued copies may still target this buffer */
    struct alloc_table *t = NULL;
    a = find_alloc((uintptr_t)p, &t);
    a->free_requested = 1;
    g_live_host--;
    release_alloc(t, a);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    BEGIN(cuMemGetInfo_v2);
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) RETURN(r);
    if (!free_bytes || !total) RETURN(CUDA_ERROR_INVALID_VALUE);
    *total = g_total_mem;
    *free_bytes = g_total_mem - g_dev_bytes[c->ordinal];
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    BEGIN(cuMemGetAddressRange_v2);
    CUresult r = need_ctx(NULL);
    if (r) RETURN(r);
    struct alloc *a = find_alloc((uintptr_t)dptr, NULL);
    if (!a || a->kind == K_PINNED) RETURN(CUDA_ERROR_NOT_FOUND);
    if (pbase) *pbase = (CUdeviceptr)a->base;
    if (psize) *psize = a->size;
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* Copies and memsets                                                       */
/* ------------------------------------------------------------------------ */

/* A host pointer must not be NULL nor point into the fake device range. */
static CUresult check_host(uintptr_t p, int ep, const char *what) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (in_arena(p)) {
        note("%s: the %s host pointer 0x%llx is a (fake) device address", g_ep_names[ep], what,
             (unsigned long long)p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult check_dev(uintptr_t p, size_t n, int ep) {
    if (resolve(p, n, 0)) return CUDA_SUCCESS;
    note("%s: device range 0x%llx (+%llu bytes) is not inside one live allocation",
         g_ep_names[ep], (unsigned long long)p, (unsigned long long)n);
    return CUDA_ERROR_INVALID_VALUE;
}

/* Is [p, p+n) inside page-locked or managed host memory? */
static int host_is_pinned(const void *p, size_t n) {
    struct alloc *a = table_find(&g_host, (uintptr_t)p);
    return a && n <= a->size - ((uintptr_t)p - a->base);
}

enum copy_mode { MODE_ASYNC, MODE_SYNC };

/* Common path of every memcpy. dst/src are device addresses when *_is_dev. */
static CUresult do_copy(int ep, int dst_is_dev, uintptr_t dst, int src_is_dev, uintptr_t src,
                        size_t n, CUstream hStream, int mode) {
    struct fake_stream *s = NULL;
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    if (mode == MODE_SYNC) s = legacy_of(c);
    else if ((r = lookup_stream(hStream, &s))) return r;
    if (n == 0) return CUDA_SUCCESS;
    r = dst_is_dev ? check_dev(dst, n, ep) : check_host(dst, ep, "destination");
    if (r) return r;
    r = src_is_dev ? check_dev(src, n, ep) : check_host(src, ep, "source");
    if (r) return r;
    struct op *op = new_op(OP_COPY, ep);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!src_is_dev) g_last_host_source = (long long)src;
    if (!dst_is_dev) g_last_host_destination = (long long)dst;
    op->dst_is_dev = dst_is_dev;
    op->src_is_dev = src_is_dev;
    op->dst = dst;
    op->src = src;
    op->n = n;
    int blocking = mode == MODE_SYNC;
    if (mode == MODE_ASYNC && !src_is_dev && !host_is_pinned((void *)src, n)) {
        /* pageable source: the driver stages it before returning */
        op->src_owned = malloc(n);
        if (!op->src_owned) { free(op); return CUDA_ERROR_OUT_OF_MEMORY; }
        memcpy(op->src_owned, (const void *)src, n);
    }
    if (mode == MODE_ASYNC && !dst_is_dev && !host_is_pinned((void *)dst, n))
        blocking = 1; /* device -> pageable host returns only once the copy is done */
    enqueue(s, op);
    if (blocking) {
        flush(s, s->enq);
        g_host_syncs++;
        return take_async_error();
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
    BEGIN(cuMemcpyHtoD_v2);
    RETURN(do_copy(EP_cuMemcpyHtoD_v2, 1, (uintptr_t)dstDevice, 0, (uintptr_t)srcHost,
                   ByteCount, NULL, MODE_SYNC));
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    BEGIN(cuMemcpyDtoH_v2);
    RETURN(do_copy(EP_cuMemcpyDtoH_v2, 0, (uintptr_t)dstHost, 1, (uintptr_t)srcDevice,
                   ByteCount, NULL, MODE_SYNC));
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
    BEGIN(cuMemcpyDtoD_v2);
    RETURN(do_copy(EP_cuMemcpyDtoD_v2, 1, (uintptr_t)dstDevice, 1, (uintptr_t)srcDevice,
                   ByteCount, NULL, MODE_SYNC));
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                     CUstream hStream) {
    BEGIN(cuMemcpyHtoDAsync_v2);
    RETURN(do_copy(EP_cuMemcpyHtoDAsync_v2, 1, (uintptr_t)dstDevice, 0, (uintptr_t)srcHost,
                   ByteCount, hStream, MODE_ASYNC));
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream) {
    BEGIN(cuMemcpyDtoHAsync_v2);
    RETURN(do_copy(EP_cuMemcpyDtoHAsync_v2, 0, (uintptr_t)dstHost, 1, (uintptr_t)srcDevice,
                   ByteCount, hStream, MODE_ASYNC));
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                     size_t ByteCount, CUstream hStream) {
    BEGIN(cuMemcpyDtoDAsync_v2);
    RETURN(do_copy(EP_cuMemcpyDtoDAsync_v2, 1, (uintptr_t)dstDevice, 1, (uintptr_t)srcDevice,
                   ByteCount, hStream, MODE_ASYNC));
}

/* Unified-addressing copies: a pointer known to the fake (device, managed
 * or pinned) is a device endpoint, anything else is pageable host memory. */
static int is_known(uintptr_t p) { return find_alloc(p, NULL) != NULL || in_arena(p); }

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    BEGIN(cuMemcpy);
    RETURN(do_copy(EP_cuMemcpy, is_known((uintptr_t)dst), (uintptr_t)dst,
                   is_known((uintptr_t)src), (uintptr_t)src, ByteCount, NULL, MODE_SYNC));
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
    BEGIN(cuMemcpyAsync);
    RETURN(do_copy(EP_cuMemcpyAsync, is_known((uintptr_t)dst), (uintptr_t)dst,
                   is_known((uintptr_t)src), (uintptr_t)src, ByteCount, hStream, MODE_ASYNC));
}

static CUresult do_memset(int ep, CUdeviceptr dst, unsigned value, unsigned elem, size_t count,
                          CUstream hStream, int mode) {
    struct fake_stream *s = NULL;
    struct fake_ctx *c = NULL;
    CUresult r = need_ctx(&c);
    if (r) return r;
    if (mode == MODE_SYNC) s = legacy_of(c);
    else if ((r = lookup_stream(hStream, &s))) return r;
    if (count == 0) return CUDA_SUCCESS;
    if (elem == 4 && (dst & 3u)) return CUDA_ERROR_INVALID_VALUE;
    if (count > SIZE_MAX / elem) return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_dev((uintptr_t)dst, count * elem, ep))) return r;
    struct op *op = new_op(OP_SET, ep);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->dst = (uintptr_t)dst;
    op->value = value;
    op->elem = elem;
    op->n = count;
    enqueue(s, op);
    if (mode == MODE_SYNC) {
        flush(s, s->enq);
        g_host_syncs++;
        return take_async_error();
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    BEGIN(cuMemsetD8_v2);
    RETURN(do_memset(EP_cuMemsetD8_v2, dstDevice, uc, 1, N, NULL, MODE_SYNC));
}

EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    BEGIN(cuMemsetD32_v2);
    RETURN(do_memset(EP_cuMemsetD32_v2, dstDevice, ui, 4, N, NULL, MODE_SYNC));
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
    BEGIN(cuMemsetD8Async);
    RETURN(do_memset(EP_cuMemsetD8Async, dstDevice, uc, 1, N, hStream, MODE_ASYNC));
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
    BEGIN(cuMemsetD32Async);
    RETURN(do_memset(EP_cuMemsetD32Async, dstDevice, ui, 4, N, hStream, MODE_ASYNC));
}

/* ------------------------------------------------------------------------ */
/* Pointer attributes                                                       */
/* ------------------------------------------------------------------------ */

enum {
    PA_CONTEXT = 1, PA_MEMORY_TYPE = 2, PA_DEVICE_POINTER = 3, PA_HOST_POINTER = 4,
    PA_P2P_TOKENS = 5, PA_SYNC_MEMOPS = 6, PA_BUFFER_ID = 7, PA_IS_MANAGED = 8,
    PA_DEVICE_ORDINAL = 9, PA_IS_LEGACY_CUDA_IPC_CAPABLE = 10, PA_RANGE_START_ADDR = 11,
    PA_RANGE_SIZE = 12, PA_MAPPED = 13, PA_ALLOWED_HANDLE_TYPES = 14,
    PA_IS_GPU_DIRECT_RDMA_CAPABLE = 15, PA_ACCESS_FLAGS = 16, PA_MEMPOOL_HANDLE = 17,
    PA_MAPPING_SIZE = 18, PA_MAPPING_BASE_ADDR = 19, PA_MEMORY_BLOCK_ID = 20,
};
#define CU_MEMORYTYPE_HOST 1u
#define CU_MEMORYTYPE_DEVICE 2u

/* Size of the value written for an attribute (booleans as unsigned int);
 * 0 for unknown attributes. */
static size_t attr_size(int attr) {
    switch (attr) {
    case PA_CONTEXT: case PA_DEVICE_POINTER: case PA_HOST_POINTER: case PA_BUFFER_ID:
    case PA_RANGE_START_ADDR: case PA_RANGE_SIZE: case PA_ALLOWED_HANDLE_TYPES:
    case PA_MEMPOOL_HANDLE: case PA_MAPPING_SIZE: case PA_MAPPING_BASE_ADDR:
    case PA_MEMORY_BLOCK_ID:
        return 8;
    case PA_P2P_TOKENS:
        return 16;
    case PA_MEMORY_TYPE: case PA_SYNC_MEMOPS: case PA_IS_MANAGED: case PA_DEVICE_ORDINAL:
    case PA_IS_LEGACY_CUDA_IPC_CAPABLE: case PA_MAPPED: case PA_IS_GPU_DIRECT_RDMA_CAPABLE:
    case PA_ACCESS_FLAGS:
        return 4;
    default:
        return 0;
    }
}

static void put_u32(void *d, unsigned v) { memcpy(d, &v, 4); }
static void put_u64(void *d, unsigned long long v) { memcpy(d, &v, 8); }

/* Attribute of a known allocation. `multi` selects the cuPointerGetAttributes
 * flavour (HOST_POINTER of device memory reads NULL instead of failing). */
static CUresult alloc_attr(const struct alloc *a, uintptr_t p, int attr, void *data, int multi) {
    switch (attr) {
    case PA_CONTEXT: {
        CUcontext c = &g_ctx[a->ordinal];
        memcpy(data, &c, sizeof c);
        return CUDA_SUCCESS;
    }
    case PA_MEMORY_TYPE:
        put_u32(data, a->kind == K_PINNED ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
        return CUDA_SUCCESS;
    case PA_DEVICE_POINTER: put_u64(data, p); return CUDA_SUCCESS; /* unified addressing */
    case PA_HOST_POINTER:
        if (a->kind == K_DEVICE) {
            if (!multi) return CUDA_ERROR_INVALID_VALUE;
            put_u64(data, 0);
        } else {
            put_u64(data, p);
        }
        return CUDA_SUCCESS;
    case PA_SYNC_MEMOPS: put_u32(data, 0); return CUDA_SUCCESS;
    case PA_BUFFER_ID: put_u64(data, a->buffer_id); return CUDA_SUCCESS;
    case PA_IS_MANAGED: put_u32(data, a->kind == K_MANAGED); return CUDA_SUCCESS;
    case PA_DEVICE_ORDINAL: put_u32(data, (unsigned)a->ordinal); return CUDA_SUCCESS;
    case PA_IS_LEGACY_CUDA_IPC_CAPABLE:
        put_u32(data, a->kind == K_DEVICE && !a->from_pool);
        return CUDA_SUCCESS;
    case PA_RANGE_START_ADDR: put_u64(data, a->base); return CUDA_SUCCESS;
    case PA_RANGE_SIZE: put_u64(data, a->size); return CUDA_SUCCESS;
    case PA_MAPPED: put_u32(data, 1); return CUDA_SUCCESS;
    case PA_IS_GPU_DIRECT_RDMA_CAPABLE: put_u32(data, 0); return CUDA_SUCCESS;
    case PA_ACCESS_FLAGS: put_u32(data, 3); return CUDA_SUCCESS; /* READWRITE */
    case PA_MEMPOOL_HANDLE: put_u64(data, 0); return CUDA_SUCCESS;
    default:
        return attr_size(attr) ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
    BEGIN(cuPointerGetAttribute);
    CUresult r = need_ctx(NULL);
    if (r) RETURN(r);
    if (!data || !attr_size(attribute)) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct alloc *a = find_alloc((uintptr_t)ptr, NULL);
    /* Unregistered host memory (or a freed / never allocated device
     * address) is not a CUDA pointer: INVALID_VALUE, like the real driver. */
    if (!a || a->free_requested) RETURN(CUDA_ERROR_INVALID_VALUE);
    RETURN(alloc_attr(a, (uintptr_t)ptr, attribute, data, 0));
}

EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, int *attributes, void **data,
                                       CUdeviceptr ptr) {
    BEGIN(cuPointerGetAttributes);
    CUresult r = need_ctx(NULL);
    if (r) RETURN(r);
    if (numAttributes == 0 || !attributes || !data) RETURN(CUDA_ERROR_INVALID_VALUE);
    for (unsigned i = 0; i < numAttributes; i++)
        if (!attr_size(attributes[i]) || !data[i]) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct alloc *a = find_alloc((uintptr_t)ptr, NULL);
    if (a && a->free_requested) a = NULL;
    for (unsigned i = 0; i < numAttributes; i++) {
        if (a) {
            r = alloc_attr(a, (uintptr_t)ptr, attributes[i], data[i], 1);
            if (r) RETURN(r);
        } else {
            /* Not a CUDA pointer: success with "NULL" values. MEMORY_TYPE 0
             * means "not CUDA memory"; the ordinal reads -2 (the runtime's
             * convention) so it cannot be mistaken for device 0. */
            memset(data[i], 0, attr_size(attributes[i]));
            if (attributes[i] == PA_DEVICE_ORDINAL) put_u32(data[i], (unsigned)-2);
        }
    }
    RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* Unsupported entry points                                                 */
/* ------------------------------------------------------------------------ */

#define UNSUPPORTED_FN(n) \
    EXPORT CUresult n(void) { \
        BEGIN(n); \
        note("%s is not implemented by the fake CUDA driver (test double)", #n); \
        RETURN(CUDA_ERROR_NOT_SUPPORTED); \
    }
FAKE_UNSUPPORTED(UNSUPPORTED_FN)
#undef UNSUPPORTED_FN

/* ------------------------------------------------------------------------ */
/* cuGetProcAddress table                                                   */
/* ------------------------------------------------------------------------ */

struct proc { const char *name; void *fn; };
#define PROC_ROW(n) { #n, (void *)n },
static const struct proc g_procs[] = { FAKE_IMPLEMENTED(PROC_ROW) FAKE_UNSUPPORTED(PROC_ROW) };
#undef PROC_ROW

/* Exact name first, then the "_v2" export (cuda.h maps e.g. cuMemAlloc to
 * cuMemAlloc_v2; cuGetProcAddress takes the unversioned name). */
static void *proc_lookup(const char *symbol) {
    char v2[160];
    size_t n = sizeof g_procs / sizeof g_procs[0];
    for (size_t i = 0; i < n; i++)
        if (strcmp(g_procs[i].name, symbol) == 0) return g_procs[i].fn;
    if (snprintf(v2, sizeof v2, "%s_v2", symbol) >= (int)sizeof v2) return NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(g_procs[i].name, v2) == 0) return g_procs[i].fn;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Control API (fake_cuda.h)                                                */
/* ------------------------------------------------------------------------ */

EXPORT int fake_cuda_is_fake(void) { return 1; }

EXPORT void fake_cuda_reset(void) {
    pthread_mutex_lock(&G);
    flush_all();
    sweep_streams();
    for (int i = 0; i < EP_COUNT; i++) __atomic_store_n(&g_calls[i], 0, __ATOMIC_RELAXED);
    memset(g_faults, 0, sizeof g_faults);
    g_host_syncs = 0;
    g_last_host_source = 0;
    g_last_host_destination = 0;
    g_async_errors = 0;
    g_cross_context_frees = 0;
    g_async_error = CUDA_SUCCESS;
    g_deferred = g_env_deferred;
    pthread_mutex_unlock(&G);
}

EXPORT long long fake_cuda_call_count(const char *name) {
    int ep = find_ep(name);
    if (ep < 0) return -1;
    return (long long)__atomic_load_n(&g_calls[ep], __ATOMIC_RELAXED);
}

EXPORT int fake_cuda_set_fault_ex(const char *name, unsigned nth, int result, int persistent) {
    int ep = find_ep(name);
    if (ep < 0) return -1;
    if (nth != 0 && (result == CUDA_SUCCESS || !find_error(result))) return -2;
    pthread_mutex_lock(&G);
    set_fault_locked(ep, nth, result, persistent != 0);
    pthread_mutex_unlock(&G);
    return 0;
}

EXPORT int fake_cuda_set_fault(const char *name, unsigned nth, int result) {
    return fake_cuda_set_fault_ex(name, nth, result, 0);
}

EXPORT void fake_cuda_set_deferred(int on) {
    pthread_mutex_lock(&G);
    g_deferred = on != 0;
    if (!g_deferred) { flush_all(); sweep_streams(); }
    pthread_mutex_unlock(&G);
}

EXPORT int fake_cuda_get_deferred(void) {
    pthread_mutex_lock(&G);
    int d = g_deferred;
    pthread_mutex_unlock(&G);
    return d;
}

static long long read_locked(const long long *p) {
    pthread_mutex_lock(&G);
    long long v = *p;
    pthread_mutex_unlock(&G);
    return v;
}

EXPORT long long fake_cuda_live_allocations(void) { return read_locked(&g_live_dev); }
EXPORT long long fake_cuda_live_host_allocations(void) { return read_locked(&g_live_host); }
EXPORT long long fake_cuda_live_streams(void) { return read_locked(&g_live_streams); }
EXPORT long long fake_cuda_live_events(void) { return read_locked(&g_live_events); }
EXPORT long long fake_cuda_host_syncs(void) { return read_locked(&g_host_syncs); }
EXPORT long long fake_cuda_last_host_source(void) { return read_locked(&g_last_host_source); }
EXPORT long long fake_cuda_last_host_destination(void) { return read_locked(&g_last_host_destination); }
EXPORT long long fake_cuda_async_errors(void) { return read_locked(&g_async_errors); }
EXPORT long long fake_cuda_cross_context_frees(void) { return read_locked(&g_cross_context_frees); }

EXPORT long long fake_cuda_pending_ops(void) {
    pthread_mutex_lock(&G);
    long long n = 0;
    for (int i = 0; i < MAX_DEVICES; i++)
        n += (long long)(g_legacy[i].enq - g_legacy[i].done) + (long long)(g_ptds[i].enq - g_ptds[i].done);
    for (struct fake_stream *s = g_streams; s; s = s->next) n += (long long)(s->enq - s->done);
    pthread_mutex_unlock(&G);
    return n;
}

EXPORT unsigned fake_cuda_entry_point_count(void) { return EP_COUNT; }

EXPORT const char *fake_cuda_entry_point_name(unsigned index) {
    return index < EP_COUNT ? g_ep_names[index] : NULL;
}
