// The pinned staging pipeline (issue 27, item 2): copies between ordinary (pageable) host
// memory and a CUDA device of at least `minBytes` go through two page-locked chunks per device,
// the CPU copy (or strided gather) of one piece overlapping the DMA of the other, ordered by one
// event per chunk. Checked here against the fake CUDA driver (a test double): the event records
// and waits per chunk, data through the fake's deferred streams (where a missing wait gives
// stale or overwritten bytes), sizes around the chunk and piece boundaries, every dtype, strided
// and negative-stride sources, byte offsets, fault injection, the pool's release, and the
// Electron mode (NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1, run by scripts/test.mjs).
//
// Runs where the CUDA suite runs (scripts/test.mjs: the fake with 2 devices, without memory
// pools, in Electron mode; on a GPU; without a driver). What needs the fake's control API is
// skipped elsewhere; the data checks also run on a GPU.
import { execFileSync } from 'node:child_process'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

import test from 'ava'

import { Tensor, cuda } from '../../dist/index.js'
import { native } from '../../dist/native.js'
import { ILLEGAL_ADDRESS, OUT_OF_MEMORY, UNKNOWN, available, bytesOf, control, deferred as inDeferredMode, fakeLoaded, settled } from '../harness/fake-cuda.js'
import { drainGarbage, nativeFixture, random, throwsCode } from '../harness/helpers.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const controlPath = join(root, 'target', 'fake-cuda', 'control.node')
const fake = available && fakeLoaded
const devices = available ? cuda.deviceCount() : 0

const withCuda = available ? test.serial : test.serial.skip
const fakeOnly = fake ? test.serial : test.serial.skip

const stats = () => native.cudaStagingStats()
const { chunkBytes: CHUNK, minBytes: MIN, minPieceBytes: MIN_PIECE } = stats()
const KiB = 1024
const MiB = 1024 * KiB

/** Bytes whose every 64 KiB block differs, so that a piece landing in the wrong place shows. */
function pattern(length: number, seed: number): Uint8Array {
  const next = random(seed)
  const block = Uint8Array.from({ length: 65536 }, () => Math.floor(next() * 256))
  const out = new Uint8Array(length)
  for (let i = 0; i < length; i++) out[i] = block[i & 0xffff]! ^ ((Math.imul(i >>> 16, 151) + seed) & 0xff)
  return out
}

const same = (a: ArrayBufferView, b: ArrayBufferView) => Buffer.compare(Buffer.from(bytesOf(a)), Buffer.from(bytesOf(b))) === 0

/** The pieces a staged copy of `length` bytes (rows of `unit` bytes) is cut into. */
function pieces(length: number, unit = 1): number {
  const target = Math.min(Math.max(Math.floor(length / 4), MIN_PIECE), CHUNK)
  const even = Math.ceil(length / Math.max(1, Math.ceil(length / target)))
  let piece = Math.ceil(even / unit) * unit
  if (piece > CHUNK) piece = Math.max(unit, Math.floor(CHUNK / unit) * unit)
  return Math.ceil(length / piece)
}

/** Runs `fn` in the fake's deferred mode (streams run only when something waits for them); on a GPU, as is. */
const deferred = <T>(fn: () => T | Promise<T>): Promise<T> => (fake ? inDeferredMode(fn) : Promise.resolve().then(fn))

/** Nothing queued anywhere: garbage collected, streams synchronised, the release thread idle. */
async function quiet() {
  await drainGarbage()
  native.cudaSynchronize(0)
  await settled()
}

/** A fresh, idle pool on the next staged copy (none in flight: exact counts). */
async function freshPool() {
  await quiet()
  cuda.releaseStaging()
  await quiet() // pinned memory is freed on the release thread
}

test.after.always(() => {
  if (available) cuda.releaseStaging()
})

// ---------------------------------------------------------------------------------------------
// Sizes

withCuda('round trips arrive intact at and around the piece and chunk sizes, 0 and 1 bytes included', async (t) => {
  const sizes = [0, 1, MIN - 1, MIN, MIN + 1, MIN_PIECE * 2 + 3, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 1, 3 * CHUNK - 1, 5 * CHUNK + 3]
  for (const size of sizes) {
    const source = pattern(size, size & 0xff)
    await deferred(() => {
      const staged = stats().staged
      const host = Tensor.from(source)
      const device = host.to('cuda:0')
      t.is(stats().staged - staged, size >= MIN ? 1 : 0, `${size}: H2D staged only from ${MIN} bytes`)
      if (fake && size > 0) {
        const from = BigInt(control!.lastHostSource())
        if (size >= MIN) t.not(from, host.dataPointer, `${size}: the DMA read a chunk`)
        else t.is(from, host.dataPointer, `${size}: below the threshold, straight from the tensor`)
      }
      const back = device.to('cpu')
      t.is(stats().staged - staged, size >= MIN ? 2 : 0, `${size}: D2H staged`)
      t.true(same(back.data, source), `${size} bytes: H2D then D2H`)
      // Into existing tensors both ways.
      const onDevice = Tensor.empty([size], 'uint8', { device: 'cuda:0' })
      onDevice.copy_(Tensor.from(source))
      const out = Tensor.zeros([size], 'uint8')
      t.is(onDevice.to('cpu', { out }), out)
      t.true(same(out.data, source), `${size} bytes: copy_ then to({ out })`)
      for (const tensor of [host, device, back, onDevice, out]) tensor.dispose()
    })
  }
})

fakeOnly('one event record per piece; the host waits only for a chunk it is about to reuse', async (t) => {
  for (const size of [MIN, 1 * MiB, 5 * CHUNK + 3]) {
    const expected = pieces(size)
    const host = Tensor.from(pattern(size, 3))
    await freshPool()
    await deferred(() => {
      control!.reset()
      control!.setDeferred(true)
      const device = host.to('cuda:0')
      t.is(control!.callCount('cuMemcpyHtoDAsync_v2'), expected, `${size}: H2D pieces`)
      t.is(control!.callCount('cuEventRecord'), expected, `${size}: one record per piece`)
      t.is(control!.callCount('cuEventSynchronize'), Math.max(0, expected - 2), `${size}: a wait per reused chunk`)
      t.is(control!.callCount('cuStreamSynchronize'), 0, `${size}: no stream synchronisation`)
      t.is(control!.hostSyncs(), Math.max(0, expected - 2), `${size}: no other host sync`)
      t.is(control!.callCount('cuMemHostAlloc'), 2, 'two chunks, once')
      t.true(control!.pendingOps() > 0, 'the last pieces are still queued when to() returns')
      // Down: every piece waited for (the call completes), no stream synchronisation.
      control!.reset()
      control!.setDeferred(true)
      const back = device.to('cpu')
      t.is(control!.callCount('cuMemcpyDtoHAsync_v2'), expected, `${size}: D2H pieces`)
      t.is(control!.callCount('cuEventRecord'), expected)
      t.is(control!.callCount('cuEventSynchronize'), expected, `${size}: each piece waited for before it is read`)
      t.is(control!.callCount('cuStreamSynchronize'), 0)
      t.is(control!.callCount('cuMemHostAlloc'), 0, 'the chunks are reused across calls')
      t.true(same(back.data, host.data))
      device.dispose()
      back.dispose()
    })
    host.dispose()
  }
})

// ---------------------------------------------------------------------------------------------
// Strided sources: gathered straight into the chunks

withCuda('every dtype: a transposed source is gathered into the chunks and arrives in row-major order', async (t) => {
  for (const dtype of native.dtypeNames()) {
    const itemsize = Tensor.zeros([1], dtype).nbytes
    const [rows, cols] = [520, 513]
    const bytes = pattern(rows * cols * itemsize, itemsize)
    if (dtype === 'bool') bytes.forEach((byte, i) => (bytes[i] = byte & 1))
    const strided = Tensor.from(bytes, [rows, cols], { dtype }).transpose(0, 1)
    const expected = strided.contiguous()
    await deferred(() => {
      const staged = stats().staged
      const device = strided.to('cuda:0')
      t.is(stats().staged - staged, 1, `${dtype}: staged`)
      t.true(same(device.to('cpu').data, expected.data), dtype)
      device.dispose()
    })
  }
})

withCuda('strided sources: negative strides, runs across outer indices, byte offsets, 1-D steps', async (t) => {
  const base = pattern(3 * MiB + 7, 11)
  const cases: [string, () => Tensor][] = [
    // Runs of rows that cross an index of the outer axis (100 rows of 3000 bytes per index).
    ['permuted 3-D', () => Tensor.from(base.subarray(0, 5 * 3000 * 100), [5, 3000, 100]).permute(0, 2, 1)],
    ['reversed rows and columns', () => Tensor.from(base.subarray(0, 1024 * 1024), [1024, 1024]).slice(0, null, null, -1).slice(1, null, null, -1)],
    ['reversed 1-D float32', () => Tensor.from(new Float32Array(base.buffer, 0, 300_000)).slice(0, null, null, -1)],
    ['every third int16', () => Tensor.from(new Int16Array(base.buffer.slice(7), 0, 600_000)).slice(0, 1, null, 3)],
    ['a column block of a wide matrix', () => Tensor.from(base.subarray(3, 3 + 2048 * 1536), [2048, 1536]).slice(1, 100, 1300)],
    ['transposed float64 with an element offset', () => Tensor.from(new Float64Array(base.buffer, 8, 200_000), [400, 500]).slice(0, 1).transpose(0, 1)],
  ]
  for (const [name, make] of cases) {
    const strided = make()
    t.false(strided.isContiguous, name)
    t.true(strided.nbytes >= MIN, `${name}: large enough to stage`)
    const expected = strided.contiguous()
    await deferred(() => {
      const staged = stats().staged
      const device = strided.to('cuda:0')
      t.is(stats().staged - staged, 1, `${name}: staged`)
      t.true(same(device.to('cpu').data, expected.data), name)
      // Into an existing tensor as well.
      const into = Tensor.empty(strided.shape, strided.dtype, { device: 'cuda:0' })
      into.copy_(strided)
      t.true(same(into.to('cpu').data, expected.data), `${name}: copy_`)
      device.dispose()
      into.dispose()
    })
  }
})

withCuda('contiguous sources and destinations at byte offsets', async (t) => {
  const buffer = pattern(2 * MiB + 64, 5).buffer
  const source = Tensor.from(new Uint8Array(buffer, 3, 2 * MiB))
  await deferred(() => {
    const device = source.to('cuda:0')
    const out = Tensor.from(new Uint8Array(new ArrayBuffer(2 * MiB + 16), 5, 2 * MiB))
    device.to('cpu', { out })
    t.true(same(out.data, source.data))
    device.dispose()
  })
})

withCuda('a strided device source downloads its span through the chunks', async (t) => {
  const host = Tensor.from(pattern(1024 * 1024, 9), [1024, 1024])
  const device = host.to('cuda:0')
  await deferred(() => {
    const staged = stats().staged
    const expected = host.transpose(0, 1).contiguous()
    const back = device.transpose(0, 1).to('cpu')
    t.is(stats().staged - staged, 1)
    t.deepEqual(back.strides, [1, 1024], 'strides kept')
    t.true(same(back.contiguous().data, expected.data))
    const into = Tensor.zeros([1024, 1024], 'uint8')
    into.copy_(device.transpose(0, 1))
    t.is(stats().staged - staged, 2)
    t.true(same(into.data, expected.data))
  })
  device.dispose()
})

withCuda('across devices: down through one device pool, up through the other', async (t) => {
  if (devices < 2) return t.pass('one device')
  const host = Tensor.from(pattern(3 * MiB, 13))
  await deferred(() => {
    const first = host.to('cuda:0')
    const second = first.to('cuda:1')
    t.true(same(second.to('cpu').data, host.data))
    const into = Tensor.empty([3 * MiB], 'uint8', { device: 'cuda:1' })
    first.to('cuda:1', { out: into })
    t.true(same(into.to('cpu').data, host.data))
    for (const tensor of [first, second, into]) tensor.dispose()
  })
})

withCuda('staged copies land in ordinary JS memory (the Electron mode included)', async (t) => {
  const host = Tensor.from(pattern(2 * MiB, 17))
  const device = host.to('cuda:0')
  if (fake) control!.reset()
  const back = device.to('cpu')
  t.true(back.data.buffer instanceof ArrayBuffer)
  if (fake) t.not(BigInt(control!.lastHostDestination()), back.dataPointer, 'the DMA wrote a chunk, then the CPU copied it out')
  t.true(same(back.data, host.data))
  device.dispose()
})

// ---------------------------------------------------------------------------------------------
// Faults

fakeOnly('no pinned memory: the copy takes the direct path, leaks nothing, and the device tries again after a release', async (t) => {
  await freshPool()
  const hostBefore = control!.liveHostAllocations()
  const source = pattern(2 * MiB, 19)
  for (const nth of [1, 2]) {
    await freshPool()
    control!.setFault('cuMemHostAlloc', nth, OUT_OF_MEMORY)
    const before = stats()
    const device = Tensor.from(source).to('cuda:0')
    t.is(stats().fallbacks - before.fallbacks, 1, `chunk ${nth} failing: the direct path`)
    t.is(stats().staged, before.staged)
    await quiet() // pinned memory is freed on the release thread
    t.is(control!.liveHostAllocations(), hostBefore, `chunk ${nth} failing: the first chunk was freed`)
    t.is(stats().chunks, 0)
    // The device does not try again until the pool is released.
    control!.reset()
    t.true(same(device.to('cpu').data, source))
    t.is(control!.callCount('cuMemHostAlloc'), 0, 'no retry on every copy')
    device.dispose()
  }
  cuda.releaseStaging()
  const staged = stats().staged
  Tensor.from(source).to('cuda:0').dispose()
  t.is(stats().staged - staged, 1, 'staged again after the release')
  t.is(stats().chunks, 2)
})

fakeOnly('a copy failing mid-pipeline throws ERR_CUDA, frees the new tensor, and the pool stays usable', async (t) => {
  const source = pattern(5 * CHUNK, 23)
  await freshPool()
  Tensor.from(source).to('cuda:0').dispose()
  await quiet()
  const live = control!.liveAllocations()
  const hostLive = control!.liveHostAllocations()
  const faults: [string, number, number][] = [
    ['cuMemcpyHtoDAsync_v2', 3, UNKNOWN],
    ['cuEventRecord', 2, UNKNOWN],
    ['cuEventSynchronize', 1, ILLEGAL_ADDRESS],
  ]
  for (const [name, nth, code] of faults) {
    await deferred(() => {
      control!.setFault(name, nth, code)
      throwsCode(t, () => Tensor.from(source).to('cuda:0'), 'ERR_CUDA', undefined, `${name} #${nth}: to()`)
      const dst = Tensor.zeros([5 * CHUNK], 'uint8', { device: 'cuda:0' })
      control!.setFault(name, nth, code)
      throwsCode(t, () => dst.copy_(Tensor.from(source)), 'ERR_CUDA', undefined, `${name} #${nth}: copy_`)
      // The next copy, in deferred mode, is right: no chunk was left in flight unawares.
      dst.copy_(Tensor.from(source))
      t.true(same(dst.to('cpu').data, source), `${name} #${nth}: the next copy`)
      dst.dispose()
    })
  }
  for (const [name, nth, code] of [
    ['cuMemcpyDtoHAsync_v2', 2, UNKNOWN],
    ['cuMemcpyDtoHAsync_v2', 4, UNKNOWN],
    ['cuEventSynchronize', 2, ILLEGAL_ADDRESS],
  ] as const) {
    const device = Tensor.from(source).to('cuda:0')
    await deferred(() => {
      control!.setFault(name, nth, code)
      throwsCode(t, () => device.to('cpu'), 'ERR_CUDA', undefined, `${name} #${nth}: to('cpu')`)
      const out = Tensor.zeros([5 * CHUNK], 'uint8')
      control!.setFault(name, nth, code)
      throwsCode(t, () => device.to('cpu', { out }), 'ERR_CUDA', undefined, `${name} #${nth}: to({ out })`)
      t.true(same(device.to('cpu').data, source), `${name} #${nth}: the next copy`)
    })
    device.dispose()
  }
  await quiet()
  t.is(control!.liveAllocations(), live, 'no device memory leaked')
  t.is(control!.liveHostAllocations(), hostLive, 'the pool kept its chunks')
  t.is(stats().chunks, 2)
})

fakeOnly('when even the recovery fails, the pool is freed and the next copy makes a new one', async (t) => {
  const source = pattern(3 * CHUNK, 29)
  await freshPool()
  Tensor.from(source).to('cuda:0').dispose()
  await quiet()
  const hostLive = control!.liveHostAllocations()
  control!.setFault('cuMemcpyHtoDAsync_v2', 2, UNKNOWN)
  control!.setFault('cuStreamSynchronize', 1, UNKNOWN)
  throwsCode(t, () => Tensor.from(source).to('cuda:0'), 'ERR_CUDA')
  t.is(stats().chunks, 0, 'dropped')
  await quiet()
  t.is(control!.liveHostAllocations(), hostLive - 2, 'and freed')
  control!.reset()
  await deferred(() => {
    const device = Tensor.from(source).to('cuda:0')
    t.is(control!.callCount('cuMemHostAlloc'), 2, 'a new pool')
    t.true(same(device.to('cpu').data, source))
    device.dispose()
  })
})

// ---------------------------------------------------------------------------------------------
// The pool's lifetime

fakeOnly('releaseStaging() frees the chunks and their events after the DMAs still reading them', async (t) => {
  await freshPool()
  control!.reset()
  const hostLive = control!.liveHostAllocations()
  const events = control!.liveEvents()
  const source = pattern(3 * CHUNK, 31)
  await deferred(async () => {
    const device = Tensor.from(source).to('cuda:0')
    t.is(control!.liveHostAllocations(), hostLive + 2)
    t.is(control!.liveEvents(), events + 2)
    const pending = control!.pendingOps()
    t.true(pending > 0, 'the last pieces are still queued, reading the chunks')
    cuda.releaseStaging()
    t.true(control!.pendingOps() < pending, 'the release waited for them')
    t.is(control!.liveEvents(), events)
    t.is(stats().chunks, 0)
    await quiet() // pinned memory is freed on the release thread
    t.is(control!.liveHostAllocations(), hostLive)
    t.is(control!.callCount('cuMemFreeHost'), 2)
    t.true(same(device.to('cpu').data, source))
    device.dispose()
  })
})

fakeOnly('the pool goes with the last environment that made a staged copy', async (t) => {
  // A fresh process: the environments here (ava's worker) are users already.
  const script = `
    const { Worker } = require('node:worker_threads')
    const { cuda } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
    const { native } = require(${JSON.stringify(join(root, 'dist', 'native.js'))})
    const control = require(${JSON.stringify(controlPath)})
    const copy = \`
      const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
      Tensor.from(new Uint8Array(2 * 1024 * 1024).fill(1)).to('cuda:0').to('cpu')
    \`
    const run = () => new Promise((resolve, reject) => new Worker(copy, { eval: true }).on('exit', resolve).on('error', reject))
    ;(async () => {
      cuda.isAvailable()
      const base = control.liveHostAllocations()
      const settled = async () => {
      for (let i = 0; i < 200 && native.cudaReleaseStats().pending > 0; i++) await new Promise((resolve) => setTimeout(resolve, 5))
    }
      await run()
      await settled()
      const afterWorker = [native.cudaStagingStats().chunks, control.liveHostAllocations() - base]
      eval(copy)
      await run()
      await settled()
      const withMain = [native.cudaStagingStats().chunks, control.liveHostAllocations() - base]
      console.log(JSON.stringify({ afterWorker, withMain }))
    })()
  `
  const output = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', env: process.env })
  const { afterWorker, withMain } = JSON.parse(output.trim().split('\n').pop()!)
  t.deepEqual(afterWorker, [0, 0], "freed when the Worker, its only user, ended")
  t.deepEqual(withMain, [2, 2], 'kept while the main thread, a user too, is alive')
})

fakeOnly('a device reset under us (cudaDeviceReset() in another library) is noticed: new chunks, right data', async (t) => {
  // A fresh process: the reset frees every allocation of the device, this process's included.
  const peerPath = nativeFixture<object>('cuda-peer', 'cuda_peer.node').path
  const script = `
    const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
    const { native } = require(${JSON.stringify(join(root, 'dist', 'native.js'))})
    const peer = require(${JSON.stringify(peerPath)})
    const source = new Uint8Array(2 * 1024 * 1024).map((_, i) => (i * 7 + (i >> 12)) & 255)
    const same = (view) => Buffer.from(view.buffer, view.byteOffset, view.byteLength).equals(Buffer.from(source))
    const first = Tensor.from(source).to('cuda:0')
    const before = same(first.to('cpu').data)
    first.dispose()
    native.cudaSynchronize(0)
    peer.resetDevice(0) // the chunks' pinned memory is unmapped now
    const stats = native.cudaStagingStats()
    const again = Tensor.from(source).to('cuda:0')
    const after = same(again.to('cpu').data)
    const now = native.cudaStagingStats()
    console.log(JSON.stringify({ before, after, lost: now.poolsLost - stats.poolsLost, staged: now.staged - stats.staged, chunks: now.chunks }))
  `
  const output = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', env: process.env })
  t.deepEqual(JSON.parse(output.trim().split('\n').pop()!), { before: true, after: true, lost: 1, staged: 2, chunks: 2 })
})
