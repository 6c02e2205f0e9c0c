// Pinned host tensors (issue 27, item 3): device 'cuda_host' (DLPack kDLCUDAHost), memory from
// cuMemHostAlloc. Allocation, zero-copy JS views and exports (pointer identity, writes seen on
// the other side), imports of another producer's pinned tensor, copies to and from CUDA devices
// straight from and into the pinned memory, every release path counted through the fake driver
// (cuMemFreeHost exactly once per allocation: dispose, GC, a consumer's deleter, a thread with
// no context, a Worker's exit), coded errors and fault injection (nothing leaked), and Electron
// mode (no external ArrayBuffers: NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1).
//
// Runs in every CUDA setting of scripts/test.mjs (against the fake CUDA driver, a test double,
// with 2 devices, without memory pools and in Electron mode; on a GPU; without a driver; under
// Bun and Deno with the fake). What needs the fake's control API (call counts, live pinned allocations, the host
// address a copy read or wrote, deferred streams, faults) is skipped elsewhere; without a driver
// only the checks that need none run.
import { Worker } from 'node:worker_threads'

import test from 'ava'

import { CudaError, Device, DLDeviceType, type DType, Tensor, cuda, fromDLPack } from '../../dist/index.js'
import { native } from '../../dist/native.js'
import { OUT_OF_MEMORY, UNKNOWN, available, control, deferred, fakeLoaded, floats, peer, settled } from '../harness/fake-cuda.js'
import { addressOf, drainGarbage, gcUntil, throwsCode } from '../harness/helpers.js'

const fake = available && fakeLoaded
/** External ArrayBuffers refused, as in Electron (the forced mode of scripts/test.mjs). */
const electron = !!process.env.NAPI_DLPACK_NO_EXTERNAL_BUFFERS && process.env.NAPI_DLPACK_NO_EXTERNAL_BUFFERS !== '0'

const withCuda = available ? test.serial : test.serial.skip
const fakeOnly = fake ? test.serial : test.serial.skip
const withoutCuda = available ? test.serial.skip : test.serial

const seq = (n: number, from = 0) => Float32Array.from({ length: n }, (_, i) => from + i)

/** Counters of the pinned allocator, read from the fake after the release thread settled. */
async function pinnedCounts(): Promise<{ allocs: number; frees: number; live: number; errors: number }> {
  await settled()
  return {
    allocs: control!.callCount('cuMemHostAlloc'),
    frees: control!.callCount('cuMemFreeHost'),
    live: control!.liveHostAllocations(),
    errors: native.cudaReleaseStats().errors,
  }
}

/** `.data` of a pinned tensor: its zero-copy view, or (Electron) the coded refusal. */
function viewOf<D extends DType>(tensor: Tensor<D>): Tensor<D>['data'] | undefined {
  return electron ? undefined : tensor.data
}

// ---------------------------------------------------------------------------------------------
// Device strings and errors that need no driver

test('cuda_host parses as DLPack kDLCUDAHost (3, 0); only id 0 exists', (t) => {
  const device = Device.CUDA_HOST
  t.deepEqual(device.toDLPack(), [DLDeviceType.CUDAHost, 0])
  t.is(device.name, 'cuda_host')
  t.is(String(device), 'cuda_host:0')
  t.true(device.equals('cuda_host'))
  t.true(device.equals('cuda_host:0'))
  t.true(device.equals([3, 0]))
  // An ordinal other than 0 is refused before the driver is asked, with the same code anywhere.
  for (const bad of ['cuda_host:1', [3, 2] as [number, number]]) {
    throwsCode(t, () => Tensor.empty([2], 'uint8', { device: bad }), 'ERR_DLPACK_DEVICE', undefined, String(bad))
  }
  throwsCode(t, () => Tensor.from(seq(2)).to('cuda_host:1'), 'ERR_DLPACK_DEVICE', undefined, "to('cuda_host:1')")
  throwsCode(t, () => Tensor.empty([2], 'uint8', { device: 'cuda_host:x' }), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'bad string')
  throwsCode(t, () => Tensor.empty([2], 'uint8', { device: 'cuda_host', shared: true }), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'shared')
  throwsCode(t, () => Tensor.empty([-1], 'uint8', { device: 'cuda_host' }), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'negative')
  throwsCode(t, () => Tensor.empty([2], 'nope' as DType, { device: 'cuda_host' }), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'dtype')
})

withoutCuda('no driver: pinned allocations and pin() throw ERR_CUDA_UNAVAILABLE, nothing crashes', (t) => {
  const unavailable = (fn: () => unknown, what: string) => throwsCode(t, fn, 'ERR_CUDA_UNAVAILABLE', CudaError, what)
  unavailable(() => Tensor.empty([4], 'float32', { device: 'cuda_host' }), 'empty')
  unavailable(() => Tensor.zeros([0], 'float32', { device: 'cuda_host' }), 'zeros of nothing')
  unavailable(() => Tensor.from(seq(4)).pin(), 'pin()')
  unavailable(() => Tensor.from(seq(4)).to('cuda_host', { copy: true }), "to('cuda_host')")
  t.false(cuda.isAvailable())
})

// ---------------------------------------------------------------------------------------------
// Allocation, JS views, every dtype

withCuda('Tensor.empty/zeros on cuda_host: pinned memory, viewed from JS zero-copy, every dtype', (t) => {
  for (const dtype of ['bool', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64', 'float16', 'bfloat16', 'float32', 'float64', 'complex64', 'complex128'] as DType[]) {
    const zeros = Tensor.zeros([3, 5], dtype, { device: 'cuda_host' })
    t.is(String(zeros.device), 'cuda_host:0', dtype)
    t.deepEqual(zeros.__dlpack_device__(), [3, 0], dtype)
    t.true(zeros.isContiguous)
    t.false(zeros.isCopy)
    t.deepEqual(zeros.shape, [3, 5])
    // toTypedArray copies and works in every runtime; all zeros (the fake fills new pinned
    // memory with 0xA5, so this is zeros' own memset).
    const copy = zeros.toTypedArray() as ArrayLike<number | bigint>
    t.true(Array.from(copy).every((value) => Number(value) === 0), `${dtype} zeros`)
    if (!electron) {
      const data = zeros.data
      t.is(addressOf(data), zeros.dataPointer, `${dtype}: .data views the pinned memory`)
    }
    zeros.dispose()
  }
  const empty = Tensor.empty([0, 4], 'float32', { device: 'cuda_host' })
  t.is(empty.numel, 0)
  t.deepEqual(Array.from(empty.toTypedArray()), [])
  if (!electron) t.is(empty.data.length, 0)
})

withCuda('writes through .data are seen by exports, imports and copies (pointer identity)', (t) => {
  if (electron) return t.pass('Electron mode: see the Electron test')
  const pinned = Tensor.zeros([4], 'float32', { device: 'cuda_host' })
  pinned.data.set([1, 2, 3, 4])
  // Our own capsule back: the same memory.
  const again = fromDLPack(pinned.__dlpack__())
  t.is(again.dataPointer, pinned.dataPointer)
  t.is(String(again.device), 'cuda_host:0')
  again.data[0] = 10
  t.is(pinned.data[0], 10, 'a write through the import is seen by the original')
  // A consumer sees kDLCUDAHost and the same address.
  const consumed = peer!.consume(pinned.__dlpack__())
  t.deepEqual(consumed.device, [3, 0])
  t.is(consumed.data, pinned.dataPointer)
  // Views stay pinned and share the memory.
  const view = pinned.slice(0, 1, 3)
  t.is(String(view.device), 'cuda_host:0')
  t.is(view.dataPointer, pinned.dataPointer + 4n)
  view.data[0] = 20
  t.is(pinned.data[1], 20)
  // pin() and to('cuda_host') of a pinned tensor share; { copy: true } copies into new pinned memory.
  t.is(pinned.pin().dataPointer, pinned.dataPointer)
  const copy = pinned.to('cuda_host', { copy: true })
  t.not(copy.dataPointer, pinned.dataPointer)
  t.deepEqual(Array.from(copy.data), [10, 20, 3, 4])
  t.is(String(copy.device), 'cuda_host:0')
  // toShared(): a copy into a SharedArrayBuffer (pinned memory is never V8's).
  const shared = pinned.toShared()
  t.is(String(shared.device), 'cpu')
  t.not(shared.dataPointer, pinned.dataPointer)
  t.deepEqual(Array.from(shared.data), [10, 20, 3, 4])
})

withCuda("__dlpack__({ dlDevice: [1, 0] }) exports pinned memory as kDLCPU, zero-copy (for CPU-only consumers)", (t) => {
  const pinned = Tensor.from(seq(4)).pin()
  const asCpu = peer!.consume(pinned.__dlpack__({ dlDevice: [1, 0] }))
  t.deepEqual(asCpu.device, [1, 0])
  t.is(asCpu.data, pinned.dataPointer, 'the same bytes, no copy')
  t.deepEqual(peer!.consume(pinned.__dlpack__({ dlDevice: [1, 0], copy: false })).device, [1, 0])
  t.deepEqual(peer!.consume(pinned.__dlpack__({ dlDevice: [3, 0] })).device, [3, 0])
  // copy: true: a private host copy, on the CPU.
  const copied = peer!.consume(pinned.__dlpack__({ dlDevice: [1, 0], copy: true }))
  t.deepEqual(copied.device, [1, 0])
  t.not(copied.data, pinned.dataPointer)
  // Back through fromDLPack: a CPU tensor over the same pinned bytes.
  const back = fromDLPack(pinned.__dlpack__({ dlDevice: [1, 0] }))
  t.is(String(back.device), 'cpu')
  t.is(back.dataPointer, pinned.dataPointer)
  t.deepEqual(back.toArray(), [0, 1, 2, 3])
  // Not device memory, and CPU memory is not pinned memory.
  throwsCode(t, () => pinned.__dlpack__({ dlDevice: [2, 0] }), 'ERR_DLPACK_DEVICE')
  throwsCode(t, () => Tensor.from(seq(2)).__dlpack__({ dlDevice: [3, 0] }), 'ERR_DLPACK_DEVICE')
  throwsCode(t, () => Tensor.from(seq(2)).__dlpack__({ dlDevice: [3, 0], copy: false }), 'ERR_DLPACK_COPY_REQUIRED')
})

// ---------------------------------------------------------------------------------------------
// Copies: host <-> pinned <-> CUDA, straight from and into the pinned memory

withCuda("host -> pinned: pin() and to('cuda_host') copy row-major (strided sources gathered)", (t) => {
  const host = Tensor.from(seq(12), [3, 4])
  const pinned = host.pin()
  t.is(String(pinned.device), 'cuda_host:0')
  t.not(pinned.dataPointer, host.dataPointer)
  t.deepEqual(pinned.toArray(), host.toArray())
  const strided = host.transpose(0, 1).to('cuda_host')
  t.true(strided.isContiguous)
  t.deepEqual(strided.toArray(), host.transpose(0, 1).toArray())
  // Pinned -> CPU: a copy into V8 memory.
  const back = strided.to('cpu')
  t.is(String(back.device), 'cpu')
  t.not(back.dataPointer, strided.dataPointer)
  t.deepEqual(back.toArray(), strided.toArray())
  // Zero elements and a 0-d tensor.
  t.deepEqual(Tensor.zeros([0], 'uint8').pin().shape, [0])
  t.deepEqual(Tensor.from(new Float64Array([2.5]), []).pin().toArray(), 2.5)
})

fakeOnly("pinned -> cuda: the driver reads the pinned memory itself, no staging copy; done when to() returns", async (t) => {
  const pinned = Tensor.from(seq(1024)).pin()
  control!.reset()
  const gpu = pinned.to('cuda:0')
  t.is(BigInt(control!.lastHostSource()), pinned.dataPointer, 'the DMA read the pinned tensor itself')
  t.is(control!.callCount('cuMemcpyHtoDAsync_v2'), 1)
  t.deepEqual(Array.from(gpu.to('cpu').data.subarray(0, 4)), [0, 1, 2, 3])
  // Deferred streams: the copy reads pinned memory when it runs, so to() waits for it before
  // returning: a write right after must not reach the device copy.
  await deferred(() => {
    const queued = pinned.to('cuda:0')
    pinned.copy_(Tensor.from(seq(1024, 5000)))
    t.deepEqual(Array.from(queued.to('cpu').data.subarray(0, 3)), [0, 1, 2], 'the device copy holds the values at the time of to()')
  })
  // Above the staging pipeline's threshold too: pinned memory is never staged (one DMA, from
  // the tensor itself), also when it comes back as a cpu tensor (exported as kDLCPU).
  const big = Tensor.zeros([1 << 20], 'uint8', { device: 'cuda_host' }) // 1 MiB
  const asCpu = fromDLPack(big.__dlpack__({ dlDevice: [1, 0] }))
  t.is(String(asCpu.device), 'cpu')
  for (const [what, source] of [['cuda_host', big], ['its kDLCPU export', asCpu]] as const) {
    control!.reset()
    const staged = native.cudaStagingStats().staged
    const up = source.to('cuda:0')
    t.is(native.cudaStagingStats().staged, staged, `${what}: not staged`)
    t.is(BigInt(control!.lastHostSource()), big.dataPointer, `${what}: the DMA read the pinned memory`)
    t.is(control!.callCount('cuMemcpyHtoDAsync_v2'), 1, `${what}: one copy, no staging chunks`)
    up.dispose()
  }
  // A strided pinned source above the threshold is gathered into the staging chunks (not into
  // a pageable copy first), and arrives right.
  const square = Tensor.zeros([1024, 1024], 'uint8', { device: 'cuda_host' })
  square.copy_(Tensor.from(Uint8Array.from({ length: 1 << 20 }, (_, i) => (i * 7) & 255), [1024, 1024]))
  const staged = native.cudaStagingStats().staged
  const transposed = square.transpose(0, 1).to('cuda:0')
  t.is(native.cudaStagingStats().staged, staged + 1, 'gathered into the staging chunks')
  t.deepEqual(transposed.to('cpu').toTypedArray(), square.transpose(0, 1).toTypedArray())
  // copy_ into an existing device tensor, also straight from the pinned memory.
  const dst = Tensor.empty([1024], 'float32', { device: 'cuda:0' })
  control!.reset()
  dst.copy_(pinned)
  t.is(BigInt(control!.lastHostSource()), pinned.dataPointer)
  t.deepEqual(Array.from(dst.to('cpu').data.subarray(0, 2)), [5000, 5001])
})

fakeOnly('cuda -> pinned: one DMA into the pinned memory, complete when the call returns', async (t) => {
  const gpu = Tensor.from(seq(256)).to('cuda:0')
  control!.reset()
  const pinned = await deferred(() => gpu.to('cuda_host'))
  t.is(String(pinned.device), 'cuda_host:0')
  t.is(BigInt(control!.lastHostDestination()), pinned.dataPointer, 'the DMA wrote the new pinned tensor itself')
  t.is(control!.callCount('cuMemcpyDtoHAsync_v2'), 1)
  t.deepEqual(Array.from(pinned.toTypedArray().subarray(0, 3)), [0, 1, 2], 'complete when to() returns (deferred streams)')
  // Into an existing pinned tensor: to('cuda_host', { out }) and copy_.
  const out = Tensor.zeros([256], 'float32', { device: 'cuda_host' })
  control!.reset()
  t.is(
    await deferred(() => gpu.to('cuda_host', { out })),
    out,
  )
  t.is(BigInt(control!.lastHostDestination()), out.dataPointer)
  t.deepEqual(Array.from(out.toTypedArray().subarray(250)), [250, 251, 252, 253, 254, 255])
  // A strided CUDA source keeps its strides, as to('cpu') does.
  const transposed = Tensor.from(seq(6), [2, 3]).to('cuda:0').transpose(0, 1)
  const pinnedT = transposed.to('cuda_host')
  t.deepEqual(pinnedT.strides, [1, 3])
  t.deepEqual(pinnedT.toArray(), [[0, 3], [1, 4], [2, 5]])
  // ... and into a contiguous pinned destination it is gathered.
  const gathered = Tensor.empty([3, 2], 'float32', { device: 'cuda_host' }).copy_(transposed)
  t.deepEqual(gathered.toArray(), [[0, 3], [1, 4], [2, 5]])
})

withCuda('copy_ checks apply to pinned destinations and sources, before anything is written', (t) => {
  const pinned = Tensor.zeros([2, 3], 'float32', { device: 'cuda_host' })
  throwsCode(t, () => pinned.copy_(Tensor.zeros([3, 2], 'float32')), 'ERR_DLPACK_SHAPE')
  throwsCode(t, () => pinned.copy_(Tensor.zeros([2, 3], 'int32', { device: 'cuda:0' })), 'ERR_DLPACK_DTYPE_MISMATCH')
  throwsCode(t, () => pinned.transpose(0, 1).copy_(Tensor.zeros([3, 2], 'float32')), 'ERR_DLPACK_NOT_CONTIGUOUS')
  throwsCode(t, () => pinned.copy_(pinned), 'ERR_DLPACK_INVALID_ARGUMENT', undefined, 'itself')
  throwsCode(t, () => Tensor.zeros([2, 3], 'float32').to('cuda:0', { out: pinned }), 'ERR_DLPACK_DEVICE', undefined, 'out on another device')
  t.deepEqual(Array.from(pinned.toTypedArray()), [0, 0, 0, 0, 0, 0])
  // Host <-> pinned copy_ is a host copy.
  t.deepEqual(pinned.copy_(Tensor.from(seq(6), [2, 3])).toArray(), [[0, 1, 2], [3, 4, 5]])
  t.deepEqual(Tensor.zeros([2, 3], 'float32').copy_(pinned).toArray(), [[0, 1, 2], [3, 4, 5]])
})

// ---------------------------------------------------------------------------------------------
// Another producer's pinned tensor (PyTorch's pin_memory() exports kDLCUDAHost): zero-copy

withCuda("a foreign kDLCUDAHost tensor imports zero-copy, uploads straight from it, and its deleter runs once", async (t) => {
  const bytes = 16
  const ptr = peer!.hostAlloc(bytes)
  const deleted = peer!.deleterCalls()
  const capsule = peer!.makeTensor({ ptr, shape: [4], device: [3, 0], host: true })
  const imported = fromDLPack(capsule, { dtype: 'float32' })
  if (electron) {
    // No external ArrayBuffers: host memory that is not V8's is copied into V8 memory on
    // import (docs/runtimes.md), and the producer released at once.
    t.true(imported.isCopy)
    t.is(String(imported.device), 'cpu')
    t.not(imported.dataPointer, ptr)
    t.is(peer!.deleterCalls(), deleted + 1)
    return
  } else {
    t.is(String(imported.device), 'cuda_host:0')
    t.is(imported.dataPointer, ptr, 'zero-copy: the producer memory')
    t.false(imported.isCopy)
    t.is(addressOf(imported.data), ptr)
    imported.data.set([1, 2, 3, 4])
  }
  if (fake) control!.reset()
  const gpu = imported.to('cuda:0')
  if (fake) t.is(BigInt(control!.lastHostSource()), ptr, "the upload read the producer's pinned memory")
  t.deepEqual(Array.from(gpu.to('cpu').data), [1, 2, 3, 4])
  imported.dispose()
  t.is(peer!.deleterCalls(), deleted + 1, 'the producer deleter ran once')
  if (fake) t.is(control!.liveHostAllocations(), (await pinnedCounts()).live)
})

// ---------------------------------------------------------------------------------------------
// Release paths: cuMemFreeHost exactly once per allocation, from any thread

fakeOnly('dispose, GC and shared views: each allocation is freed exactly once, when its last holder goes', async (t) => {
  await drainGarbage()
  const before = await pinnedCounts()
  const a = Tensor.zeros([64], 'float32', { device: 'cuda_host' })
  const view = a.slice(0, 8, 16)
  const data = viewOf(a)
  a.dispose()
  // dispose() empties the tensor's own JS view (as for any memory that is not V8's) ...
  if (data !== undefined) t.is(data.length, 0, '.data detached by dispose()')
  // ... but a tensor view of the same memory keeps it.
  t.is((await pinnedCounts()).frees, before.frees, 'a view still holds the memory')
  if (!electron) {
    view.data.fill(1) // still valid memory
    t.deepEqual(Array.from(view.data), [1, 1, 1, 1, 1, 1, 1, 1])
  }
  view.dispose()
  t.is((await pinnedCounts()).frees, before.frees + 1, 'freed with its last holder')
  // GC: tensors and views dropped without dispose().
  ;(() => {
    for (let i = 0; i < 5; i++) void viewOf(Tensor.empty([100], 'uint8', { device: 'cuda_host' }))
  })()
  await gcUntil(() => control!.liveHostAllocations() === before.live && native.cudaReleaseStats().pending === 0, 60)
  const after = await pinnedCounts()
  t.is(after.allocs - before.allocs, 6)
  t.is(after.frees - before.frees, 6, 'cuMemFreeHost once per allocation')
  t.is(after.live, before.live, 'nothing leaked')
  t.is(after.errors, before.errors, 'no release failure')
})

fakeOnly("a capsule keeps the memory after dispose until its consumer's deleter, on any thread", async (t) => {
  const before = await pinnedCounts()
  const pinned = Tensor.zeros([32], 'uint8', { device: 'cuda_host' })
  const capsule = pinned.__dlpack__()
  pinned.dispose()
  t.is((await pinnedCounts()).live, before.live + 1, 'the capsule holds it')
  // The consumer calls the deleter on a fresh thread with no current CUDA context.
  const released = peer!.releaseOnThread(capsule)
  t.is(released.before, 0n)
  t.is(released.after, 0n, 'the thread still has no context afterwards')
  const after = await pinnedCounts()
  t.is(after.frees - before.frees, 1)
  t.is(after.live, before.live)
  t.is(after.errors, before.errors)
  // A consumer reading on its own stream (DMA from the pinned memory) then deleting.
  const source = Tensor.from(seq(8)).pin()
  const stream = peer!.createStream()
  const read = await deferred(() => peer!.consume(source.__dlpack__({ stream }), { stream, read: true }))
  t.deepEqual(floats(read.bytes!), Array.from(seq(8)))
  peer!.destroyStream(stream)
  source.dispose()
  t.is((await pinnedCounts()).live, before.live)
})

fakeOnly("a Worker's pinned tensors are freed once when it ends; transfers are zero-copy", async (t) => {
  const before = await pinnedCounts()
  const script = new URL('../harness/workers/pinned-worker.mjs', import.meta.url)
  const run = (workerData: unknown) =>
    new Promise<{ pointers?: string[]; device?: string; pointer?: string }>((resolve, reject) => {
      const worker = new Worker(script, { workerData })
      let message: unknown
      worker.on('message', (m) => (message = m))
      worker.on('error', reject)
      worker.on('exit', () => resolve(message as never))
    })
  const left = await run({ mode: 'leave' })
  t.is(left.pointers?.length, 2)
  const after = await pinnedCounts()
  t.is(after.allocs - before.allocs, 4)
  t.is(after.frees - before.frees, 4, 'every pinned tensor of the Worker freed once, the unconsumed capsule too')
  t.is(after.live, before.live)
  t.is(after.errors, before.errors)
  // A pinned tensor sent to a Worker: the same memory there.
  const pinned = Tensor.zeros([4], 'float32', { device: 'cuda_host' })
  if (electron) return t.pass('Electron mode: the Worker cannot view the memory (see the Electron test)')
  const claimed = await run({ mode: 'claim', transfer: pinned.transfer() })
  t.is(claimed.device, 'cuda_host:0')
  t.is(claimed.pointer, String(pinned.dataPointer))
  t.deepEqual(Array.from(pinned.data), [7, 7, 7, 7], "the Worker's writes are seen here")
  pinned.dispose()
  t.is((await pinnedCounts()).live, before.live)
})

// ---------------------------------------------------------------------------------------------
// Faults: coded errors, nothing leaked

fakeOnly('cuMemHostAlloc failures throw ERR_CUDA naming the call; nothing is allocated or leaked', async (t) => {
  await drainGarbage()
  const before = await pinnedCounts()
  const storages = native.nativeStats().liveStorages
  const gpu = Tensor.from(seq(16)).to('cuda:0')
  for (const [what, make] of [
    ['empty', () => Tensor.empty([16], 'float32', { device: 'cuda_host' })],
    ['zeros', () => Tensor.zeros([16], 'float32', { device: 'cuda_host' })],
    ['pin()', () => Tensor.from(seq(16)).pin()],
    ["cuda to('cuda_host')", () => gpu.to('cuda_host')],
  ] as const) {
    control!.setFault('cuMemHostAlloc', 1, OUT_OF_MEMORY)
    const error = throwsCode(t, make, 'ERR_CUDA', CudaError, what)
    t.regex(error.message, /pinned host memory.*cuMemHostAlloc.*CUDA_ERROR_OUT_OF_MEMORY \(2\)/, what)
  }
  // A failed download into new pinned memory frees it again.
  control!.setFault('cuMemcpyDtoHAsync_v2', 1, UNKNOWN)
  throwsCode(t, () => gpu.to('cuda_host'), 'ERR_CUDA', CudaError, 'failed DMA')
  gpu.dispose()
  await drainGarbage()
  const after = await pinnedCounts()
  t.is(after.allocs - before.allocs, 5, 'four refused allocations and one that succeeded')
  t.is(after.frees - before.frees, 1, 'the one that succeeded is freed once')
  t.is(after.live, before.live)
  t.is(native.nativeStats().liveStorages, storages)
})

fakeOnly('a failing cuMemFreeHost is counted as a release error, not a crash', async (t) => {
  const before = await pinnedCounts()
  const pinned = Tensor.zeros([8], 'uint8', { device: 'cuda_host' })
  control!.setFault('cuMemFreeHost', 1, UNKNOWN)
  pinned.dispose()
  const after = await pinnedCounts()
  t.is(after.errors, before.errors + 1)
  t.is(after.frees - before.frees, 1, 'tried once, never twice')
  t.is(after.live, before.live + 1, 'the driver kept it (leaked, and counted)')
})

// ---------------------------------------------------------------------------------------------
// Electron mode: no external ArrayBuffers, so no JS view of pinned memory

withCuda('Electron mode: .data and getData refuse with ERR_DLPACK_COPY_REQUIRED; copies, exports and DMA work', (t) => {
  if (!electron) return t.pass('only with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1 (scripts/test.mjs runs it so)')
  const pinned = Tensor.from(seq(4)).pin()
  const refused = throwsCode(t, () => pinned.data, 'ERR_DLPACK_COPY_REQUIRED')
  t.regex(refused.message, /pinned.*toTypedArray.*copy_/)
  throwsCode(t, () => pinned.getData(), 'ERR_DLPACK_COPY_REQUIRED')
  throwsCode(t, () => pinned.getData({ offset: 1, length: 2 }), 'ERR_DLPACK_COPY_REQUIRED', undefined, 'a window would be a copy too')
  // Reading (a copy) and writing (copy_) work, and so do exports and the DMA.
  t.deepEqual(Array.from(pinned.toTypedArray()), [0, 1, 2, 3])
  pinned.copy_(Tensor.from(seq(4, 10)))
  t.deepEqual(pinned.toArray(), [10, 11, 12, 13])
  const consumed = peer!.consume(pinned.__dlpack__())
  t.is(consumed.data, pinned.dataPointer, 'exports stay zero-copy')
  t.deepEqual(consumed.device, [3, 0])
  // Our own pinned export comes back shared (still pinned), not copied into V8 memory.
  const again = fromDLPack(pinned.__dlpack__())
  t.is(again.dataPointer, pinned.dataPointer)
  t.is(String(again.device), 'cuda_host:0')
  t.false(again.isCopy)
  again.copy_(Tensor.from(seq(4, 20)))
  t.deepEqual(pinned.toArray(), [20, 21, 22, 23], 'writes through the import reach the original')
  pinned.copy_(Tensor.from(seq(4, 10)))
  t.deepEqual(pinned.to('cuda:0').to('cpu').toArray(), [10, 11, 12, 13])
  // toShared(): a copy into a SharedArrayBuffer, which Electron views like any V8 memory.
  const shared = pinned.toShared()
  t.is(String(shared.device), 'cpu')
  t.deepEqual(Array.from(shared.data), [10, 11, 12, 13])
})
