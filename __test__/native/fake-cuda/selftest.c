/*
 * Self-test of the fake CUDA driver (test double) through its C API.
 * Built and run by `build.sh --test`; exits non-zero on the first failure.
 *
 * Usage: selftest [main|nodevice|envdeferred|envfault|twodev]
 * (build.sh sets the matching FAKE_CUDA_* environment for each mode).
 */
#define _GNU_SOURCE
#include "fake_cuda.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Prototypes of the driver entry points used here (cuda.h is not needed). */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef void (*CUhostFn)(void *);

CUresult cuInit(unsigned int);
CUresult cuDriverGetVersion(int *);
CUresult cuGetErrorString(CUresult, const char **);
CUresult cuGetErrorName(CUresult, const char **);
CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGetName(char *, int, CUdevice);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
CUresult cuDeviceGetAttribute(int *, int, CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuStreamCreate(CUstream *, unsigned int);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int);
CUresult cuLaunchHostFunc(CUstream, CUhostFn, void *);
CUresult cuEventCreate(CUevent *, unsigned int);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventQuery(CUevent);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventDestroy_v2(CUevent);
CUresult cuEventElapsedTime(float *, CUevent, CUevent);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemHostAlloc(void **, size_t, unsigned int);
CUresult cuMemFreeHost(void *);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuMemsetD32_v2(CUdeviceptr, unsigned int, size_t);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuMemsetD32Async(CUdeviceptr, unsigned int, size_t, CUstream);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuPointerGetAttributes(unsigned int, int *, void **, CUdeviceptr);
CUresult cuLaunchKernel(void);

enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, STUB_LIBRARY = 34,
    NO_DEVICE = 100, INVALID_CONTEXT = 201, INVALID_HANDLE = 400, NOT_READY = 600,
    ILLEGAL_ADDRESS = 700, NOT_SUPPORTED = 801, UNKNOWN = 999,
};
enum { A_CONTEXT = 1, A_MEMORY_TYPE = 2, A_DEVICE_POINTER = 3, A_HOST_POINTER = 4,
       A_IS_MANAGED = 8, A_DEVICE_ORDINAL = 9, A_RANGE_START = 11, A_RANGE_SIZE = 12 };
#define NON_BLOCKING 1u

static int g_checks = 0;
#define CHECK(cond) \
    do { \
        g_checks++; \
        if (!(cond)) { \
            fprintf(stderr, "selftest: %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1); \
        } \
    } while (0)
#define CU(call) CHECK((call) == OK)

static CUcontext g_context;

static void setup(int ordinal) {
    CUdevice dev;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, ordinal));
    CU(cuDevicePrimaryCtxRetain(&g_context, dev));
    CU(cuCtxSetCurrent(g_context));
}

static void fill_u32(uint32_t *v, size_t n, uint32_t x) { for (size_t i = 0; i < n; i++) v[i] = x; }
static int all_u32(const uint32_t *v, size_t n, uint32_t x) {
    for (size_t i = 0; i < n; i++) if (v[i] != x) return 0;
    return 1;
}

static void *no_context_thread(void *arg) {
    CUdeviceptr p = 0;
    CUcontext c = (CUcontext)1;
    *(int *)arg = cuMemAlloc_v2(&p, 16) == INVALID_CONTEXT && cuCtxGetCurrent(&c) == OK && c == NULL;
    return NULL;
}

static int g_hostfn_value = 0;
static void hostfn(void *user) { g_hostfn_value = *(int *)user; }

static void test_basics(void) {
    const char *s = NULL;
    CUdevice dev;
    CHECK(fake_cuda_is_fake() == 1);
    CHECK(cuDeviceGet(&dev, 0) == NOT_INITIALIZED);
    CU(cuGetErrorString(OUT_OF_MEMORY, &s));
    CHECK(s && strstr(s, "memory"));
    CU(cuGetErrorName(ILLEGAL_ADDRESS, &s));
    CHECK(strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0);
    CHECK(cuGetErrorName(12345, &s) == INVALID_VALUE && s == NULL);

    setup(0);
    int n = -1, v = 0;
    char name[128];
    size_t total = 0;
    CU(cuDeviceGetCount(&n));
    CHECK(n == 1);
    CU(cuDriverGetVersion(&v));
    CHECK(v == 12080);
    CU(cuDeviceGetName(name, sizeof name, 0));
    CHECK(strstr(name, "fake"));
    CU(cuDeviceTotalMem_v2(&total, 0));
    CHECK(total > 0);
    CU(cuDeviceGetAttribute(&v, 115, 0)); /* MEMORY_POOLS_SUPPORTED */
    CHECK(v == 1);
    CU(cuDeviceGetAttribute(&v, 75, 0));  /* COMPUTE_CAPABILITY_MAJOR */
    CHECK(v == 8);
    CHECK(cuDeviceGet(&dev, 1) == 101);   /* INVALID_DEVICE */
    CUcontext cur = NULL;
    CU(cuCtxGetCurrent(&cur));
    CHECK(cur == g_context);

    int ok = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, no_context_thread, &ok) == 0);
    pthread_join(t, NULL);
    CHECK(ok);

    void *fn = NULL, *direct = (void *)cuMemAlloc_v2;
    int status = -1;
    CU(cuGetProcAddress_v2("cuMemAlloc", &fn, 12080, 0, &status));
    CHECK(fn == direct && status == 0);
    CHECK(cuGetProcAddress_v2("cuNoSuchThing", &fn, 12080, 0, &status) == 500 && status == 1);
    CHECK(cuLaunchKernel() == NOT_SUPPORTED);
}

static void test_memory(void) {
    fake_cuda_reset();
    CUdeviceptr d = 0;
    uint32_t in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = 100u + (uint32_t)i;
    CHECK(cuMemAlloc_v2(&d, 0) == INVALID_VALUE);
    CU(cuMemAlloc_v2(&d, sizeof in));
    CHECK(d != 0 && d % 256 == 0);
    CHECK(fake_cuda_live_allocations() == 1);
    CU(cuMemcpyHtoD_v2(d, in, sizeof in));
    memset(out, 0, sizeof out);
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    CHECK(memcmp(in, out, sizeof in) == 0);

    /* interior pointers */
    uint32_t four[4] = { 0 };
    CU(cuMemcpyDtoH_v2(four, d + 8 * 4, sizeof four));
    CHECK(four[0] == 108 && four[3] == 111);
    CU(cuMemsetD32_v2(d + 4 * 4, 0xDEADBEEFu, 2));
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    CHECK(out[3] == 103 && out[4] == 0xDEADBEEFu && out[5] == 0xDEADBEEFu && out[6] == 106);
    CHECK(cuMemsetD32_v2(d + 1, 0, 1) == INVALID_VALUE);     /* misaligned */
    CU(cuMemsetD8_v2(d, 0x11, 4));
    CU(cuMemcpyDtoH_v2(out, d, 4));
    CHECK(out[0] == 0x11111111u);
    /* out of bounds, one past the end, foreign pointers */
    CHECK(cuMemcpyDtoH_v2(out, d + 8, sizeof in) == INVALID_VALUE);
    CHECK(cuMemcpyHtoD_v2(d + sizeof in, in, 1) == INVALID_VALUE);
    CHECK(cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)in, in, 4) == INVALID_VALUE);
    CHECK(cuMemcpyHtoD_v2(d, (void *)(uintptr_t)d, 4) == INVALID_VALUE); /* device ptr as host */

    /* device to device, including into an interior pointer */
    CUdeviceptr e = 0;
    CU(cuMemAlloc_v2(&e, sizeof in));
    CU(cuMemcpyHtoD_v2(d, in, sizeof in));
    CU(cuMemcpyDtoD_v2(e + 4, d, 8));
    CU(cuMemcpyDtoH_v2(out, e + 4, 8));
    CHECK(out[0] == 100 && out[1] == 101);
    uint32_t poison = 0;
    CU(cuMemcpyDtoH_v2(&poison, e, 4));
    CHECK(poison == 0xA5A5A5A5u); /* fresh device memory is poisoned, not zeroed */

    /* pointer attributes on an interior pointer */
    unsigned mt = 0, managed = 9;
    int ord = -1;
    CUdeviceptr start = 0, devptr = 0;
    size_t size = 0;
    CUcontext ctx = NULL;
    CU(cuPointerGetAttribute(&mt, A_MEMORY_TYPE, d + 12));
    CHECK(mt == 2);
    CU(cuPointerGetAttribute(&ord, A_DEVICE_ORDINAL, d + 12));
    CHECK(ord == 0);
    CU(cuPointerGetAttribute(&start, A_RANGE_START, d + 12));
    CHECK(start == d);
    CU(cuPointerGetAttribute(&size, A_RANGE_SIZE, d + 12));
    CHECK(size == sizeof in);
    CU(cuPointerGetAttribute(&ctx, A_CONTEXT, d + 12));
    CHECK(ctx == g_context);
    CU(cuPointerGetAttribute(&managed, A_IS_MANAGED, d + 12));
    CHECK(managed == 0);
    CU(cuPointerGetAttribute(&devptr, A_DEVICE_POINTER, d + 12));
    CHECK(devptr == d + 12);
    void *hp = NULL;
    CHECK(cuPointerGetAttribute(&hp, A_HOST_POINTER, d) == INVALID_VALUE);
    CHECK(cuPointerGetAttribute(&mt, A_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)in) == INVALID_VALUE);
    CHECK(cuPointerGetAttribute(&mt, A_MEMORY_TYPE, d + sizeof in) == INVALID_VALUE);
    CU(cuMemGetAddressRange_v2(&start, &size, d + 5));
    CHECK(start == d && size == sizeof in);

    int attrs[4] = { A_MEMORY_TYPE, A_DEVICE_ORDINAL, A_RANGE_START, A_IS_MANAGED };
    void *data[4] = { &mt, &ord, &start, &managed };
    CU(cuPointerGetAttributes(4, attrs, data, d + 4));
    CHECK(mt == 2 && ord == 0 && start == d && managed == 0);
    CU(cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)(uintptr_t)in)); /* host memory */
    CHECK(mt == 0 && ord == -2 && start == 0 && managed == 0);

    /* managed and pinned memory */
    CUdeviceptr m = 0;
    CU(cuMemAllocManaged(&m, 64, 1));
    *(volatile uint32_t *)(uintptr_t)m = 5; /* host accessible */
    CU(cuPointerGetAttribute(&managed, A_IS_MANAGED, m));
    CU(cuPointerGetAttribute(&mt, A_MEMORY_TYPE, m));
    CHECK(managed == 1 && mt == 2);
    void *pinned = NULL;
    CU(cuMemHostAlloc(&pinned, 64, 4));
    CU(cuPointerGetAttribute(&mt, A_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)pinned));
    CU(cuPointerGetAttribute(&hp, A_HOST_POINTER, (CUdeviceptr)(uintptr_t)pinned));
    CHECK(mt == 1 && hp == pinned);
    CHECK(fake_cuda_live_host_allocations() == 1);
    CU(cuMemFreeHost(pinned));
    CHECK(cuMemFreeHost(pinned) == INVALID_VALUE);
    CU(cuMemFree_v2(m));

    size_t fr = 0, tot = 0;
    CU(cuMemGetInfo_v2(&fr, &tot));
    CHECK(tot - fr == 2 * sizeof in);

    /* a host read of a device pointer must crash, not silently work */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        volatile uint32_t x = *(volatile uint32_t *)(uintptr_t)d;
        (void)x;
        _exit(0);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);

    CU(cuMemFree_v2(d));
    CHECK(cuMemFree_v2(d) == INVALID_VALUE); /* double free */
    CHECK(cuMemcpyDtoH_v2(out, d, 4) == INVALID_VALUE); /* use after free */
    CHECK(cuPointerGetAttribute(&mt, A_MEMORY_TYPE, d) == INVALID_VALUE);
    CU(cuMemFree_v2(e));
    CHECK(fake_cuda_live_allocations() == 0);
    CHECK(fake_cuda_host_syncs() > 0);
}

static void test_deferred(void) {
    fake_cuda_reset();
    fake_cuda_set_deferred(1);
    CHECK(fake_cuda_get_deferred() == 1);
    enum { N = 8 };
    uint32_t init[N], out[N];
    CUstream a, b, blocking;
    CUevent ev;
    CUdeviceptr buf;
    CU(cuStreamCreate(&a, NON_BLOCKING));
    CU(cuStreamCreate(&b, NON_BLOCKING));
    CU(cuStreamCreate(&blocking, 0));
    CU(cuEventCreate(&ev, 2));
    CU(cuMemAlloc_v2(&buf, sizeof init));
    fill_u32(init, N, 1);
    CU(cuMemcpyHtoD_v2(buf, init, sizeof init));
    long long syncs0 = fake_cuda_host_syncs();

    /* (a) producer on A, consumer on B, ordered with record + wait: right */
    CU(cuMemsetD32Async(buf, 7, N, a));
    CHECK(fake_cuda_pending_ops() == 1);
    CU(cuEventRecord(ev, a));
    CU(cuStreamWaitEvent(b, ev, 0));
    fill_u32(out, N, 0);
    CU(cuMemcpyDtoHAsync_v2(out, buf, sizeof out, b)); /* pageable: blocking */
    CHECK(all_u32(out, N, 7));
    CHECK(fake_cuda_host_syncs() == syncs0 + 1);
    CHECK(fake_cuda_pending_ops() == 0);

    /* (b) the same without the event: the consumer reads stale data */
    CU(cuMemsetD32Async(buf, 9, N, a));
    CU(cuMemcpyDtoHAsync_v2(out, buf, sizeof out, b));
    CHECK(all_u32(out, N, 7)); /* WRONG on purpose: the memset has not run */
    CU(cuStreamSynchronize(a));
    CU(cuMemcpyDtoHAsync_v2(out, buf, sizeof out, b));
    CHECK(all_u32(out, N, 9));

    /* a synchronous copy orders after the legacy stream and blocking
     * streams only, not after non-blocking streams */
    CU(cuMemsetD32Async(buf, 11, N, a));
    CU(cuMemcpyDtoH_v2(out, buf, sizeof out));
    CHECK(all_u32(out, N, 9));
    CU(cuMemsetD32Async(buf, 12, N, blocking));
    CU(cuMemcpyDtoH_v2(out, buf, sizeof out));
    CHECK(all_u32(out, N, 12)); /* legacy waited for the blocking stream (a still pending) */
    CU(cuCtxSynchronize());     /* runs a's memset(11) */
    CU(cuMemcpyDtoH_v2(out, buf, sizeof out));
    CHECK(all_u32(out, N, 11));

    /* event query reports NOT_READY once, then lets the work run */
    CU(cuMemsetD32Async(buf, 13, N, a));
    CU(cuEventRecord(ev, a));
    CHECK(cuEventQuery(ev) == NOT_READY);
    CU(cuEventQuery(ev));
    CHECK(cuStreamQuery(a) == OK);

    /* pinned destination: truly asynchronous until synchronised */
    uint32_t *pin = NULL;
    CU(cuMemHostAlloc((void **)&pin, sizeof out, 0));
    fill_u32(pin, N, 0);
    CU(cuMemcpyDtoHAsync_v2(pin, buf, sizeof out, b));
    CHECK(all_u32(pin, N, 0));
    CU(cuEventRecord(ev, b));
    CU(cuEventSynchronize(ev));
    CHECK(all_u32(pin, N, 13));
    /* pageable source of an async HtoD is staged at call time */
    uint32_t src[N];
    fill_u32(src, N, 21);
    CU(cuMemcpyHtoDAsync_v2(buf, src, sizeof src, a));
    fill_u32(src, N, 22);
    CU(cuMemcpyDtoDAsync_v2(buf, buf, 0, a));
    CU(cuStreamSynchronize(a));
    CU(cuMemcpyDtoH_v2(out, buf, sizeof out));
    CHECK(all_u32(out, N, 21));
    CU(cuMemFreeHost(pin));

    /* host functions run in stream order */
    int val = 42;
    g_hostfn_value = 0;
    CU(cuLaunchHostFunc(a, hostfn, &val));
    CHECK(g_hostfn_value == 0);
    CU(cuStreamSynchronize(a));
    CHECK(g_hostfn_value == 42);

    /* stream-ordered allocation and a use-after-free across streams */
    CUdeviceptr x = 0;
    CU(cuMemAllocAsync(&x, 64, a));
    CU(cuMemsetD8Async(x, 0, 64, b));      /* B uses x ... */
    CU(cuMemFreeAsync(x, a));               /* ... A frees it without waiting for B */
    CHECK(fake_cuda_live_allocations() == 1); /* only buf: x's free was requested */
    CHECK(cuMemsetD8Async(x, 0, 64, b) == INVALID_VALUE); /* caught at call time */
    CU(cuStreamSynchronize(a));             /* free runs */
    CHECK(cuStreamSynchronize(b) == ILLEGAL_ADDRESS); /* B's memset found x gone */
    CHECK(fake_cuda_async_errors() == 1);
    CU(cuStreamSynchronize(b));             /* reported once */

    /* event timing */
    CUevent t0, t1;
    float ms = -1;
    CU(cuEventCreate(&t0, 0));
    CU(cuEventCreate(&t1, 0));
    CU(cuEventRecord(t0, a));
    CU(cuEventRecord(t1, a));
    CHECK(cuEventElapsedTime(&ms, t0, t1) == NOT_READY);
    CU(cuEventSynchronize(t1));
    CU(cuEventElapsedTime(&ms, t0, t1));
    CHECK(ms >= 0);
    CHECK(cuEventElapsedTime(&ms, t0, ev) == INVALID_HANDLE); /* ev has DISABLE_TIMING */
    CU(cuEventDestroy_v2(t0));
    CU(cuEventDestroy_v2(t1));

    /* a destroyed stream's pending work still completes later */
    CU(cuMemsetD32Async(buf, 31, N, b));
    CU(cuEventRecord(ev, b));
    CU(cuStreamDestroy_v2(b));
    CHECK(cuStreamSynchronize(b) == INVALID_HANDLE);
    CU(cuEventSynchronize(ev));
    CU(cuMemcpyDtoH_v2(out, buf, sizeof out));
    CHECK(all_u32(out, N, 31));

    /* immediate mode again: work runs at once */
    fake_cuda_set_deferred(0);
    CU(cuMemsetD32Async(buf, 41, N, a));
    CU(cuMemcpyDtoHAsync_v2(out, buf, sizeof out, blocking));
    CHECK(all_u32(out, N, 41));
    CHECK(cuStreamQuery(a) == OK);

    CU(cuEventDestroy_v2(ev));
    CU(cuStreamDestroy_v2(a));
    CU(cuStreamDestroy_v2(blocking));
    CU(cuMemFree_v2(buf));
    CHECK(fake_cuda_live_allocations() == 0);
    CHECK(fake_cuda_live_streams() == 0);
    CHECK(fake_cuda_live_events() == 0);
    CHECK(fake_cuda_pending_ops() == 0);
}

static void test_faults_and_counters(void) {
    fake_cuda_reset();
    CHECK(fake_cuda_call_count("cuMemAlloc_v2") == 0);
    CHECK(fake_cuda_call_count("cuNoSuchEntry") == -1);
    CHECK(fake_cuda_set_fault("cuNoSuchEntry", 1, OUT_OF_MEMORY) == -1);
    CHECK(fake_cuda_set_fault("cuMemAlloc_v2", 1, 12345) == -2);
    CHECK(fake_cuda_set_fault("cuMemAlloc_v2", 1, OK) == -2);

    CUdeviceptr d = 0, e = 0;
    /* one-shot fault on the 2nd call from now */
    CHECK(fake_cuda_set_fault("cuMemAlloc_v2", 2, OUT_OF_MEMORY) == 0);
    CU(cuMemAlloc_v2(&d, 16));
    CHECK(cuMemAlloc_v2(&e, 16) == OUT_OF_MEMORY);
    CU(cuMemAlloc_v2(&e, 16));
    CHECK(fake_cuda_call_count("cuMemAlloc_v2") == 3);
    CHECK(fake_cuda_live_allocations() == 2);

    /* persistent copy failure until cleared */
    uint8_t b[16] = { 0 };
    CHECK(fake_cuda_set_fault_ex("cuMemcpyHtoDAsync_v2", 1, UNKNOWN, 1) == 0);
    CHECK(cuMemcpyHtoDAsync_v2(d, b, 16, NULL) == UNKNOWN);
    CHECK(cuMemcpyHtoDAsync_v2(d, b, 16, NULL) == UNKNOWN);
    CHECK(fake_cuda_set_fault("cuMemcpyHtoDAsync_v2", 0, 0) == 0);
    CU(cuMemcpyHtoDAsync_v2(d, b, 16, NULL));
    CHECK(fake_cuda_call_count("cuMemcpyHtoDAsync_v2") == 3);

    /* event record failure */
    CUevent ev;
    CU(cuEventCreate(&ev, 2));
    CHECK(fake_cuda_set_fault("cuEventRecord", 1, INVALID_HANDLE) == 0);
    CHECK(cuEventRecord(ev, NULL) == INVALID_HANDLE);
    CU(cuEventRecord(ev, NULL));
    CU(cuEventDestroy_v2(ev));

    /* host syncs count */
    long long s0 = fake_cuda_host_syncs();
    CU(cuStreamSynchronize(NULL));
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH_v2(b, d, 16));
    CU(cuMemcpyHtoDAsync_v2(d, b, 16, NULL)); /* not a host sync */
    CHECK(fake_cuda_host_syncs() == s0 + 3);

    CU(cuMemFree_v2(d));
    CU(cuMemFree_v2(e));
    unsigned n = fake_cuda_entry_point_count();
    CHECK(n > 50);
    int found = 0;
    for (unsigned i = 0; i < n; i++)
        if (strcmp(fake_cuda_entry_point_name(i), "cuPointerGetAttributes") == 0) found = 1;
    CHECK(found && fake_cuda_entry_point_name(n) == NULL);

    fake_cuda_reset();
    CHECK(fake_cuda_call_count("cuMemAlloc_v2") == 0 && fake_cuda_host_syncs() == 0);
    CU(cuDevicePrimaryCtxRelease_v2(0));
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "main";
    if (strcmp(mode, "main") == 0) {
        test_basics();
        test_memory();
        test_deferred();
        test_faults_and_counters();
    } else if (strcmp(mode, "nodevice") == 0) { /* FAKE_CUDA_DEVICE_COUNT=0 */
        int n = -1;
        CHECK(cuInit(0) == NO_DEVICE);
        CU(cuDeviceGetCount(&n));
        CHECK(n == 0);
        CUdevice dev;
        CHECK(cuDeviceGet(&dev, 0) == NOT_INITIALIZED);
    } else if (strcmp(mode, "envdeferred") == 0) { /* FAKE_CUDA_DEFERRED=1 */
        CHECK(fake_cuda_get_deferred() == 1);
        fake_cuda_set_deferred(0);
        fake_cuda_reset();
        CHECK(fake_cuda_get_deferred() == 1);
    } else if (strcmp(mode, "envfault") == 0) { /* FAKE_CUDA_FAULTS=cuInit:1:34 */
        CHECK(cuInit(0) == STUB_LIBRARY);
        CU(cuInit(0));
    } else if (strcmp(mode, "twodev") == 0) { /* FAKE_CUDA_DEVICE_COUNT=2 */
        int n = 0, ord = -1;
        setup(1);
        CU(cuDeviceGetCount(&n));
        CHECK(n == 2);
        CUdeviceptr d;
        CU(cuMemAlloc_v2(&d, 8));
        CU(cuPointerGetAttribute(&ord, A_DEVICE_ORDINAL, d));
        CHECK(ord == 1);
        CU(cuMemFree_v2(d));

        /* Per-context default streams: with deferred work queued on device 0's
         * legacy stream, synchronising device 1's legacy stream leaves it
         * pending; device 0's runs it. */
        CUcontext ctx0 = NULL, ctx1 = g_context;
        CUdevice dev0;
        CU(cuDeviceGet(&dev0, 0));
        CU(cuDevicePrimaryCtxRetain(&ctx0, dev0));
        CU(cuCtxSetCurrent(ctx0));
        CUdeviceptr d0;
        CU(cuMemAlloc_v2(&d0, 16));
        fake_cuda_set_deferred(1);
        CU(cuMemsetD8Async(d0, 0x11, 16, NULL));
        CHECK(fake_cuda_pending_ops() == 1);
        CU(cuCtxSetCurrent(ctx1));
        CU(cuStreamSynchronize(NULL));
        CHECK(fake_cuda_pending_ops() == 1);
        /* A free ordered in device 1's context is counted (and, here, runs
         * before device 0's pending memset: the memset then finds no memory). */
        long long cross = fake_cuda_cross_context_frees();
        CU(cuMemFreeAsync(d0, NULL));
        CHECK(fake_cuda_cross_context_frees() == cross + 1);
        CU(cuStreamSynchronize(NULL));
        long long async_errors = fake_cuda_async_errors();
        CU(cuCtxSetCurrent(ctx0));
        CHECK(cuStreamSynchronize(NULL) == 700); /* ILLEGAL_ADDRESS: the memset ran after the free */
        CHECK(fake_cuda_async_errors() == async_errors + 1);
        CHECK(fake_cuda_pending_ops() == 0);
        fake_cuda_set_deferred(0);
        /* The 13.x result codes can be injected. */
        CHECK(fake_cuda_set_fault("cuMemAlloc_v2", 1, 36) == 0);
        CHECK(cuMemAlloc_v2(&d0, 16) == 36);
        const char *name = NULL;
        CU(cuGetErrorName(919, &name));
        CHECK(name && strcmp(name, "CUDA_ERROR_FABRIC_NOT_READY") == 0);
        CHECK(fake_cuda_set_fault("cuMemAlloc_v2", 1, 37) == -2);
    } else {
        fprintf(stderr, "selftest: unknown mode %s\n", mode);
        return 2;
    }
    printf("fake-cuda selftest %s: %d checks passed\n", mode, g_checks);
    return 0;
}
