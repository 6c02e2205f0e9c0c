// Lifetime and release of device memory: a producer's deleter runs only after our queued
// copies of its memory, before the process or a Worker ends, from threads with no current
// context and from CUDA host functions; the caller's current context is kept; Worker
// transfers; drops that bind the context; driver result codes and a stub libcuda.
//
// Runs in the settings of scripts/test.mjs (the fake driver, a real GPU, no driver, a driver
// without devices; see __test__/harness/fake-cuda.ts and setting.spec.ts, which checks that the
// setting is the one NAPI_DLPACK_CUDA_EXPECT names).
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test from 'ava'

import { native } from '../../dist/native.js'
import { cuda, CudaError, fromDLPack, Tensor } from '../../dist/index.js'
import { available, control, fakeLoaded, peer, UNKNOWN, bytesOf, deferred, releaseStats, waitFor, settled } from '../harness/fake-cuda.js'
import { drainGarbage, gcUntil, throwsCode } from '../harness/helpers.js'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
/** The loaded libcuda is the fake, with a device (see __test__/harness/fake-cuda.ts). */
const fake = available && fakeLoaded
const fakeOnly = fake ? test.serial : test.serial.skip

/** The elements of a (number-valued) tensor, copied to the host. */
const values = (tensor: Tensor) => Array.from(tensor.to('cpu').data as ArrayLike<number>)

// Registered (as skipped) without a usable driver too: a spec without tests fails in ava.
const withDriver = available ? test.serial : test.serial.skip
const p = peer!
const devices = available ? cuda.deviceCount() : 0

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

withDriver("the caller's current context is kept: none stays none, another device's stays current", async (t) => {
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

withDriver('deleters on a thread with no current context free our memory (the loop would exhaust a small device otherwise)', async (t) => {
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

withDriver('a CUDA tensor goes to a Worker by transfer token: same device pointer, read there, freed once by the last holder on either thread', async (t) => {
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

withDriver('a deleter called from a CUDA host function (where driver calls are not permitted) neither deadlocks nor leaks', async (t) => {
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
