// CUDA tensors: allocation, copies, DLPack export/import of device memory, the driver checks
// of imported pointers, stream hand-overs, fault injection and leaks.
//
// The same file runs in three settings (scripts/test.mjs runs all of them):
// - against the fake CUDA driver, a TEST DOUBLE (__test__/native/fake-cuda): start the process with
//   LD_LIBRARY_PATH=<repo>/target/fake-cuda (cudarc dlopens libcuda.so at the first CUDA call;
//   the variable is read at process start). Everything runs, including what only the fake can
//   show: driver call counts, deferred stream execution (a missing wait gives stale data),
//   fault injection, live allocation counts.
// - on a real GPU: leave target/fake-cuda off LD_LIBRARY_PATH and set NAPI_DLPACK_CUDA_EXPECT=gpu.
//   Every behavioural test runs; those needing the fake's control API are skipped.
// - with no usable driver (no libcuda, or a driver without devices): every CUDA call must throw
//   ERR_CUDA_UNAVAILABLE, and the process must survive.
// NAPI_DLPACK_CUDA_EXPECT=fake|gpu|none makes the file fail when the setting is not the one
// expected (so a broken library path cannot silently skip the suite); unset, it adapts.
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test, { type ExecutionContext } from 'ava'

import { native } from '../../dist/native.js'
import {
  BufferError,
  CudaError,
  type DLPackCapsule,
  DLPackError,
  DLPackTypeError,
  DTYPE_NAMES,
  InvalidTensorError,
  Tensor,
  cuda,
  fromDLPack,
  isCapsuleConsumed,
} from '../../dist/index.js'
import { drainGarbage, gcUntil, throwsCode, turn } from '../harness/helpers.js'

// ---------------------------------------------------------------------------------------------
// Fixtures: the fake's control API, the CUDA peer addon, the C addon

interface FakeControl {
  isLoaded(): boolean
  reset(): void
  callCount(name: string): number
  counts(): Record<string, number>
  setFault(name: string, nth: number, result: number, persistent?: boolean): void
  setDeferred(on: boolean): void
  liveAllocations(): number
  liveEvents(): number
  liveStreams(): number
  hostSyncs(): number
  pendingOps(): number
  asyncErrors(): number
  crossContextFrees(): number
}

interface CudaPeer {
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
}

interface CAddon {
  makeTensor(options: { device?: [number, number]; shape: number[]; versioned: boolean }): DLPackCapsule
  deleterCalls(): number
}

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const load = createRequire(import.meta.url)

function fixture<T>(dir: string, file: string): T {
  const path = join(root, 'target', dir, file)
  // `npm test` builds every fixture first; build it here too when run on its own.
  if (!existsSync(path)) execFileSync('bash', [join(root, '__test__', 'native', dir, 'build.sh')], { stdio: 'inherit' })
  return load(path) as T
}

const expected = process.env.NAPI_DLPACK_CUDA_EXPECT
const available = cuda.isAvailable() // loads the driver (or the fake) if there is one
const controlPath = join(root, 'target', 'fake-cuda', 'control.node')
const control: FakeControl | undefined =
  expected === 'fake' || existsSync(controlPath) ? fixture<FakeControl>('fake-cuda', 'control.node') : undefined
const fake = control?.isLoaded() === true
const peer: CudaPeer | undefined = available ? fixture<CudaPeer>('cuda-peer', 'cuda_peer.node') : undefined
const c = fixture<CAddon>('c-addon', 'c_addon.node')

const OUT_OF_MEMORY = 2
const INVALID_HANDLE = 400
const UNKNOWN = 999
const ILLEGAL_ADDRESS = 700

// ---------------------------------------------------------------------------------------------
// Helpers


const bytesOf = (view: ArrayBufferView) => new Uint8Array(view.buffer, view.byteOffset, view.byteLength)
const floats = (bytes: Uint8Array) => Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4))
const cpu = (tensor: Tensor) => tensor.to('cpu')
/** The elements of a (number-valued) tensor, copied to the host. */
const values = (tensor: Tensor) => Array.from(tensor.to('cpu').data as ArrayLike<number>)

/** Runs `fn` in the fake's deferred mode, flushing everything afterwards. */
async function deferred<T>(fn: () => T | Promise<T>): Promise<T> {
  control!.setDeferred(true)
  try {
    return await fn()
  } finally {
    control!.setDeferred(false)
  }
}

/** The CUDA release counters (frees and producer deleters handed to the release thread). */
const releaseStats = () => native.cudaReleaseStats()

/** Polls `cond` (with GC) until it holds or `ms` have passed: for work of the release thread. */
async function waitFor(cond: () => boolean, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!cond() && Date.now() < deadline) {
    await gcUntil(() => false, 1)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  return cond()
}

/** Waits until the release thread has finished what was handed to it. */
async function settled(): Promise<void> {
  await waitFor(() => releaseStats().pending === 0)
}

/** Driver calls made by `fn`, as counted by the fake (after draining earlier garbage). */
async function measure(fn: () => void): Promise<{ counts: Record<string, number>; hostSyncs: number }> {
  await drainGarbage()
  await settled()
  control!.reset()
  fn()
  return { counts: control!.counts(), hostSyncs: control!.hostSyncs() }
}

const fakeOnly = fake ? test.serial : test.serial.skip

// ---------------------------------------------------------------------------------------------
// The setting

test.serial('the CUDA setting is the expected one', (t) => {
  t.log(`available=${available} fake=${fake} devices=${cuda.deviceCount()} reason=${cuda.unavailableReason() ?? '-'}`)
  if (expected === 'fake') {
    t.true(available, `the fake CUDA driver should be usable: ${cuda.unavailableReason() ?? ''} (is <repo>/target/fake-cuda first on LD_LIBRARY_PATH?)`)
    t.true(fake, 'the loaded libcuda is not the fake')
  } else if (expected === 'gpu') {
    t.true(available, `a real GPU should be usable: ${cuda.unavailableReason() ?? ''}`)
    t.false(fake, 'the fake CUDA driver is loaded: take target/fake-cuda off LD_LIBRARY_PATH')
  } else if (expected === 'none') {
    t.false(available, 'CUDA should be unavailable in this setting')
  } else {
    // No expectation set: the probe must at least be self-consistent.
    t.is(available, cuda.deviceCount() > 0)
  }
})

// ---------------------------------------------------------------------------------------------
// No usable driver: every CUDA call throws ERR_CUDA_UNAVAILABLE, nothing crashes

if (!available) {
  test.serial('no driver: isAvailable() is false, deviceCount() is 0, and the reason is given', (t) => {
    t.false(cuda.isAvailable())
    t.is(cuda.deviceCount(), 0)
    t.is(typeof cuda.unavailableReason(), 'string')
    t.false(native.cudaIsAvailable())
    t.is(native.cudaDeviceCount(), 0)
  })

  test.serial('no driver: every CUDA operation throws ERR_CUDA_UNAVAILABLE', async (t) => {
    const unavailable = (fn: () => unknown, what: string) => throwsCode(t, fn, 'ERR_CUDA_UNAVAILABLE', CudaError, what)
    unavailable(() => Tensor.empty([2], 'float32', { device: 'cuda:0' }), 'empty')
    unavailable(() => Tensor.zeros([2, 3], 'int32', { device: 'cuda' }), 'zeros')
    unavailable(() => Tensor.zeros([0], 'float32', { device: 'cuda:1' }), 'zeros, empty shape, device 1')
    const host = Tensor.from(new Float32Array([1, 2]))
    unavailable(() => host.to('cuda:0'), 'to')
    unavailable(() => host.to([2, 0]), 'to [2, 0]')
    t.is((t.throws(() => native.cudaSynchronize(0)) as { code?: string }).code, 'ERR_CUDA_UNAVAILABLE')
    // A CUDA capsule cannot be checked without a driver: refused, and its deleter runs once.
    await drainGarbage()
    const before = c.deleterCalls()
    const capsule = c.makeTensor({ device: [2, 0], shape: [4], versioned: true })
    unavailable(() => fromDLPack(capsule), 'import of a CUDA capsule')
    t.true(isCapsuleConsumed(capsule))
    t.is(c.deleterCalls(), before + 1)
    // Still unavailable on a second try (the answer is cached, and nothing panicked).
    unavailable(() => Tensor.empty([1], 'uint8', { device: 'cuda:0' }), 'second try')
    // CPU work is unaffected.
    t.deepEqual(Array.from(host.to('cpu').data), [1, 2])
    t.deepEqual(values(fromDLPack(host.__dlpack__())), [1, 2])
  })

  ;(fake ? test.serial : test.serial.skip)('no driver: the fake, loaded with no device, saw no allocation', (t) => {
    t.is(control!.liveAllocations(), 0)
    t.is(control!.callCount('cuMemAllocAsync') + control!.callCount('cuMemAlloc_v2'), 0)
  })
}

// ---------------------------------------------------------------------------------------------
// With a driver (the fake or a GPU)

if (available) {
  const p = peer!
  const devices = cuda.deviceCount()

  test.serial('isAvailable() and deviceCount()', (t) => {
    t.true(cuda.isAvailable())
    t.true(devices >= 1)
    t.is(cuda.unavailableReason(), undefined)
    if (fake && process.env.FAKE_CUDA_DEVICE_COUNT) t.is(devices, Number(process.env.FAKE_CUDA_DEVICE_COUNT))
  })

  test.serial('empty and zeros allocate device memory; zeros really zeroes it', async (t) => {
    await drainGarbage()
    const live = fake ? control!.liveAllocations() : 0
    const empty = Tensor.empty([2, 3], 'float32', { device: 'cuda:0' })
    t.is(String(empty.device), 'cuda:0')
    t.deepEqual(empty.__dlpack_device__(), [2, 0])
    t.deepEqual(empty.shape, [2, 3])
    t.deepEqual(empty.strides, [3, 1])
    t.is(empty.dtype, 'float32')
    t.is(empty.nbytes, 24)
    t.true(empty.isContiguous)
    t.not(empty.dataPointer, 0n)
    for (const dtype of ['float32', 'float64', 'int8', 'uint16', 'int64', 'bool', 'float16', 'complex64'] as const) {
      const zeros = Tensor.zeros([3, 5], dtype, { device: 'cuda:0' })
      const back = zeros.to('cpu')
      t.is(back.dtype, dtype)
      t.true(bytesOf(back.data).every((byte) => byte === 0), dtype)
      zeros.dispose()
    }
    if (fake) {
      // The fake fills new device memory with 0xA5: `empty` really skips the memset, `zeros`
      // really does it.
      t.true(bytesOf(cpu(empty).data).every((byte) => byte === 0xa5))
      await settled() // without memory pools, frees run on the release thread
      t.is(control!.liveAllocations(), live + 1)
    }
    const none = Tensor.zeros([0, 4], 'float32', { device: 'cuda:0' })
    t.is(none.numel, 0)
    t.deepEqual(Array.from(none.to('cpu').data), [])
    if (devices > 1) t.deepEqual(Tensor.zeros([2], 'int32', { device: `cuda:${devices - 1}` }).__dlpack_device__(), [2, devices - 1])
    throwsCode(t, () => Tensor.zeros([2], 'float32', { device: `cuda:${devices}` }), 'ERR_DLPACK_DEVICE', BufferError)
    throwsCode(t, () => Tensor.zeros([-1], 'float32', { device: 'cuda:0' }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
    throwsCode(t, () => Tensor.zeros([2], 'float32', { device: 'rocm:0' }), 'ERR_DLPACK_DEVICE', BufferError)
  })

  test.serial('values round trip exactly host -> device -> host, for every dtype', (t) => {
    for (const dtype of DTYPE_NAMES) {
      const source = Tensor.zeros([3, 4], dtype)
      const bytes = bytesOf(source.data)
      for (let i = 0; i < bytes.length; i++) bytes[i] = dtype === 'bool' ? (i * 7) % 2 : (i * 131 + 17) % 256
      const device = source.to('cuda:0')
      t.is(device.dtype, dtype)
      t.deepEqual(device.shape, [3, 4])
      const back = device.to('cpu')
      t.is(String(back.device), 'cpu')
      t.deepEqual(bytesOf(back.data), bytes, dtype)
      t.not(back.dataPointer, source.dataPointer)
    }
  })

  test.serial('to(): strided host tensors arrive row-major; strided device tensors keep their layout', (t) => {
    const base = new Float32Array([0, 1, 2, 3, 4, 5])
    const transposed = Tensor.from(base, [3, 2], { strides: [1, 3] })
    const device = transposed.to('cuda:0')
    t.true(device.isContiguous)
    t.deepEqual(device.to('cpu').toArray(), transposed.toArray())
    // A strided foreign device tensor: copies keep its strides.
    const ptr = p.alloc(6 * 4)
    p.upload(ptr, base)
    const foreign = fromDLPack(p.makeTensor({ ptr, shape: [3, 2], strides: [1, 3] }))
    t.deepEqual(foreign.strides, [1, 3])
    t.deepEqual(foreign.to('cpu').toArray(), [[0, 3], [1, 4], [2, 5]])
    const copy = foreign.to('cuda:0', { copy: true })
    t.deepEqual(copy.strides, [1, 3])
    t.deepEqual(copy.to('cpu').toArray(), [[0, 3], [1, 4], [2, 5]])
    foreign.dispose()
  })

  test.serial('to(): device -> device copies, and sharing when nothing needs to move', (t) => {
    const x = Tensor.from(new Int32Array([1, 2, 3, 4]), [2, 2]).to('cuda:0')
    const same = x.to('cuda:0')
    t.is(same.dataPointer, x.dataPointer, 'same device: shared')
    const copy = x.to('cuda:0', { copy: true })
    t.not(copy.dataPointer, x.dataPointer)
    t.deepEqual(copy.to('cpu').toArray(), [[1, 2], [3, 4]])
    t.deepEqual(fromDLPack(x, { copy: true }).to('cpu').toArray(), [[1, 2], [3, 4]])
    t.is(String(fromDLPack(x, { copy: true }).device), 'cuda:0')
    const host = x.to('cpu')
    t.is(host.to('cpu').dataPointer, host.dataPointer)
    t.not(host.to('cpu', { copy: true }).dataPointer, host.dataPointer)
    if (devices > 1) {
      const other = x.to('cuda:1')
      t.is(String(other.device), 'cuda:1')
      t.deepEqual(other.to('cpu').toArray(), [[1, 2], [3, 4]])
      t.deepEqual(other.to('cuda:0').to('cpu').toArray(), [[1, 2], [3, 4]])
    }
    throwsCode(t, () => x.to('vulkan:0'), 'ERR_DLPACK_DEVICE', BufferError)
    throwsCode(t, () => x.to(`cuda:${devices}`), 'ERR_DLPACK_DEVICE', BufferError)
  })

  test.serial('.data and other host views of CUDA tensors throw, pointing to .to("cpu")', (t) => {
    const x = Tensor.zeros([2], 'float32', { device: 'cuda:0' })
    for (const [what, fn] of [
      ['data', () => x.data],
      ['getData', () => x.getData({ allowReadOnly: true })],
      ['toTypedArray', () => x.toTypedArray()],
      ['toArray', () => x.toArray()],
    ] as const) {
      const error = throwsCode(t, fn, 'ERR_DLPACK_NOT_CPU', BufferError, what)
      t.regex(error.message, /\.to\('cpu'\)/, what)
    }
    t.deepEqual(x.to('cpu').toArray(), [0, 0])
  })

  // -------------------------------------------------------------------------------------------
  // Export and import

  test.serial('CUDA tensors export through __dlpack__ and come back sharing the allocation', (t) => {
    const x = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0')
    t.deepEqual(x.__dlpack_device__(), [2, 0])
    for (const options of [{}, { maxVersion: [1, 0] as const }, { maxVersion: [0, 8] as const }, { stream: 1n }]) {
      const capsule = x.__dlpack__(options)
      const back = fromDLPack(capsule)
      t.is(back.dataPointer, x.dataPointer, JSON.stringify(options, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)))
      t.deepEqual(back.__dlpack_device__(), [2, 0])
      t.deepEqual(values(back), [1, 2, 3, 4])
    }
    // fromDLPack(tensor) shares like for CPU tensors.
    t.is(fromDLPack(x).dataPointer, x.dataPointer)
    // Another addon sees the very same device pointer, and the values.
    const seen = p.consume(x.__dlpack__(), { read: true })
    t.is(seen.data, x.dataPointer)
    t.deepEqual(seen.device, [2, 0])
    t.deepEqual(seen.shape, [4])
    t.deepEqual(floats(seen.bytes!), [1, 2, 3, 4])
    // copy: true exports a private device copy.
    const copied = p.consume(x.__dlpack__({ copy: true }), { read: true })
    t.not(copied.data, x.dataPointer)
    t.deepEqual(floats(copied.bytes!), [1, 2, 3, 4])
    // Asking for another device is refused, as for CPU tensors.
    throwsCode(t, () => x.__dlpack__({ dlDevice: [1, 0] }), 'ERR_DLPACK_DEVICE', BufferError)
  })

  test.serial('foreign CUDA memory imports zero-copy and is released only by its producer', async (t) => {
    await drainGarbage()
    const live = fake ? control!.liveAllocations() : 0
    const deleted = p.deleterCalls()
    const ptr = p.alloc(16)
    p.upload(ptr, new Float32Array([9, 8, 7, 6]))
    const tensor = fromDLPack(p.makeTensor({ ptr, shape: [4] }))
    t.is(tensor.dataPointer, ptr)
    t.deepEqual(tensor.__dlpack_device__(), [2, 0])
    t.deepEqual(values(tensor), [9, 8, 7, 6])
    // Re-exported, it keeps the producer's pointer.
    t.is(p.consume(tensor.__dlpack__()).data, ptr)
    t.is(fromDLPack(tensor.__dlpack__()).dataPointer, ptr)
    if (fake) t.is(control!.liveAllocations(), live + 1)
    t.is(p.deleterCalls(), deleted)
    tensor.dispose()
    t.true(await gcUntil(() => p.deleterCalls() === deleted + 1))
    if (fake) t.is(control!.liveAllocations(), live, 'the producer freed it, in its deleter')

    // Memory whose producer does not free it: we never free it either.
    const kept = p.alloc(64)
    const borrowed = fromDLPack(p.makeTensor({ ptr: kept, shape: [2, 2], byteOffset: 16, owned: false }))
    t.is(borrowed.dataPointer, kept + 16n)
    borrowed.to('cpu')
    borrowed.to('cuda:0', { copy: true }).dispose()
    borrowed.dispose()
    t.true(await gcUntil(() => p.deleterCalls() === deleted + 2))
    await drainGarbage()
    await settled()
    if (fake) t.is(control!.liveAllocations(), live + 1, 'imported memory is never freed by napi-dlpack')
    p.free(kept)
    if (fake) t.is(control!.liveAllocations(), live)
  })

  test.serial('fromDLPack(cudaCapsule, { copy: true }) copies on the device and releases the producer at once', async (t) => {
    await drainGarbage()
    const deleted = p.deleterCalls()
    const ptr = p.alloc(16)
    p.upload(ptr, new Float32Array([1, 3, 5, 7]))
    const copy = fromDLPack(p.makeTensor({ ptr, shape: [2, 2] }), { copy: true })
    t.is(p.deleterCalls(), deleted + 1)
    t.true(copy.isCopy)
    t.not(copy.dataPointer, ptr)
    t.deepEqual(copy.__dlpack_device__(), [2, 0])
    t.deepEqual(copy.to('cpu').toArray(), [[1, 3], [5, 7]])
  })

  test.serial('imports are checked with the driver pointer attributes', async (t) => {
    await drainGarbage()
    const live = fake ? control!.liveAllocations() : 0
    const refuse = (capsule: DLPackCapsule, code: string, Class: abstract new (...args: never[]) => DLPackError, what: string) => {
      const error = throwsCode(t, () => fromDLPack(capsule), code, Class, what)
      t.true(isCapsuleConsumed(capsule), what)
      return error
    }
    // Plain host memory claiming to be CUDA memory.
    let before = c.deleterCalls()
    refuse(c.makeTensor({ device: [2, 0], shape: [4], versioned: true }), 'ERR_DLPACK_DEVICE', BufferError, 'host memory')
    refuse(c.makeTensor({ device: [2, 0], shape: [4], versioned: false }), 'ERR_DLPACK_DEVICE', BufferError, 'host memory, legacy')
    t.is(c.deleterCalls(), before + 2, 'the deleter ran at each throw')
    // Pinned host memory claiming to be device memory.
    const pinned = p.hostAlloc(64)
    before = p.deleterCalls()
    refuse(p.makeTensor({ ptr: pinned, shape: [4], owned: false }), 'ERR_DLPACK_DEVICE', BufferError, 'pinned host memory')
    p.hostFree(pinned)
    // A device that does not exist, and memory of another device.
    refuse(p.makeTensor({ ptr: p.alloc(16), shape: [4], device: [2, devices] }), 'ERR_DLPACK_DEVICE', BufferError, 'no such device')
    if (devices > 1) {
      const error = refuse(p.makeTensor({ ptr: p.alloc(16), shape: [4], device: [2, 1] }), 'ERR_DLPACK_DEVICE', BufferError, 'wrong ordinal')
      t.regex(error.message, /belongs to cuda:0/)
    }
    // Spans larger than the allocation: too many elements, an offset past the end, a stride
    // reaching out. (Far out, so that a real driver's rounding of allocation sizes does not
    // matter.)
    refuse(p.makeTensor({ ptr: p.alloc(64), shape: [1 << 24] }), 'ERR_DLPACK_INVALID_LAYOUT', InvalidTensorError, 'shape too large')
    refuse(p.makeTensor({ ptr: p.alloc(64), shape: [4], byteOffset: 1 << 26 }), 'ERR_DLPACK_INVALID_LAYOUT', InvalidTensorError, 'offset too large')
    refuse(p.makeTensor({ ptr: p.alloc(64), shape: [2, 2], strides: [1 << 24, 1] }), 'ERR_DLPACK_INVALID_LAYOUT', InvalidTensorError, 'strides reach out')
    t.is(p.deleterCalls(), before + 5 + (devices > 1 ? 1 : 0), 'the deleter ran at each throw')
    // A view inside the allocation is fine.
    const ptr = p.alloc(64)
    p.upload(ptr, new Float32Array(Array.from({ length: 16 }, (_, i) => i)))
    const inside = fromDLPack(p.makeTensor({ ptr, shape: [2, 3], strides: [4, 1], byteOffset: 8 }))
    t.deepEqual(inside.to('cpu').toArray(), [[2, 3, 4], [6, 7, 8]])
    inside.dispose()
    await drainGarbage()
    if (fake) t.is(control!.liveAllocations(), live, 'every refused (owned) allocation was freed by its producer')
  })

  // -------------------------------------------------------------------------------------------
  // Streams

  test.serial('stream values: 0 and other invalid values are refused; -1, 1, 2 and handles accepted', (t) => {
    const x = Tensor.zeros([4], 'float32', { device: 'cuda:0' })
    for (const stream of [0, 0n, -2n, -5, 2n ** 64n, -(2n ** 64n)]) {
      throwsCode(t, () => x.__dlpack__({ stream }), 'ERR_DLPACK_STREAM', BufferError, `stream ${String(stream)}`)
    }
    for (const stream of [1.5, Number.MAX_SAFE_INTEGER + 2, 'x', {}] as unknown as bigint[]) {
      throwsCode(t, () => x.__dlpack__({ stream }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, `stream ${String(stream)}`)
    }
    const s = p.createStream()
    for (const stream of [undefined, null, -1, -1n, 1, 1n, 2, 2n, s, Number(s)]) {
      const seen = p.consume(x.__dlpack__({ stream }), { read: true })
      t.is(seen.data, x.dataPointer, `stream ${String(stream)}`)
    }
    // fromDLPack refuses a bad stream before consuming the capsule.
    const capsule = x.__dlpack__()
    throwsCode(t, () => fromDLPack(capsule, { stream: 0n }), 'ERR_DLPACK_STREAM', BufferError)
    t.false(isCapsuleConsumed(capsule))
    t.is(fromDLPack(capsule, { stream: s }).dataPointer, x.dataPointer)
    // fromDLPack passes the consumer's stream to a producer's __dlpack__.
    const asked: unknown[] = []
    const producer = {
      __dlpack__(options?: { stream?: unknown }) {
        asked.push(options?.stream)
        return x.__dlpack__(options as never)
      },
      __dlpack_device__: () => [2, 0] as const,
    }
    fromDLPack(producer, { stream: s })
    fromDLPack(producer, { stream: -1n })
    fromDLPack(producer)
    t.deepEqual(asked, [s, -1n, undefined])
    p.destroyStream(s)
  })

  fakeOnly('stream hand-over (fake, deferred): the consumer stream waits for our write; without the wait it reads stale data', async (t) => {
    const s = p.createStream()
    try {
      await deferred(() => {
        // Our producer, a foreign consumer on its own non-blocking stream.
        const x = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0') // enqueued, not run yet
        t.true(control!.pendingOps() > 0, 'the write is still pending')
        t.deepEqual(floats(p.consume(x.__dlpack__({ stream: s }), { stream: s, read: true }).bytes!), [1, 2, 3, 4])
        for (const stream of [2n, 1n, undefined]) {
          const y = Tensor.from(new Float32Array([5, 6, 7, 8])).to('cuda:0')
          // The consumer reads on the stream it named.
          const read = p.consume(y.__dlpack__({ stream }), { stream: stream ?? 1n, read: true })
          t.deepEqual(floats(read.bytes!), [5, 6, 7, 8], `stream ${String(stream)}`)
        }
        // Negative control: -1 means "no synchronisation"; the consumer stream runs ahead of the
        // pending write and sees the fake's fill pattern, not the data.
        const z = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0')
        const stale = p.consume(z.__dlpack__({ stream: -1n }), { stream: s, read: true }).bytes!
        t.true(stale.every((byte) => byte === 0xa5), `stale: ${Array.from(stale).join(',')}`)
        // ...while our own later read of it is ordered on our stream and correct.
        t.deepEqual(Array.from(z.to('cpu').data), [1, 2, 3, 4])
        // fromDLPack(tensor, { stream }) makes that stream wait too (no capsule seen by the user).
        const w = Tensor.from(new Float32Array([4, 3, 2, 1])).to('cuda:0')
        const shared = fromDLPack(w, { stream: s })
        t.is(shared.dataPointer, w.dataPointer)
        t.deepEqual(floats(p.download(shared.dataPointer, 16, s)), [4, 3, 2, 1])
      })
    } finally {
      p.destroyStream(s)
    }
  })

  fakeOnly('stream hand-over (fake, deferred): importing waits for the producer stream it was given', async (t) => {
    const producerStream = p.createStream()
    const consumerStream = p.createStream()
    /** A foreign producer that wrote asynchronously on its own stream and syncs like DLPack says. */
    const producer = (values: number[]) => {
      const ptr = p.alloc(values.length * 4)
      p.uploadAsync(ptr, new Float32Array(values), producerStream)
      return {
        __dlpack__(options?: { stream?: bigint | number | null }) {
          const stream = options?.stream
          if (stream !== -1n && stream !== -1) p.syncStreams(producerStream, BigInt(stream ?? 1n))
          return p.makeTensor({ ptr, shape: [values.length] })
        },
        __dlpack_device__: () => [2, 0] as const,
      }
    }
    try {
      await deferred(() => {
        t.deepEqual(values(fromDLPack(producer([1, 2, 3]))), [1, 2, 3], 'unset: legacy stream')
        t.deepEqual(values(fromDLPack(producer([4, 5, 6]), { stream: 1n })), [4, 5, 6], 'legacy')
        // A consumer stream of the user's: the producer syncs into it, and our stream waits on it.
        t.deepEqual(values(fromDLPack(producer([7, 8, 9]), { stream: consumerStream })), [7, 8, 9], 'custom stream')
        t.deepEqual(values(fromDLPack(producer([3, 2, 1]), { stream: 2n })), [3, 2, 1], 'per-thread stream')
        // Negative control: -1 skips every synchronisation and our read is stale.
        const stale = bytesOf(fromDLPack(producer([1, 1, 1]), { stream: -1n }).to('cpu').data)
        t.true(stale.every((byte) => byte === 0xa5), `stale: ${Array.from(stale).join(',')}`)
      })
    } finally {
      p.destroyStream(producerStream)
      p.destroyStream(consumerStream)
    }
  })

  fakeOnly('driver calls per exchange (fake): at most one event record and one stream wait, no host sync', async (t) => {
    const x = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0')
    const s = p.createStream()
    p.consume(x.__dlpack__({ stream: s })) // warm-up: creates the one reusable event
    const rows: string[] = []
    const check = (what: string, result: { counts: Record<string, number>; hostSyncs: number }, waits: number) => {
      const { counts, hostSyncs } = result
      rows.push(`${what}: ${JSON.stringify(counts)} hostSyncs=${hostSyncs}`)
      t.is(counts.cuEventRecord ?? 0, waits, `${what}: cuEventRecord`)
      t.is(counts.cuStreamWaitEvent ?? 0, waits, `${what}: cuStreamWaitEvent`)
      t.is(counts.cuEventCreate ?? 0, 0, `${what}: no new event`)
      t.is(hostSyncs, 0, `${what}: host synchronisations`)
      for (const name of ['cuStreamSynchronize', 'cuEventSynchronize', 'cuCtxSynchronize', 'cuMemAllocAsync', 'cuMemAlloc_v2']) {
        t.is(counts[name] ?? 0, 0, `${what}: ${name}`)
      }
    }
    for (const [label, stream, waits] of [
      ['unset', undefined, 0],
      ['1n', 1n, 0],
      ['-1n', -1n, 0],
      ['2n', 2n, 1],
      ['handle', s, 1],
    ] as const) {
      let capsule: DLPackCapsule | undefined
      check(`export, stream ${label}`, await measure(() => (capsule = x.__dlpack__({ stream }))), waits)
      check(`import of our export, stream ${label}`, await measure(() => fromDLPack(capsule!, { stream })), 0)
      const ptr = p.alloc(16)
      const foreign = p.makeTensor({ ptr, shape: [4] })
      const imported = await measure(() => fromDLPack(foreign, { stream }))
      check(`import of a foreign capsule, stream ${label}`, imported, waits)
      t.is(imported.counts.cuPointerGetAttributes, 1)
    }
    t.log(rows.join('\n'))
    p.destroyStream(s)
  })

  // -------------------------------------------------------------------------------------------
  // Lifetime of imported memory, the caller's context, release paths

  fakeOnly('import lifetime (fake, deferred): the producer deleter runs only after our queued copies of its memory ran', async (t) => {
    // The producer is a caching allocator: its deleter hands the block out again at once, to
    // work on its own non-blocking stream (a memset of 0xEE here). Our copies out of the block
    // are queued on our stream; in deferred mode nothing has run yet.
    const producerStream = p.createStream()
    const ptr = p.alloc(16)
    try {
      const ways: [string, (x: Tensor) => Tensor][] = [
        ["to('cuda:0', { copy: true })", (x) => x.to('cuda:0', { copy: true })],
        ['fromDLPack(x, { copy: true })', (x) => fromDLPack(x, { copy: true })],
        ['fromDLPack(x.__dlpack__({ copy: true }))', (x) => fromDLPack(x.__dlpack__({ copy: true }))],
      ]
      for (const [what, copyOf] of ways) {
        p.upload(ptr, new Float32Array([1, 2, 3, 4]))
        await drainGarbage() // earlier tests' imports, so the count below is this one's
        await settled()
        const deleted = p.deleterCalls()
        await deferred(async () => {
          const foreign = fromDLPack(p.makeTensor({ ptr, shape: [4], owned: false, scribble: { stream: producerStream, value: 0xee } }))
          const copy = copyOf(foreign)
          t.true(control!.pendingOps() > 0, `${what}: the copy is still queued`)
          foreign.dispose() // the last holder of the producer's memory
          // The producer's stream runs ahead of ours: a deleter that already ran has scribbled.
          p.syncStream(producerStream)
          t.deepEqual(values(copy), [1, 2, 3, 4], `${what}: the copy read the producer's data, not the reused block`)
        })
        t.true(await waitFor(() => p.deleterCalls() === deleted + 1), `${what}: the deleter ran, once (${p.deleterCalls() - deleted} calls, ${JSON.stringify(releaseStats())})`)
        await settled()
      }
      // The last holder released from a CUDA host function (driver calls refused there): the
      // release thread waits for our stream instead, then runs the deleter, once.
      {
        p.upload(ptr, new Float32Array([5, 6, 7, 8]))
        await drainGarbage()
        await settled()
        const deleted = p.deleterCalls()
        const hostFuncStream = p.createStream()
        await deferred(async () => {
          const foreign = fromDLPack(p.makeTensor({ ptr, shape: [4], owned: false }))
          const copy = foreign.to('cuda:0', { copy: true })
          const capsule = foreign.__dlpack__()
          foreign.dispose() // the capsule is the last holder now
          p.releaseInHostFunc(capsule, hostFuncStream)
          p.syncStream(hostFuncStream) // runs the host function, which calls our deleter
          t.deepEqual(values(copy), [5, 6, 7, 8], 'released from a host function: the copy is right')
        })
        t.true(await waitFor(() => p.deleterCalls() === deleted + 1), 'released from a host function: the deleter ran, once')
        await settled()
        p.destroyStream(hostFuncStream)
      }
      // Negative control: the same race without our wait (the block reused while the copy is
      // queued) gives the scribble, so the check above can fail.
      p.upload(ptr, new Float32Array([1, 2, 3, 4]))
      await deferred(async () => {
        const foreign = fromDLPack(p.makeTensor({ ptr, shape: [4], owned: false }))
        const copy = foreign.to('cuda:0', { copy: true })
        p.scribble(ptr, 16, producerStream, 0xee)
        p.syncStream(producerStream)
        t.true(bytesOf(copy.to('cpu').data).every((byte) => byte === 0xee), 'the race is visible')
        foreign.dispose()
      })
      t.is(releaseStats().errors, 0)
    } finally {
      await settled()
      p.free(ptr)
      p.destroyStream(producerStream)
    }
  })

  fakeOnly('a producer deleter still waiting on the release thread runs before the process or Worker ends (natural end, process.exit, Worker exit)', (t) => {
    // A child process (deferred mode): a foreign tensor whose deleter takes 500 ms, read by a
    // queued copy, disposed, and the process (or a Worker in it) ends at once. The peer counts
    // its deleters from an atexit handler, which runs after the environments' cleanup hooks.
    const child = join(here, '..', 'harness', 'workers', 'cuda-deleter-at-exit.mjs')
    for (const end of ['natural', 'exit', 'worker']) {
      const output = execFileSync(process.execPath, [child, end], {
        env: { ...process.env, FAKE_CUDA_DEFERRED: '1' },
        encoding: 'utf8',
      })
      const lines = output.trim().split('\n')
      t.deepEqual(JSON.parse(lines[0] ?? ''), { deleted: 0, pending: 1 }, `${end}: the deleter was on the release thread`)
      if (end === 'worker') t.is(lines[1], 'deleter-calls-after-worker-exit 1', 'the Worker ended after its deleter ran')
      t.is(lines.at(-1), 'peer-deleter-calls-at-exit 1', `${end}: the deleter ran, once, before the process ended`)
    }
  })

  test.serial("the caller's current context is kept: none stays none, another device's stays current", async (t) => {
    const s = p.createStream()
    const foreignPtr = p.alloc(16)
    p.upload(foreignPtr, new Float32Array([1, 2, 3, 4]))
    const host = Tensor.from(new Float32Array([1, 2, 3, 4]))
    const x = host.to('cuda:0')
    const operations: [string, () => unknown][] = [
      ['Tensor.zeros', () => Tensor.zeros([4], 'float32', { device: 'cuda:0' })],
      ['Tensor.empty', () => Tensor.empty([4], 'float32', { device: 'cuda:0' })],
      ["to('cuda:0')", () => host.to('cuda:0')],
      ["to('cpu')", () => x.to('cpu')],
      ['device copy', () => x.to('cuda:0', { copy: true })],
      ['export to a stream', () => x.__dlpack__({ stream: s })],
      ['import of a foreign capsule', () => fromDLPack(p.makeTensor({ ptr: foreignPtr, shape: [4], owned: false }), { stream: s })],
      ['import with copy', () => fromDLPack(p.makeTensor({ ptr: foreignPtr, shape: [4], owned: false }), { copy: true })],
      ['synchronize', () => native.cudaSynchronize(0)],
      ['dispose (free)', () => host.to('cuda:0').dispose()],
      ['dispose of a foreign tensor read by a queued copy', () => {
        const foreign = fromDLPack(p.makeTensor({ ptr: foreignPtr, shape: [4], owned: false }))
        foreign.to('cuda:0', { copy: true })
        foreign.dispose()
      }],
    ]
    const settings: [string, number | null][] = [['no context', null]]
    if (devices > 1) settings.push(["cuda:1's context", 1])
    for (const [setting, current] of settings) {
      for (const [what, operation] of operations) {
        p.setCurrentContext(current)
        const before = p.currentContext()
        if (current === null) t.is(before, 0n)
        operation()
        t.is(p.currentContext(), before, `${setting}: ${what}`)
      }
    }
    // Deleters too: ours, called on a fresh thread that has no current context.
    const released = p.releaseOnThread(Tensor.zeros([4], 'float32', { device: 'cuda:0' }).__dlpack__())
    t.deepEqual(released, { before: 0n, after: 0n }, 'the deleter left the thread as it found it')
    // Negative control: the probe sees a context made current (the peer's alloc binds one
    // without restoring, as cudarc's bind_to_thread did).
    p.setCurrentContext(null)
    p.free(p.alloc(16))
    t.not(p.currentContext(), 0n, 'a bind without restore is visible')
    await settled()
    p.free(foreignPtr)
    p.destroyStream(s)
  })

  test.serial('deleters on a thread with no current context free our memory (the loop would exhaust a small device otherwise)', async (t) => {
    await drainGarbage()
    await settled()
    const live = fake ? control!.liveAllocations() : 0
    const errors = releaseStats().errors
    const bytes = 1 << 20
    for (let i = 0; i < 64; i++) {
      const capsule = Tensor.empty([bytes], 'uint8', { device: 'cuda:0' }).__dlpack__()
      const { before, after } = p.releaseOnThread(capsule)
      t.is(before, 0n)
      t.is(after, 0n)
    }
    await settled()
    t.is(releaseStats().errors, errors, 'no release failed')
    if (fake) t.true(await gcUntil(() => control!.liveAllocations() === live), 'every allocation was freed')
  })

  test.serial('a CUDA tensor goes to a Worker by transfer token: same device pointer, read there, freed once by the last holder on either thread', async (t) => {
    await drainGarbage()
    await settled()
    const live = fake ? control!.liveAllocations() : 0
    const errors = releaseStats().errors
    for (const workerDisposesFirst of [false, true]) {
      const x = Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0')
      const transfer = x.transfer()
      t.is(transfer.kind, 'token', 'device memory goes by token')
      const worker = new Worker(
        `const { parentPort } = require('node:worker_threads')
        const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
        parentPort.once('message', ({ transfer, disposeFirst }) => {
          const y = Tensor.fromTransfer(transfer)
          parentPort.postMessage({ pointer: y.dataPointer, device: y.__dlpack_device__(), values: Array.from(y.to('cpu').data) })
          if (disposeFirst) y.dispose()
          else globalThis.kept = y // released when the worker ends
          // Stay alive (a listening port keeps the loop running) until the main thread has
          // checked who holds the memory; without this the worker could end, and release its
          // tensor, before the main thread looks.
          parentPort.once('message', () => {})
        })`,
        { eval: true },
      )
      const exited = once(worker, 'exit')
      worker.postMessage({ transfer, disposeFirst: workerDisposesFirst })
      const [reply] = (await once(worker, 'message')) as [{ pointer: bigint; device: number[]; values: number[] }]
      t.is(reply.pointer, x.dataPointer, 'the worker holds the same device memory')
      t.deepEqual(reply.device, [2, 0])
      t.deepEqual(reply.values, [1, 2, 3, 4])
      if (workerDisposesFirst) {
        worker.postMessage('done')
        await exited
        await settled()
        if (fake) t.is(control!.liveAllocations(), live + 1, 'the main thread still holds it')
        x.dispose()
      } else {
        x.dispose()
        await settled()
        if (fake) t.is(control!.liveAllocations(), live + 1, 'the worker still holds it')
        worker.postMessage('done')
        await exited
      }
      await settled()
      if (fake) t.true(await gcUntil(() => control!.liveAllocations() === live), 'freed once the last holder let go')
    }
    t.is(releaseStats().errors, errors, 'no release failed')
  })

  test.serial('a deleter called from a CUDA host function (where driver calls are not permitted) neither deadlocks nor leaks', async (t) => {
    await drainGarbage()
    await settled()
    const live = fake ? control!.liveAllocations() : 0
    const errors = releaseStats().errors
    const s = p.createStream()
    const released = p.hostFuncReleases()
    for (let i = 0; i < 8; i++) {
      const x = Tensor.zeros([1024], 'float32', { device: 'cuda:0' })
      const capsule = x.__dlpack__()
      x.dispose()
      p.releaseInHostFunc(capsule, s)
    }
    t.true(await waitFor(() => p.hostFuncReleases() === released + 8), 'every host function returned')
    await settled()
    t.is(releaseStats().errors, errors, 'no release failed')
    if (fake) t.true(await gcUntil(() => control!.liveAllocations() === live), 'every allocation was freed (by the release thread)')
    p.destroyStream(s)
  })

  fakeOnly('drops bind the context with the raw driver call: a failure left behind does not skip the bind, and release failures are counted', async (t) => {
    await drainGarbage()
    await settled()
    const x = Tensor.zeros([16], 'float32', { device: 'cuda:0' })
    const y = Tensor.zeros([16], 'float32', { device: 'cuda:0' })
    // A failure inside a drop path: zeros' memset fails and so does the free of its fresh
    // allocation (cudarc kept such a failure in the context's sticky error slot, which the next
    // bind_to_thread returned before binding).
    control!.setFault('cuMemsetD8Async', 1, UNKNOWN)
    control!.setFault('cuMemFreeAsync', 1, UNKNOWN)
    control!.setFault('cuMemFree_v2', 1, UNKNOWN)
    throwsCode(t, () => Tensor.zeros([16], 'float32', { device: 'cuda:0' }), 'ERR_CUDA', CudaError)
    control!.setFault('cuMemFreeAsync', 0, UNKNOWN)
    control!.setFault('cuMemFree_v2', 0, UNKNOWN)
    await settled()
    const errors = releaseStats().errors
    const live = control!.liveAllocations()
    const crossContext = control!.crossContextFrees()
    // The drops happen on this thread with no context current, then with another device's.
    p.setCurrentContext(null)
    x.dispose()
    await settled()
    t.is(control!.liveAllocations(), live - 1, 'x was freed (no INVALID_CONTEXT leak)')
    if (devices > 1) {
      p.setCurrentContext(1)
      y.dispose()
      await settled()
      t.is(control!.liveAllocations(), live - 2, 'y was freed')
      t.is(control!.crossContextFrees(), crossContext, "y was freed in its own device's context")
    } else {
      y.dispose()
    }
    // A free that fails in a drop is counted (and printed once), not swallowed.
    const z = Tensor.zeros([16], 'float32', { device: 'cuda:0' })
    control!.setFault('cuMemFreeAsync', 1, UNKNOWN)
    control!.setFault('cuMemFree_v2', 1, UNKNOWN)
    z.dispose()
    await settled()
    control!.setFault('cuMemFreeAsync', 0, UNKNOWN)
    control!.setFault('cuMemFree_v2', 0, UNKNOWN)
    t.is(releaseStats().errors, errors + 1, 'the failed free was counted')
    // ...and leaves no error behind for the next, unrelated call.
    t.deepEqual(values(Tensor.zeros([2], 'int32', { device: 'cuda:0' })), [0, 0])
  })

  fakeOnly('result codes of CUDA 13.x drivers (unknown to the 12.8 bindings) become ERR_CUDA with their name', (t) => {
    for (const [code, name] of [
      [36, 'CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER'],
      [47, 'CUDA_ERROR_MULTICAST_RESOURCE_FULL'],
      [227, 'CUDA_ERROR_INSUFFICIENT_LOADER_VERSION'],
      [917, 'CUDA_ERROR_STREAM_DETACHED'],
      [918, 'CUDA_ERROR_GRAPH_RECAPTURE_FAILURE'],
      [919, 'CUDA_ERROR_FABRIC_NOT_READY'],
    ] as const) {
      control!.setFault('cuMemAllocAsync', 1, code)
      control!.setFault('cuMemAlloc_v2', 1, code)
      const error = throwsCode(t, () => Tensor.empty([4], 'float32', { device: 'cuda:0' }), 'ERR_CUDA', CudaError, String(code))
      t.regex(error.message, new RegExp(`${name} \\(${code}\\)`))
      control!.setFault('cuMemAllocAsync', 0, code)
      control!.setFault('cuMemAlloc_v2', 0, code)
    }
    t.deepEqual(values(Tensor.zeros([2], 'int32', { device: 'cuda:0' })), [0, 0])
  })

  fakeOnly('a stub libcuda (cuInit -> CUDA_ERROR_STUB_LIBRARY) is reported as such, in a fresh process', (t) => {
    const script = `import('${join(root, 'dist', 'index.js').replace(/\\/g, '/')}').then((m) => {
      console.log(JSON.stringify({ available: m.cuda.isAvailable(), reason: m.cuda.unavailableReason() }))
    })`
    const run = (faults: string | undefined) =>
      JSON.parse(
        execFileSync(process.execPath, ['-e', script], {
          env: { ...process.env, FAKE_CUDA_FAULTS: faults, FAKE_CUDA_DEVICE_COUNT: '1' },
          encoding: 'utf8',
        }),
      ) as { available: boolean; reason?: string }
    const stub = run('cuInit:1:34+')
    t.false(stub.available)
    t.regex(stub.reason ?? '', /CUDA_ERROR_STUB_LIBRARY \(34\)/)
    t.regex(stub.reason ?? '', /stub library.*LD_LIBRARY_PATH/)
    // Control: the same process setup without the fault has CUDA.
    t.true(run(undefined).available)
  })

  // -------------------------------------------------------------------------------------------
  // Faults and leaks

  fakeOnly('fault injection (fake): driver failures throw ERR_CUDA and leak nothing', async (t) => {
    await drainGarbage()
    const live = control!.liveAllocations()
    const storages = native.nativeStats().liveStorages
    const cudaError = (fn: () => unknown, what: string, pattern: RegExp) => {
      const error = throwsCode(t, fn, 'ERR_CUDA', CudaError, what)
      t.regex(error.message, pattern, what)
    }
    const fault = (name: string, result: number) => control!.setFault(name, 1, result)
    const clear = (...names: string[]) => names.forEach((name) => control!.setFault(name, 0, UNKNOWN))
    // Allocation failure (whichever allocator the device uses).
    fault('cuMemAllocAsync', OUT_OF_MEMORY)
    fault('cuMemAlloc_v2', OUT_OF_MEMORY)
    cudaError(() => Tensor.empty([1024], 'float32', { device: 'cuda:0' }), 'alloc', /OUT_OF_MEMORY/)
    clear('cuMemAllocAsync', 'cuMemAlloc_v2')
    // memset failure in zeros: the fresh allocation is released.
    fault('cuMemsetD8Async', UNKNOWN)
    cudaError(() => Tensor.zeros([16], 'float32', { device: 'cuda:0' }), 'memset', /UNKNOWN/)
    // Copy failures, both ways.
    fault('cuMemcpyHtoDAsync_v2', UNKNOWN)
    cudaError(() => Tensor.from(new Float32Array(8)).to('cuda:0'), 'host -> device', /cuMemcpyHtoDAsync/)
    const x = Tensor.from(new Float32Array([1, 2])).to('cuda:0')
    fault('cuMemcpyDtoHAsync_v2', ILLEGAL_ADDRESS)
    cudaError(() => x.to('cpu'), 'device -> host', /ILLEGAL_ADDRESS/)
    fault('cuMemcpyDtoDAsync_v2', UNKNOWN)
    cudaError(() => x.to('cuda:0', { copy: true }), 'device -> device', /cuMemcpyDtoDAsync/)
    // Event record and stream wait failures during an export: no capsule, nothing held.
    const s = p.createStream()
    fault('cuEventRecord', INVALID_HANDLE)
    cudaError(() => x.__dlpack__({ stream: s }), 'event record', /cuEventRecord.*INVALID_HANDLE/)
    fault('cuStreamWaitEvent', INVALID_HANDLE)
    cudaError(() => x.__dlpack__({ stream: s }), 'stream wait', /cuStreamWaitEvent/)
    cudaError(() => x.__dlpack__({ stream: 0xdead0000n }), 'a bogus stream handle', /INVALID_HANDLE/)
    // Pointer attribute query failure during an import: refused, the deleter ran.
    const deleted = p.deleterCalls()
    fault('cuPointerGetAttributes', UNKNOWN)
    cudaError(() => fromDLPack(p.makeTensor({ ptr: p.alloc(16), shape: [4] })), 'pointer attributes', /cuPointerGetAttributes/)
    t.is(p.deleterCalls(), deleted + 1)
    // Everything still works afterwards.
    t.deepEqual(Array.from(x.to('cpu').data), [1, 2])
    t.deepEqual(floats(p.consume(x.__dlpack__({ stream: s }), { stream: s, read: true }).bytes!), [1, 2])
    p.destroyStream(s)
    x.dispose()
    t.true(await gcUntil(() => control!.liveAllocations() === live && native.nativeStats().liveStorages === storages))
    t.is(control!.liveAllocations(), live)
  })

  fakeOnly('leaks (fake): device allocations go back to the baseline after dispose and GC', async (t) => {
    await drainGarbage()
    const live = control!.liveAllocations()
    const events = control!.liveEvents()
    const storages = native.nativeStats().liveStorages
    const s = p.createStream()
    // In a plain function: a suspended async frame would keep the last iteration's tensors.
    const churn = (i: number) => {
      const x = Tensor.zeros([64], 'float32', { device: 'cuda:0' })
      const y = Tensor.from(new Float64Array(8)).to('cuda:0')
      const z = y.to('cuda:0', { copy: true })
      z.to('cpu')
      fromDLPack(x.__dlpack__({ stream: s })) // consumed
      x.__dlpack__() // never consumed: released by GC
      x.__dlpack__({ copy: true }) // a private copy, never consumed
      p.consume(y.__dlpack__({ stream: s }), { read: true })
      if (i % 2 === 0) {
        x.dispose()
        y.dispose()
      }
    }
    for (let i = 0; i < 20; i++) churn(i)
    t.true(control!.liveAllocations() > live)
    t.true(
      await gcUntil(() => control!.liveAllocations() === live && native.nativeStats().liveStorages === storages),
      `live allocations ${control!.liveAllocations()} (baseline ${live})`,
    )
    t.is(control!.liveEvents(), events, 'no event per exchange (one is reused)')
    p.destroyStream(s)
  })
}

// ---------------------------------------------------------------------------------------------
// Conversions (lib/convert.ts): views are metadata only, so they work on device memory; the
// host kernels refuse it.

;(available ? test.serial : test.serial.skip)('permute views CUDA memory in place; contiguous copies and astype refuse it', (t) => {
  const host = Tensor.from(new Float32Array(24).map((_, i) => i), [2, 3, 4])
  const device = host.to('cuda:0')
  const view = device.permute(2, 0, 1)
  t.deepEqual(view.shape, [4, 2, 3])
  t.deepEqual(view.strides, [1, 12, 4])
  t.is(view.dataPointer, device.dataPointer)
  t.is(String(view.device), 'cuda:0')
  t.is(device.contiguous().dataPointer, device.dataPointer, 'already contiguous: shared')
  throwsCode(t, () => view.contiguous(), 'ERR_DLPACK_NOT_CPU', BufferError)
  throwsCode(t, () => device.astype('float64'), 'ERR_DLPACK_NOT_CPU', BufferError)
  // Back on the host, the permuted view converts like any other.
  const back = view.to('cpu').astype('float64')
  t.deepEqual(Array.from(back.data).slice(0, 6), [0, 4, 8, 12, 16, 20])
  for (const tensor of [host, device, view, back]) tensor.dispose()
})

// The views of docs/views.md on device memory: metadata only, so they never touch the device;
// the view addresses the same allocation (data pointer arithmetic), exports the view's own first
// element and strides to another addon, and reads back (to('cpu')) as the same view of the host
// tensor does. Both CUDA storages: our allocation, and a foreign producer's.
;(available ? test.serial : test.serial.skip)('views of CUDA tensors: same allocation, exported with their own layout, same values as on the host', async (t) => {
  await drainGarbage()
  const host = Tensor.from(new Float32Array(60).map((_, i) => i), [3, 4, 5])
  const ptr = peer!.alloc(60 * 4)
  peer!.upload(ptr, host.data)
  const sources: [string, Tensor<'float32'>][] = [
    ['our allocation', host.to('cuda:0')],
    ['a foreign allocation', fromDLPack(peer!.makeTensor({ ptr, shape: [3, 4, 5], owned: false })) as Tensor<'float32'>],
  ]
  const views: [string, (x: Tensor<'float32'>) => Tensor<'float32'>][] = [
    ['reshape', (x) => x.reshape(12, -1)],
    ['view + unsqueeze', (x) => x.view(3, 20).unsqueeze(1)],
    ['squeeze', (x) => x.narrow(0, 1, 1).squeeze(0)],
    ['flatten', (x) => x.flatten(1)],
    ['slice, negative step', (x) => x.slice(2, -1, 0, -2)],
    ['narrow', (x) => x.narrow(1, -3, 2)],
    ['select', (x) => x.select(2, 3)],
    ['expand', (x) => x.select(0, 2).unsqueeze(0).expand(2, -1, -1)],
    ['permuted then sliced', (x) => x.permute(2, 0, 1).slice(0, 1, null, 2).select(1, 1)],
  ]
  const allocations = () => (fake ? control!.callCount('cuMemAllocAsync') + control!.callCount('cuMemAlloc_v2') : 0)
  const allocated = allocations()
  for (const [origin, device] of sources) {
    for (const [name, make] of views) {
      const what = `${origin}: ${name}`
      const expected = make(host)
      const view = make(device)
      t.is(String(view.device), 'cuda:0', what)
      t.deepEqual([view.shape, view.strides, view.readonly], [expected.shape, expected.strides, expected.readonly], what)
      t.is(view.dataPointer - device.dataPointer, expected.dataPointer - host.dataPointer, `${what}: same offset into the allocation`)
      t.deepEqual(view.to('cpu').toArray(), expected.toArray(), `${what}: values`)
      const seen = peer!.consume(view.__dlpack__())
      t.is(seen.data + BigInt(seen.byteOffset), view.dataPointer, `${what}: the consumer's first element`)
      t.deepEqual([seen.shape, seen.strides ?? []], [view.shape, view.strides], what)
      t.is(fromDLPack(view.__dlpack__()).dataPointer, view.dataPointer, what)
    }
  }
  t.is(allocations(), allocated, 'no view allocates device memory')
  throwsCode(t, () => sources[0]![1].transpose(0, 2).reshape(-1), 'ERR_DLPACK_NOT_CONTIGUOUS')
  for (const [, device] of sources) device.dispose()
  host.dispose()
  await drainGarbage()
  peer!.free(ptr)
})
