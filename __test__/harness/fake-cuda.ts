// The CUDA setting of a spec under __test__/cuda/ and the two native fixtures the CUDA specs
// share: the fake driver's control addon (__test__/native/fake-cuda, `control.node`) and the
// CUDA peer addon (__test__/native/cuda-peer: another addon's CUDA producer and consumer).
//
// Every CUDA spec runs in the settings scripts/test.mjs sets up (the fake driver, a real GPU,
// no driver, a driver without devices); importing this module probes the driver once for the
// process (`cuda.isAvailable()` loads it, or the fake) and loads the fixtures that setting can
// use. What needs the fake's control API is skipped elsewhere (`fake` is false).
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { type DLPackCapsule, cuda } from '../../dist/index.js'
import { native } from '../../dist/native.js'
import { drainGarbage, gcUntil, nativeFixture } from './helpers.js'

/** The fake driver's control API (`control.node`; see __test__/native/fake-cuda/README.md). */
export interface FakeControl {
  isLoaded(): boolean
  reset(): void
  callCount(name: string): number
  counts(): Record<string, number>
  setFault(name: string, nth: number, result: number, persistent?: boolean): void
  setDeferred(on: boolean): void
  liveAllocations(): number
  liveHostAllocations(): number
  liveEvents(): number
  liveStreams(): number
  hostSyncs(): number
  pendingOps(): number
  asyncErrors(): number
  crossContextFrees(): number
  lastHostSource(): number
  lastHostDestination(): number
}

/** The CUDA peer addon: device memory, streams and DLPack capsules made and read as another addon would. */
export interface CudaPeer {
  alloc(bytes: number, device?: number): bigint
  free(ptr: bigint, device?: number): void
  hostAlloc(bytes: number): bigint
  hostFree(ptr: bigint): void
  upload(ptr: bigint, bytes: ArrayBufferView, device?: number): void
  uploadAsync(ptr: bigint, bytes: ArrayBufferView, stream: bigint, device?: number): void
  download(ptr: bigint, nbytes: number, stream?: bigint | null, device?: number): Uint8Array
  createStream(device?: number): bigint
  destroyStream(stream: bigint, device?: number): void
  syncStreams(from: bigint, to: bigint, device?: number): void
  makeTensor(options: {
    ptr: bigint
    shape: number[]
    strides?: number[]
    dtype?: { code: number; bits: number; lanes: number }
    device?: [number, number]
    byteOffset?: number
    versioned?: boolean
    owned?: boolean
    host?: boolean
    ordinal?: number
    scribble?: { stream: bigint; value: number }
  }): DLPackCapsule
  deleterCalls(): number
  consume(
    capsule: DLPackCapsule,
    options?: { stream?: bigint; read?: boolean },
  ): { data: bigint; device: [number, number]; shape: number[]; strides?: number[]; byteOffset: number; bytes?: Uint8Array }
  currentContext(): bigint
  setCurrentContext(device: number | null): void
  syncStream(stream: bigint, device?: number): void
  scribble(ptr: bigint, bytes: number, stream: bigint, value: number, device?: number): void
  releaseOnThread(capsule: DLPackCapsule): { before: bigint; after: bigint }
  releaseInHostFunc(capsule: DLPackCapsule, stream: bigint, device?: number): void
  hostFuncReleases(): number
  /** cuDevicePrimaryCtxReset (what cudaDeviceReset() does): every allocation of the device is freed. */
  resetDevice(device?: number): void
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** NAPI_DLPACK_CUDA_EXPECT: the setting the run must be in (`fake`, `gpu`, `none`), or unset (adapt). */
export const expected = process.env.NAPI_DLPACK_CUDA_EXPECT
/** Whether CUDA is usable (a driver with at least one device); the probe loads the driver. */
export const available = cuda.isAvailable()
/**
 * The fake's control addon where the fake may be in use (expected, or built): it finds the
 * loaded fake libcuda, and says whether there is one (`isLoaded()`).
 */
export const control: FakeControl | undefined =
  expected === 'fake' || existsSync(join(root, 'target', 'fake-cuda', 'control.node'))
    ? nativeFixture<FakeControl>('fake-cuda', 'control.node').addon
    : undefined
/** Whether the loaded libcuda is the fake (true also for the fake with no device: `available` false). */
export const fakeLoaded = control?.isLoaded() === true
/** The CUDA peer addon, where CUDA is usable. */
export const peer: CudaPeer | undefined = available ? nativeFixture<CudaPeer>('cuda-peer', 'cuda_peer.node').addon : undefined

/** Driver result codes the fault injections use. */
export const OUT_OF_MEMORY = 2
export const INVALID_HANDLE = 400
export const ILLEGAL_ADDRESS = 700
export const UNKNOWN = 999

export const bytesOf = (view: ArrayBufferView) => new Uint8Array(view.buffer, view.byteOffset, view.byteLength)
export const floats = (bytes: Uint8Array) => Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4))

/** Runs `fn` in the fake's deferred mode (streams run only when something waits for them), flushing everything afterwards. */
export async function deferred<T>(fn: () => T | Promise<T>): Promise<T> {
  control!.setDeferred(true)
  try {
    return await fn()
  } finally {
    control!.setDeferred(false)
  }
}

/** The CUDA release counters (frees and producer deleters handed to the release thread). */
export const releaseStats = () => native.cudaReleaseStats()

/** Polls `cond` (with GC) until it holds or `ms` have passed: for work of the release thread. */
export async function waitFor(cond: () => boolean, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!cond() && Date.now() < deadline) {
    await gcUntil(() => false, 1)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  return cond()
}

/** Waits until the release thread has finished what was handed to it. */
export async function settled(): Promise<void> {
  await waitFor(() => releaseStats().pending === 0)
}

/** Driver calls made by `fn`, as counted by the fake (after draining earlier garbage). */
export async function measure(fn: () => void): Promise<{ counts: Record<string, number>; hostSyncs: number }> {
  await drainGarbage()
  await settled()
  control!.reset()
  fn()
  return { counts: control!.counts(), hostSyncs: control!.hostSyncs() }
}
