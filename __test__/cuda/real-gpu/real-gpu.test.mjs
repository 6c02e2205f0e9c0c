// The real-GPU suite: CUDA behaviour that only hardware can confirm (ordering against a busy
// stream, lifetime against a producer that reuses its memory, the caller's context, frees on
// foreign threads, pinned (cuda_host) memory, the pinned staging pipeline, the driver's pointer
// attributes, the toolkit's stub library).
//
// Run it on a machine with an NVIDIA GPU and driver, with target/fake-cuda OFF the library path:
//   NAPI_DLPACK_REAL_GPU=1 node --test __test__/cuda/real-gpu/real-gpu.test.mjs
// (`NAPI_DLPACK_REAL_GPU=1 npm test` runs it too.) Without NAPI_DLPACK_REAL_GPU every test is
// reported as skipped. It uses node's built-in test runner and plain JS, so it needs no
// node_modules: dist/, the addon and target/cuda-peer/cuda_peer.node (built from
// __test__/native/cuda-peer) are enough.
//
// Every test that could pass by luck has a negative control in the same test: the same
// scenario without the synchronisation (or the fix) under test must show the failure. A control
// that does not fail means the scenario cannot see the bug on this machine, and the test fails.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { before, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const require = createRequire(import.meta.url)
const real = Boolean(process.env.NAPI_DLPACK_REAL_GPU)
const skip = real ? false : 'needs a GPU: set NAPI_DLPACK_REAL_GPU=1 (see docs/cuda.md)'

/** How long a host function keeps a stream busy. */
const BUSY_MS = 400
/** Bytes moved by the ordering tests (64 MiB: a copy that takes a measurable time). */
const N = 64 << 20
const U8 = { code: 1, bits: 8, lanes: 1 }

let napi, native, p

before(() => {
  if (!real) return
  napi = require(join(root, 'dist', 'index.js'))
  native = require(join(root, 'dist', 'native.js')).native
  assert.ok(
    napi.cuda.isAvailable(),
    `NAPI_DLPACK_REAL_GPU is set but CUDA is unavailable: ${napi.cuda.unavailableReason()}`,
  )
  const peerPath = join(root, 'target', 'cuda-peer', 'cuda_peer.node')
  if (!existsSync(peerPath)) execFileSync('bash', [join(root, '__test__', 'native', 'cuda-peer', 'build.sh')], { stdio: 'inherit' })
  p = require(peerPath)
  assert.doesNotMatch(p.deviceName(0), /fake-cuda/, 'the fake CUDA driver is loaded: take target/fake-cuda off LD_LIBRARY_PATH')
})

/** 64 MiB (or `n` bytes) of a pattern that depends on `seed`. */
function pattern(seed, n = N) {
  const bytes = new Uint8Array(n)
  const words = new Uint32Array(bytes.buffer)
  for (let i = 0; i < words.length; i++) words[i] = (Math.imul(i, 2654435761) ^ seed) >>> 0
  return bytes
}

const same = (a, b) =>
  a.byteLength === b.byteLength &&
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))
const hostBytes = (tensor) => {
  const data = tensor.to('cpu').data
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function waitFor(cond, ms = 10000) {
  const deadline = Date.now() + ms
  while (!cond() && Date.now() < deadline) await sleep(1)
  return cond()
}

const settled = () => waitFor(() => native.cudaReleaseStats().pending === 0)

test('the GPU and its driver', { skip }, (t) => {
  const version = p.driverVersion()
  t.diagnostic(`device 0: ${p.deviceName(0)}; devices: ${napi.cuda.deviceCount()}; driver API version ${version}`)
  if (version >= 13000) t.diagnostic('a 13.x driver: result codes unknown to the 12.8 bindings can occur; ours are read as integers')
  assert.ok(napi.cuda.deviceCount() >= 1)
})

test('export ordering: a consumer on its own stream waits for our queued 64 MiB copy behind a busy stream', { skip }, (t) => {
  const expected = pattern(0x1234)
  const source = napi.Tensor.from(expected).to('cuda:0')
  native.cudaSynchronize(0)
  const consumer = p.createStream()
  try {
    p.busy(1n, BUSY_MS) // our stream (the legacy default stream) sleeps...
    const x = source.to('cuda:0', { copy: true }) // ...and our copy waits behind it
    let started = performance.now()
    const seen = p.consume(x.__dlpack__({ stream: consumer }), { stream: consumer, read: true })
    const waited = performance.now() - started
    t.diagnostic(`consumer stream: right bytes after ${waited.toFixed(0)} ms (busy ${BUSY_MS} ms)`)
    assert.ok(same(seen.bytes, expected), 'the consumer read our copy')
    assert.ok(waited >= BUSY_MS * 0.9, `the consumer waited for our stream (${waited.toFixed(0)} ms)`)

    // Negative control: stream -1n (no synchronisation) reads before our copy ran.
    p.busy(1n, BUSY_MS)
    const y = source.to('cuda:0', { copy: true })
    started = performance.now()
    const stale = p.consume(y.__dlpack__({ stream: -1n }), { stream: consumer, read: true })
    const early = performance.now() - started
    t.diagnostic(`control (-1n): ${same(stale.bytes, expected) ? 'right' : 'wrong'} bytes after ${early.toFixed(0)} ms`)
    assert.ok(!same(stale.bytes, expected), 'without the wait the consumer reads other bytes')
    assert.ok(early < BUSY_MS, 'without the wait the consumer does not wait')
    native.cudaSynchronize(0)
  } finally {
    p.destroyStream(consumer)
  }
})

test('import ordering: our stream waits for the consumer stream the producer synchronised to', { skip }, (t) => {
  const expected = pattern(0x5678)
  const producerStream = p.createStream()
  const consumerStream = p.createStream()
  const ptr = p.alloc(N)
  const source = p.alloc(N)
  try {
    p.upload(source, expected)
    /** A producer that wrote asynchronously on its own stream and syncs as DLPack says. */
    const producer = {
      __dlpack__(options) {
        const stream = options?.stream
        if (stream !== -1n && stream !== -1) p.syncStreams(producerStream, BigInt(stream ?? 1n))
        return p.makeTensor({ ptr, shape: [N], dtype: U8, owned: false })
      },
      __dlpack_device__: () => [2, 0],
    }
    p.scribble(ptr, N, producerStream, 0)
    p.busy(producerStream, BUSY_MS)
    p.copyAsync(ptr, source, N, producerStream) // the producer's write, behind its busy stream
    let started = performance.now()
    const imported = napi.fromDLPack(producer, { stream: consumerStream })
    const bytes = hostBytes(imported)
    const waited = performance.now() - started
    t.diagnostic(`our read: right bytes after ${waited.toFixed(0)} ms (busy ${BUSY_MS} ms)`)
    assert.ok(same(bytes, expected), 'our read saw the producer write')
    assert.ok(waited >= BUSY_MS * 0.9, `our stream waited (${waited.toFixed(0)} ms)`)
    imported.dispose()

    // Negative control: -1n, nobody synchronises, our read runs ahead of the write.
    p.syncStream(producerStream)
    p.scribble(ptr, N, producerStream, 0)
    p.syncStream(producerStream)
    p.busy(producerStream, BUSY_MS)
    p.copyAsync(ptr, source, N, producerStream)
    started = performance.now()
    const early = napi.fromDLPack(producer, { stream: -1n })
    const stale = hostBytes(early)
    const ahead = performance.now() - started
    t.diagnostic(`control (-1n): ${same(stale, expected) ? 'right' : 'wrong'} bytes after ${ahead.toFixed(0)} ms`)
    assert.ok(!same(stale, expected), 'without the waits our read sees other bytes')
    early.dispose()
    p.syncStream(producerStream)
  } finally {
    p.syncStream(producerStream)
    p.free(ptr)
    p.free(source)
    p.destroyStream(producerStream)
    p.destroyStream(consumerStream)
  }
})

test("import lifetime: a producer deleter that hands the block out again waits for our queued copy", { skip }, async (t) => {
  const expected = pattern(0x9abc)
  const producerStream = p.createStream()
  const ptr = p.alloc(N)
  try {
    p.upload(ptr, expected)
    const foreign = napi.fromDLPack(
      p.makeTensor({ ptr, shape: [N], dtype: U8, owned: false, scribble: { stream: producerStream, value: 0xee } }),
    )
    p.busy(1n, BUSY_MS) // our stream sleeps; the copy below waits behind it
    const copy = foreign.to('cuda:0', { copy: true })
    const deleted = p.deleterCalls()
    const started = performance.now()
    foreign.dispose() // the last holder: the deleter would scribble over the block at once
    assert.ok(await waitFor(() => p.deleterCalls() === deleted + 1), 'the deleter ran')
    const delay = performance.now() - started
    p.syncStream(producerStream)
    t.diagnostic(`deleter ran ${delay.toFixed(0)} ms after dispose (busy ${BUSY_MS} ms)`)
    assert.ok(same(hostBytes(copy), expected), 'the copy holds the producer data, not the scribble')
    assert.ok(delay >= BUSY_MS * 0.8, 'the deleter waited for our copy')
    let mark = performance.now()
    await settled()
    t.diagnostic(`release thread settled after ${(performance.now() - mark).toFixed(0)} ms`)

    // Negative control: the block reused while the copy is queued (what an immediate deleter
    // does) gives the scribble.
    p.upload(ptr, expected)
    const again = napi.fromDLPack(p.makeTensor({ ptr, shape: [N], dtype: U8, owned: false }))
    p.busy(1n, BUSY_MS)
    const raced = again.to('cuda:0', { copy: true })
    p.scribble(ptr, N, producerStream, 0xee)
    p.syncStream(producerStream)
    const bytes = hostBytes(raced)
    let scribbled = 0
    for (let i = 0; i < bytes.length; i++) scribbled += bytes[i] === 0xee ? 1 : 0
    t.diagnostic(`control: ${scribbled} of ${N} bytes scribbled`)
    assert.ok(!same(bytes, expected), 'the race is visible on this machine')
    mark = performance.now()
    again.dispose()
    await settled()
    t.diagnostic(`control: dispose + settle ${(performance.now() - mark).toFixed(0)} ms`)
    assert.equal(native.cudaReleaseStats().errors, 0)
  } finally {
    const steps = []
    let mark = performance.now()
    const step = (what, fn) => {
      fn()
      steps.push(`${what} ${(performance.now() - mark).toFixed(0)} ms`)
      mark = performance.now()
    }
    step('cudaSynchronize', () => native.cudaSynchronize(0))
    step('syncStream', () => p.syncStream(producerStream))
    step('free', () => p.free(ptr))
    step('destroyStream', () => p.destroyStream(producerStream))
    t.diagnostic(`clean-up: ${steps.join(', ')}`)
  }
})

test("context preservation: no context before our call, none after; another device's stays current", { skip }, async (t) => {
  const keeps = (what, fn) => {
    const before = p.currentContext()
    fn()
    assert.equal(p.currentContext(), before, what)
  }
  const run = () => {
    const host = napi.Tensor.from(new Float32Array([1, 2, 3, 4]))
    keeps('zeros', () => napi.Tensor.zeros([4], 'float32', { device: 'cuda:0' }))
    const x = host.to('cuda:0')
    keeps("to('cuda:0')", () => host.to('cuda:0'))
    keeps("to('cpu')", () => x.to('cpu'))
    keeps('device copy', () => x.to('cuda:0', { copy: true }))
    keeps('dispose', () => host.to('cuda:0').dispose())
    keeps('synchronize', () => native.cudaSynchronize(0))
  }
  p.setCurrentContext(null)
  assert.equal(p.currentContext(), 0n)
  run()
  assert.equal(p.currentContext(), 0n, 'still no context after all of it')
  const released = p.releaseOnThread(napi.Tensor.zeros([4], 'float32', { device: 'cuda:0' }).__dlpack__())
  assert.deepEqual(released, { before: 0n, after: 0n }, 'a deleter on a fresh thread leaves no context behind')
  if (napi.cuda.deviceCount() > 1) {
    p.setCurrentContext(1)
    const other = p.currentContext()
    run()
    assert.equal(p.currentContext(), other, "cuda:1's context is still current")
  } else {
    t.diagnostic('one GPU: the "another device\'s context stays current" half needs two and was not run')
  }
  // Negative control: a bind without restore (the peer's own alloc) is visible to the probe.
  p.setCurrentContext(null)
  p.free(p.alloc(16))
  assert.notEqual(p.currentContext(), 0n, 'the probe sees a context left current')
  p.setCurrentContext(null)
  await settled()
})

test('deleters on a thread with no current context free our memory, in a loop past the device memory', { skip }, async (t) => {
  const chunk = 1 << 30
  const { total } = p.memInfo(0)
  const rounds = Math.ceil(total / chunk) + 8
  const errors = native.cudaReleaseStats().errors
  for (let i = 0; i < rounds; i++) {
    const x = napi.Tensor.empty([chunk], 'uint8', { device: 'cuda:0' })
    const capsule = x.__dlpack__()
    x.dispose()
    const { before, after } = p.releaseOnThread(capsule)
    assert.equal(before, 0n)
    assert.equal(after, 0n)
  }
  await settled()
  assert.equal(native.cudaReleaseStats().errors, errors, 'no free failed')
  t.diagnostic(`${rounds} x 1 GiB allocated and released on fresh threads (device memory ${(total / 2 ** 30).toFixed(1)} GiB)`)

  // Negative control: the same allocations kept alive run out of memory within `rounds`.
  const held = []
  let failure
  for (let i = 0; i < rounds && !failure; i++) {
    try {
      const x = napi.Tensor.empty([chunk], 'uint8', { device: 'cuda:0' })
      held.push(x.__dlpack__())
      x.dispose()
    } catch (error) {
      failure = error
    }
  }
  t.diagnostic(`control: ${held.length} GiB held, then ${failure?.code}: ${failure?.message}`)
  for (const capsule of held) p.releaseOnThread(capsule)
  await settled()
  assert.ok(failure, 'keeping the allocations exhausts the device within the loop')
  assert.equal(failure.code, 'ERR_CUDA')
  assert.match(failure.message, /OUT_OF_MEMORY/)
  // And memory is back: one more large allocation works.
  napi.Tensor.empty([chunk], 'uint8', { device: 'cuda:0' }).dispose()
  // A synchronisation trims the device's memory pool (release threshold 0), so that the memory
  // our pool kept for reuse goes back to the device for other processes (the next test's child).
  native.cudaSynchronize(0)
})

test('a deleter called from a CUDA host function neither deadlocks nor leaks (1 GiB a round, past the device memory)', { skip }, (t) => {
  // In a child process: a deadlock must fail the test, not hang the suite. (Memory pooled by this
  // process is given back first: a synchronisation trims the pool.)
  native.cudaSynchronize(0)
  const script = `
    const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
    const { native } = require(${JSON.stringify(join(root, 'dist', 'native.js'))})
    const p = require(${JSON.stringify(join(root, 'target', 'cuda-peer', 'cuda_peer.node'))})
    const pause = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
    const chunk = 1 << 30
    const rounds = Math.ceil(p.memInfo(0).total / chunk) + 8
    const errors = native.cudaReleaseStats().errors
    const s = p.createStream()
    for (let i = 0; i < rounds; i++) {
      const x = Tensor.empty([chunk], 'uint8', { device: 'cuda:0' })
      const capsule = x.__dlpack__()
      x.dispose()
      p.releaseInHostFunc(capsule, s)
      const deadline = Date.now() + 10000
      while (p.hostFuncReleases() < i + 1 || native.cudaReleaseStats().pending > 0) {
        if (Date.now() > deadline) { console.log(JSON.stringify({ stuck: i })); process.exit(3) }
        pause(1)
      }
    }
    console.log(JSON.stringify({ rounds, errors: native.cudaReleaseStats().errors - errors }))
  `
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120000 })
  t.diagnostic(`child: status ${child.status} signal ${child.signal}; ${child.stdout.trim()} ${child.stderr.trim()}`)
  assert.equal(child.signal, null, 'no deadlock: the child finished before the timeout')
  assert.equal(child.status, 0, child.stderr)
  const result = JSON.parse(child.stdout.trim().split('\n').pop())
  assert.equal(result.errors, 0, 'no release failed')
  assert.ok(result.rounds > 0)
})

test('pointer attributes: plain and pinned host memory refused, our pool memory re-wrapped accepted, managed memory reported', { skip }, async (t) => {
  const refuses = (ptr, what) => {
    assert.throws(() => napi.fromDLPack(p.makeTensor({ ptr, shape: [4], owned: false })), { code: 'ERR_DLPACK_DEVICE' }, what)
  }
  const host = p.hostMalloc(64)
  refuses(host, 'plain host memory')
  p.hostMallocFree(host)
  const pinned = p.hostAlloc(64)
  refuses(pinned, 'pinned host memory')
  p.hostFree(pinned)
  // Our own allocation (from the device's memory pool), handed to us again by another producer.
  const x = napi.Tensor.from(new Float32Array([1, 2, 3, 4])).to('cuda:0')
  const rewrapped = napi.fromDLPack(p.makeTensor({ ptr: x.dataPointer, shape: [4], owned: false }))
  assert.equal(rewrapped.dataPointer, x.dataPointer)
  assert.deepEqual(Array.from(rewrapped.to('cpu').data), [1, 2, 3, 4])
  rewrapped.dispose()
  // Managed memory claiming kDLCUDA: whatever the driver says, it is reported, never a crash.
  const managed = p.allocManaged(16)
  p.upload(managed, new Float32Array([5, 6, 7, 8]))
  try {
    const imported = napi.fromDLPack(p.makeTensor({ ptr: managed, shape: [4], owned: false }))
    const values = Array.from(imported.to('cpu').data)
    t.diagnostic(`managed memory as kDLCUDA: accepted (the driver reports it as device memory), values ${values}`)
    assert.deepEqual(values, [5, 6, 7, 8])
    imported.dispose()
  } catch (error) {
    t.diagnostic(`managed memory as kDLCUDA: refused, ${error.code}: ${error.message}`)
    assert.equal(error.code, 'ERR_DLPACK_DEVICE')
  }
  await settled()
  p.free(managed)
})

test('host -> device copy from pageable memory while our stream is busy: right data; whether the call blocked is reported', { skip }, (t) => {
  const expected = pattern(0x4242)
  p.busy(1n, BUSY_MS)
  const started = performance.now()
  const x = napi.Tensor.from(expected).to('cuda:0')
  const call = performance.now() - started
  t.diagnostic(`to('cuda:0') of 64 MiB pageable memory returned after ${call.toFixed(0)} ms with the stream busy for ${BUSY_MS} ms: ${call >= BUSY_MS * 0.9 ? 'it waited for the stream (a host synchronisation)' : 'it did not wait'}`)
  assert.ok(same(hostBytes(x), expected))
})

test('1 GiB through the pinned staging pipeline with our stream busy arrives intact, both ways; a transposed 256 MiB too', { skip }, (t) => {
  // The pipeline's chunk waits are what keep a piece from being overwritten before its DMA ran
  // (up) or read before it landed (down); with the stream busy, every DMA is queued behind the
  // sleep while the CPU goes on. The negative control of a missing wait is the fake driver's
  // (mutants staging-upload-skips-chunk-wait / staging-download-reads-before-wait): a build
  // without the waits cannot be made from JS.
  const GiB = 1 << 30
  const expected = pattern(0x5157, GiB)
  const before = native.cudaStagingStats()
  p.busy(1n, BUSY_MS)
  let started = performance.now()
  const x = napi.Tensor.from(expected).to('cuda:0')
  const up = performance.now() - started
  const out = napi.Tensor.zeros([GiB], 'uint8')
  p.busy(1n, BUSY_MS)
  started = performance.now()
  x.to('cpu', { out })
  const down = performance.now() - started
  t.diagnostic(`1 GiB with the stream busy ${BUSY_MS} ms: up ${up.toFixed(0)} ms, down ${down.toFixed(0)} ms`)
  assert.ok(same(out.data, expected), '1 GiB up and down intact')
  const after = native.cudaStagingStats()
  assert.equal(after.staged - before.staged, 2, 'both went through the pipeline')
  assert.equal(after.fallbacks, before.fallbacks)
  // Idle stream: the figures (bench:gpu measures them properly).
  started = performance.now()
  const y = napi.Tensor.from(expected).to('cuda:0')
  native.cudaSynchronize(0)
  const upIdle = performance.now() - started
  started = performance.now()
  y.to('cpu', { out })
  const downIdle = performance.now() - started
  t.diagnostic(`1 GiB, idle stream: up ${(GiB / upIdle / 1e6).toFixed(2)} GB/s, down into existing memory ${(GiB / downIdle / 1e6).toFixed(2)} GB/s`)
  assert.ok(same(out.data, expected))
  x.dispose()
  y.dispose()
  // A transposed source, gathered straight into the chunks, behind a busy stream.
  const side = 16384
  const square = napi.Tensor.from(pattern(0x7e57, side * side), [side, side]).transpose(0, 1)
  const wanted = square.contiguous()
  p.busy(1n, BUSY_MS)
  started = performance.now()
  const z = square.to('cuda:0')
  t.diagnostic(`transposed 256 MiB up with the stream busy: ${(performance.now() - started).toFixed(0)} ms`)
  assert.ok(same(hostBytes(z), wanted.data), 'the transposed 256 MiB intact')
  z.dispose()
})

/**
 * What the driver says `ptr` is, through our import check (cuPointerGetAttributes): the address
 * claimed as kDLCUDA device memory is refused with a message naming what the driver found.
 */
function driverKnows(ptr) {
  try {
    napi.fromDLPack(p.makeTensor({ ptr, shape: [4], dtype: U8, owned: false })).dispose()
    return 'device memory'
  } catch (error) {
    assert.equal(error.code, 'ERR_DLPACK_DEVICE', error.message)
    if (/CUDA host \(pinned\) memory/.test(error.message)) return 'pinned'
    if (/does not know/.test(error.message)) return 'unknown'
    return error.message
  }
}

test('pinned (cuda_host) deleters on a thread with no current context: cuMemFreeHost really frees, the thread keeps no context', { skip }, async (t) => {
  const chunk = 256 << 20
  const rounds = 8
  const errors = native.cudaReleaseStats().errors
  for (let i = 0; i < rounds; i++) {
    const x = napi.Tensor.empty([chunk], 'uint8', { device: 'cuda_host' })
    const address = x.dataPointer
    assert.equal(driverKnows(address), 'pinned', 'control: a live pinned tensor is pinned memory to the driver')
    x.data[chunk - 1] = 1 // host-writable
    const capsule = x.__dlpack__()
    x.dispose()
    assert.equal(driverKnows(address), 'pinned', 'the unconsumed capsule keeps it')
    const { before, after } = p.releaseOnThread(capsule)
    assert.equal(before, 0n)
    assert.equal(after, 0n, 'the deleter leaves the fresh thread without a context')
    assert.ok(await settled(), 'the release thread freed it')
    assert.equal(driverKnows(address), 'unknown', 'cuMemFreeHost ran: the driver no longer knows the address')
  }
  assert.equal(native.cudaReleaseStats().errors, errors, 'no free failed')
  t.diagnostic(`${rounds} x 256 MiB of pinned memory allocated and released from fresh threads`)
})

test('a cuda_host tensor is ordered: downloads into it are complete, uploads out of it done, before the call returns; a consumer stream then reads it', { skip }, async (t) => {
  const expected = pattern(0x7777)
  const gpu = napi.Tensor.from(expected).to('cuda:0')
  native.cudaSynchronize(0)
  const consumer = p.createStream()
  const dev = p.alloc(N)
  try {
    // Download into new pinned memory, queued behind our busy stream: to() waits for it.
    p.busy(1n, BUSY_MS)
    let started = performance.now()
    const pinned = gpu.to('cuda_host')
    const waited = performance.now() - started
    t.diagnostic(`to('cuda_host') of 64 MiB returned after ${waited.toFixed(0)} ms (stream busy ${BUSY_MS} ms)`)
    assert.ok(waited >= BUSY_MS * 0.9, 'the download waited for our stream')
    const view = pinned.data
    assert.ok(same(view, expected), 'the pinned bytes are complete when to() returns')
    // A consumer on its own stream: the export asks for no wait (nothing of ours is pending on
    // pinned memory) and its DMA out of the pinned memory reads our bytes.
    const seen = p.consume(pinned.__dlpack__({ stream: consumer }))
    assert.deepEqual(seen.device, [3, 0])
    assert.equal(seen.data, pinned.dataPointer)
    p.uploadAsync(dev, view, consumer) // cuMemcpyHtoDAsync from the pinned address
    assert.ok(same(p.download(dev, N, consumer), expected), "the consumer's DMA read our bytes")

    // Upload out of pinned memory behind our busy stream: to() returns once the DMA ran, so the
    // host may overwrite the pinned memory at once.
    p.busy(1n, BUSY_MS)
    started = performance.now()
    const uploaded = pinned.to('cuda:0')
    const uploadCall = performance.now() - started
    view.fill(0)
    t.diagnostic(`to('cuda:0') from 64 MiB pinned returned after ${uploadCall.toFixed(0)} ms (stream busy ${BUSY_MS} ms)`)
    assert.ok(same(hostBytes(uploaded), expected), 'the upload holds the bytes of the time of the call')

    // Negative control: the same DMA out of pinned memory queued behind a busy stream and NOT
    // waited for reads what the host wrote afterwards (the race our wait closes is real).
    view.set(expected)
    p.busy(consumer, BUSY_MS)
    p.uploadAsync(dev, view, consumer)
    view.fill(0)
    const raced = p.download(dev, N, consumer)
    t.diagnostic(`control: ${same(raced, expected) ? 'right' : 'overwritten'} bytes when the upload was not waited for`)
    assert.ok(!same(raced, expected), 'without the wait the device gets the later host writes')
    pinned.dispose()
    uploaded.dispose()
    assert.ok(await settled())
  } finally {
    p.syncStream(consumer)
    p.free(dev)
    p.destroyStream(consumer)
  }
})

test('a stub libcuda.so first on the library path: CUDA unavailable with STUB_LIBRARY, no crash', { skip }, (t) => {
  const candidates = [
    process.env.CUDA_HOME && join(process.env.CUDA_HOME, 'lib64', 'stubs'),
    '/usr/local/cuda/lib64/stubs',
    '/usr/local/cuda/targets/x86_64-linux/lib/stubs',
  ].filter(Boolean)
  const stubs = candidates.find((dir) => existsSync(join(dir, 'libcuda.so')))
  if (!stubs) return t.skip(`no stub libcuda.so in ${candidates.join(', ')}`)
  const script = `const m = require(${JSON.stringify(join(root, 'dist', 'index.js'))});
    console.log(JSON.stringify({ available: m.cuda.isAvailable(), reason: m.cuda.unavailableReason() ?? null }))`
  const run = (libraryPath) => {
    const child = spawnSync(process.execPath, ['-e', script], {
      env: { ...process.env, LD_LIBRARY_PATH: libraryPath },
      encoding: 'utf8',
    })
    assert.equal(child.status, 0, `the process survived: ${child.stderr}`)
    return JSON.parse(child.stdout)
  }
  const stub = run([stubs, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':'))
  t.diagnostic(`with ${stubs}: ${JSON.stringify(stub)}`)
  assert.equal(stub.available, false)
  assert.match(stub.reason, /CUDA_ERROR_STUB_LIBRARY \(34\)/)
  // Control: the same process without the stub directory finds the driver.
  const driver = run(process.env.LD_LIBRARY_PATH ?? '')
  assert.equal(driver.available, true, `without the stubs: ${JSON.stringify(driver)}`)
})
