/*
 * fake-cuda control API.
 *
 * fake-cuda is a TEST DOUBLE of the CUDA driver library (libcuda.so). It is
 * NOT a CUDA driver: it runs no kernels and "device memory" is host memory
 * behind addresses the host cannot dereference. See README.md in this folder.
 *
 * The functions below are exported, with C linkage, from the same shared
 * library as the fake cu* entry points. Tests reach them either by linking
 * against the fake directly (selftest.c) or through dlopen/dlsym on the
 * already loaded library (control.c, selftest.rs).
 *
 * All functions are thread-safe.
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* Always returns 1. A real libcuda does not export this symbol. */
int fake_cuda_is_fake(void);

/*
 * Resets call counters, injected faults, the host-sync counter, the
 * asynchronous-error counter and allocation statistics, flushes all pending
 * stream work, and restores the deferred mode to its environment default
 * (FAKE_CUDA_DEFERRED). Live objects (contexts, streams, events,
 * allocations) stay valid, so a long-lived context in the process under test
 * keeps working; the live-object counters keep reporting what is still
 * really held.
 */
void fake_cuda_reset(void);

/* Number of calls of entry point `name` since load or the last reset, or -1
 * if `name` is not an entry point of the fake (typo guard). */
long long fake_cuda_call_count(const char *name);

/*
 * Inject a fault: the nth call of entry point `name` counted from now
 * (nth = 1: the next call) returns `result` without doing anything.
 * fake_cuda_set_fault_ex(..., persistent = 1) makes every call from the nth
 * on fail until cleared. nth = 0 clears the fault.
 * Returns 0 on success, -1 for an unknown entry point, -2 when `result` is
 * not a CUresult value of the CUDA 12.8 headers (or one of the 13.x codes
 * 36, 47, 227, 917-919) or is CUDA_SUCCESS.
 */
int fake_cuda_set_fault(const char *name, unsigned nth, int result);
int fake_cuda_set_fault_ex(const char *name, unsigned nth, int result, int persistent);

/* Switch deferred mode on (1) or off (0). Switching off flushes all pending
 * work. fake_cuda_get_deferred reports the current mode. */
void fake_cuda_set_deferred(int on);
int fake_cuda_get_deferred(void);

/* Device and managed allocations for which no free has been requested yet. */
long long fake_cuda_live_allocations(void);
/* Page-locked host allocations (cuMemHostAlloc / cuMemAllocHost) not freed. */
long long fake_cuda_live_host_allocations(void);
/* Streams created and not destroyed; events created and not destroyed. */
long long fake_cuda_live_streams(void);
long long fake_cuda_live_events(void);

/* Host-blocking synchronisations since load or reset: cuStreamSynchronize,
 * cuEventSynchronize, cuCtxSynchronize, the synchronous (non-Async) memcpy and
 * memset entry points, and async device-to-pageable-host copies (which the
 * real driver also completes before returning). */
long long fake_cuda_host_syncs(void);
/* Host address of the last copy from host memory / into host memory (0: none since reset). */
long long fake_cuda_last_host_source(void);
long long fake_cuda_last_host_destination(void);

/* Queued operations (all streams) that have not executed yet. Always 0 in
 * immediate mode. */
long long fake_cuda_pending_ops(void);

/* Queued operations that, when they finally ran, found their device memory
 * gone (use-after-free / missing ordering). Each also makes the next
 * synchronising call return CUDA_ERROR_ILLEGAL_ADDRESS once. */
long long fake_cuda_async_errors(void);

/* Frees (cuMemFree_v2, cuMemFreeAsync) ordered in another context than the
 * allocation's: the calling thread's current context (cuMemFree, or
 * cuMemFreeAsync on a default stream) or the stream's belongs to another
 * device. The free is accepted, like the driver does, but is not ordered after
 * the allocation's own device's work. */
long long fake_cuda_cross_context_frees(void);

/* Enumerate the entry points the fake counts (for a "counts" dump). */
unsigned fake_cuda_entry_point_count(void);
const char *fake_cuda_entry_point_name(unsigned index);

#ifdef __cplusplus
}
#endif

#endif /* FAKE_CUDA_H */
