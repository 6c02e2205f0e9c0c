// Tensors handed to worker_threads Workers without copying (docs/guide.md, "Worker threads"): tensors
// over a SharedArrayBuffer travel with their buffer; memory no JS thread owns (the C test addon's
// tensors, a native producer) travels as a process-wide token claimed exactly once. Zero-copy is
// checked by data-pointer identity and by writes seen on the other thread; every C deleter is
// counted (the C addon's counter is process-wide, so a worker's deleters count too).
//
// Runs in both modes. With external buffers disallowed (Electron mode) a C tensor is copied into
// V8 memory at import, so what a thread holds is an ArrayBuffer: transfer() refuses it
// (ERR_DLPACK_COPY_REQUIRED) and toShared() makes the copy; memory on a device (never viewed
// from JS) still goes by token, which the ROCm tests cover in every mode.
//
// The worker pool runs ONNX Runtime (onnxruntime-node, CPU) in each worker on the tensors it is
// sent, with the model built here as bytes (onnx-model.mjs).
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test from 'ava'
import * as ort from 'onnxruntime-node'

import { native } from '../../dist/native.js'
import {
  BufferError,
  CapsuleError,
  DLPackTypeError,
  Tensor,
  TensorDisposedError,
  type DLPackCapsule,
  type TensorTransfer,
  externalBuffersAllowed,
  fromDLPack,
  isTransfer,
  releaseTransfer,
} from '../../dist/index.js'
import { drainGarbage, finalizesExternalsAtWorkerExit, gcUntil, runtime, throwsCode, nativeFixture } from '../harness/helpers.js'
import { denseReluModel } from '../harness/onnx-model.mjs'

interface CAddon {
  makeTensor(options: { shape: number[]; versioned: boolean; device?: [number, number]; readonly?: boolean; fill?: 'iota' | 'none' }): DLPackCapsule
  deleterCalls(): number
}

const here = dirname(fileURLToPath(import.meta.url))
const { path: addonPath, addon: c } = nativeFixture<CAddon>('c-addon', 'c_addon.node')
const zeroCopy = externalBuffersAllowed()
/** Storages (memory regions) napi-dlpack holds in this process, every thread together. */
const liveStorages = (): number => native.nativeStats().liveStorages
/** ROCm device memory: carried, never read by napi-dlpack, so never copied (Electron mode too). */
const ROCM: [number, number] = [10, 1]

type Reply = Record<string, unknown> & { error?: { code: string; name: string; message: string } }

type End = 'natural' | 'process.exit' | 'terminate'

/** A worker running __test__/harness/workers/transfer-worker.mjs, asked one thing at a time; or, with
 *  `startup`, one that does one thing, waits for `open()`, then ends by itself (`end`). */
class Peer {
  readonly worker: Worker
  readonly exited: Promise<unknown[]>
  /** The reply to `startup`. */
  readonly started: Promise<Reply>
  readonly #gate = new Int32Array(new SharedArrayBuffer(4))
  #next = 1
  readonly #waiting = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>()
  #spinning: (() => void) | undefined
  #failure: Error | undefined
  readonly #endsByItself: boolean

  constructor(startup?: Record<string, unknown> & { op: string; end: End }) {
    this.worker = new Worker(new URL('../harness/workers/transfer-worker.mjs', import.meta.url), {
      workerData: { addonPath, startup: startup && { ...startup, gate: this.#gate } },
    })
    this.#endsByItself = startup !== undefined
    this.exited = once(this.worker, 'exit') // before any message: both may come in one tick
    this.started = startup ? new Promise((resolve, reject) => this.#waiting.set(0, { resolve, reject })) : Promise.resolve({})
    this.worker.on('message', (message: Reply & { id?: number; spinning?: boolean }) => {
      if (message.spinning) this.#spinning?.()
      else {
        this.#waiting.get(message.id!)?.resolve(message)
        this.#waiting.delete(message.id!)
      }
    })
    // A worker that fails or ends fails what is still asked of it, instead of a test timeout.
    this.worker.on('error', (error: Error) => (this.#failure = error))
    this.worker.on('exit', (code: number) => {
      for (const { reject } of this.#waiting.values()) reject(this.#failure ?? new Error(`the worker exited (${code})`))
    })
  }

  ask(op: string, args: Record<string, unknown> = {}): Promise<Reply> {
    const id = this.#next++
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject })
      this.worker.postMessage({ id, op, ...args })
    })
  }

  /** Asks and fails the test on a reported error. */
  async ok(op: string, args: Record<string, unknown> = {}): Promise<Reply> {
    const reply = await this.ask(op, args)
    if (reply.error) throw new Error(`${op}: ${reply.error.code} ${reply.error.message}`)
    return reply
  }

  /** Starts the worker writing into tensor `key` forever; resolves once it is writing. */
  spin(key: string): Promise<void> {
    return new Promise((resolve) => {
      this.#spinning = resolve
      this.worker.postMessage({ id: this.#next++, op: 'spin', key })
    })
  }

  /** Lets a `startup` worker go on to its end. */
  open(): void {
    Atomics.store(this.#gate, 0, 1)
    Atomics.notify(this.#gate, 0)
  }

  /** Ends the worker: 'process.exit' (asked to) or 'terminate'; a `startup` worker ends as it was
   *  told once opened ('natural': its event loop runs dry). Resolves to the exit code. */
  async end(how: End): Promise<number> {
    this.open()
    if (how === 'terminate') await this.worker.terminate()
    else if (!this.#endsByItself) this.worker.postMessage({ id: this.#next++, op: 'exit' })
    const [code] = await this.exited
    return code as number
  }
}

/** Polls (without blocking the event loop) until `cond()` holds, for at most `ms`. */
async function until(cond: () => boolean, ms = 10_000): Promise<boolean> {
  for (const end = Date.now() + ms; !cond() && Date.now() < end; ) await new Promise((resolve) => setTimeout(resolve, 5))
  return cond()
}

/** Whether the spinning worker's writes (values 1000..1999) have reached `data`. */
const workerWrote = (data: ArrayLike<number>) => Array.prototype.some.call(data, (value: number) => value >= 1000)

/** The C addon's deleter count once every deleter that is due has run (other runtimes may free
 *  a worker's last holders, external ArrayBuffers, a little after its 'exit' event). */
async function deletersSettle(expected: number): Promise<number> {
  if (!finalizesExternalsAtWorkerExit) await gcUntil(() => c.deleterCalls() >= expected)
  return c.deleterCalls()
}

/** y = relu(x · w) in JS (float64 sums: exact for the small integers the pool tests use). */
const denseRelu = (x: number[][], w: number[][]) =>
  x.map((row) => w[0]!.map((_, j) => Math.max(0, row.reduce((sum, value, p) => sum + value * w[p]![j]!, 0))))

const importC = (shape: number[], extra: { device?: [number, number]; readonly?: boolean; fill?: 'iota' | 'none' } = {}) =>
  fromDLPack(c.makeTensor({ shape, versioned: true, ...extra }), extra.device ? { device: extra.device } : {}) as Tensor<'float32'>

test.serial('shared: a tensor made with { shared: true } reaches a worker and comes back at the same address, writes seen both ways', async (t) => {
  const peer = new Peer()
  const tensor = Tensor.zeros([4, 8], 'float32', { shared: true })
  t.true(tensor.data.buffer instanceof SharedArrayBuffer)
  const transfer = tensor.transfer()
  t.true(isTransfer(transfer))
  t.is(transfer.kind, 'shared')
  const claimed = await peer.ok('claim', { key: 'a', transfer })
  t.is(claimed.pointer, tensor.dataPointer, 'the worker sees the same memory')
  t.deepEqual(claimed.shape, [4, 8])
  tensor.data[3] = 7
  t.is(((await peer.ok('read', { key: 'a' })).values as number[])[3], 7, 'a write of the main thread is seen by the worker')
  await peer.ok('write', { key: 'a', index: 5, value: 9 })
  t.is(tensor.data[5], 9, 'a write of the worker is seen by the main thread')
  // And back: the worker transfers its tensor to the main thread.
  const back = Tensor.fromTransfer((await peer.ok('transferBack', { key: 'a' })).transfer as TensorTransfer<'float32'>)
  t.is(back.dataPointer, tensor.dataPointer)
  t.is(back.data[5], 9)
  // A shared transfer may be rebuilt more than once (V8 shares the buffer, nothing is claimed).
  t.is(Tensor.fromTransfer(transfer).dataPointer, tensor.dataPointer)
  t.false(releaseTransfer(transfer), 'nothing to release: the garbage collectors free the buffer')
  t.is(await peer.end('process.exit'), 0)
  t.is(tensor.data[5], 9, 'the memory outlives the worker')
})

test.serial('shared: strided, offset and read-only views keep their layout across threads', async (t) => {
  const peer = new Peer()
  const buffer = new SharedArrayBuffer(4 * 12)
  const all = new Float32Array(buffer)
  all.forEach((_, i) => (all[i] = i))
  // A transposed view, and one with a negative stride starting inside the buffer.
  const transposed = Tensor.from(all, [3, 4], { strides: [1, 3], readonly: true })
  const reversed = Tensor.from(new Float32Array(buffer, 8, 8), [2, 3], { strides: [-3, 1], offset: 3 })
  for (const [key, tensor] of [['t', transposed], ['r', reversed]] as const) {
    const claimed = await peer.ok('claim', { key, transfer: tensor.transfer() })
    t.is(claimed.pointer, tensor.dataPointer, key)
    t.is(claimed.readonly, tensor.readonly, key)
    t.deepEqual((await peer.ok('toArray', { key })).values, tensor.toArray(), key)
  }
  t.is(await peer.end('process.exit'), 0)
})

test('ArrayBuffer memory: transfer() throws ERR_DLPACK_COPY_REQUIRED; toShared() makes the one copy, then shares', (t) => {
  const plain = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3])
  throwsCode(t, () => plain.transfer(), 'ERR_DLPACK_COPY_REQUIRED', BufferError)
  const shared = plain.toShared()
  t.true(shared.data.buffer instanceof SharedArrayBuffer)
  t.not(shared.dataPointer, plain.dataPointer, 'a copy')
  t.deepEqual(shared.toArray(), plain.toArray())
  plain.data[0] = 100
  t.is(shared.data[0], 1, 'the copy is separate memory')
  const again = shared.toShared()
  t.is(again.dataPointer, shared.dataPointer, 'already shared: no second copy')
  // A strided view becomes a row-major copy of its elements.
  const transposed = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2], { strides: [1, 3] })
  const dense = transposed.toShared()
  t.deepEqual(dense.strides, [2, 1])
  t.deepEqual(dense.toArray(), transposed.toArray())
  t.is(dense.transfer().kind, 'shared')
  // A disposed tensor cannot be transferred.
  plain.dispose()
  throwsCode(t, () => plain.transfer(), 'ERR_TENSOR_DISPOSED', TensorDisposedError)
  throwsCode(t, () => plain.toShared(), 'ERR_TENSOR_DISPOSED', TensorDisposedError)
  throwsCode(t, () => Tensor.empty([2], 'float32', { shared: true, device: 'cuda:0' }), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
})

/** Tests of foreign *host* memory by token: where external buffers are refused (Electron mode)
 *  such memory is a copy in V8 memory after import, which the Electron-mode test covers. */
const hostToken = zeroCopy ? test.serial : test.serial.skip
const electronOnly = zeroCopy ? test.serial.skip : test.serial

electronOnly('foreign host memory in Electron mode is a copy at import: transfer() refuses it, toShared() shares it', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  const tensor = importC([4])
  t.true(tensor.isCopy)
  t.is(c.deleterCalls(), before + 1, 'the C tensor was copied and released at import')
  throwsCode(t, () => tensor.transfer(), 'ERR_DLPACK_COPY_REQUIRED', BufferError)
  const shared = tensor.toShared()
  t.deepEqual(shared.toArray(), [0, 1, 2, 3])
  t.is(shared.transfer().kind, 'shared')
})

for (const lastHolder of ['worker', 'main thread'] as const) {
  hostToken(`token: a worker claims a C tensor at the same address, writes are seen both ways, the deleter runs once when the ${lastHolder} lets go last`, async (t) => {
    await drainGarbage()
    const peer = new Peer()
    const before = c.deleterCalls()
    const pending = native.pendingTransfers()
    const tensor = importC([4, 4])
    t.false(tensor.isCopy)
    const transfer = tensor.transfer()
    t.is(transfer.kind, 'token')
    t.is(native.pendingTransfers(), pending + 1)
    const claimed = await peer.ok('claim', { key: 'f', transfer })
    t.is(native.pendingTransfers(), pending, 'claimed')
    t.is(claimed.pointer, tensor.dataPointer, 'the worker holds the same memory')
    t.false(claimed.isCopy)
    tensor.data[2] = 42
    t.is(((await peer.ok('read', { key: 'f' })).values as number[])[2], 42)
    await peer.ok('write', { key: 'f', index: 3, value: -1 })
    t.is(tensor.data[3], -1)
    if (lastHolder === 'worker') {
      tensor.dispose()
      await drainGarbage()
      t.is(c.deleterCalls(), before, 'the worker still holds the memory')
      await peer.ok('dispose', { key: 'f' })
    } else {
      await peer.ok('dispose', { key: 'f' })
      t.is(c.deleterCalls(), before, 'the main thread still holds the memory')
      t.is(tensor.data[3], -1)
      tensor.dispose()
    }
    t.is(c.deleterCalls(), before + 1, 'the deleter ran once, when the last holder let go')
    await peer.end('terminate')
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1, 'and never again')
  })
}

test.serial('token: device memory (ROCm, never viewed) goes to a worker by token in every mode, Electron included', async (t) => {
  await drainGarbage()
  const peer = new Peer()
  const before = c.deleterCalls()
  const tensor = importC([2, 2], { device: ROCM })
  t.false(tensor.isCopy)
  const transfer = tensor.transfer()
  t.is(transfer.kind, 'token')
  t.deepEqual((transfer as { device: unknown }).device, ROCM)
  const claimed = await peer.ok('claim', { key: 'd', transfer })
  t.is(claimed.pointer, tensor.dataPointer)
  t.deepEqual(claimed.device, ROCM)
  tensor.dispose()
  t.is(c.deleterCalls(), before)
  await peer.ok('dispose', { key: 'd' })
  t.is(c.deleterCalls(), before + 1)
  await peer.end('process.exit')
})

test.serial('token: claimed once; a second claim, a released token and a token of another process are coded errors', async (t) => {
  await drainGarbage()
  const peer = new Peer()
  const before = c.deleterCalls()
  const tensor = importC([3], { device: ROCM })
  // Twice in the worker.
  const twice = await peer.ok('claimTwice', { transfer: tensor.transfer() })
  t.is(twice.code, 'ERR_DLPACK_TRANSFER_CLAIMED')
  t.is(twice.name, 'CapsuleError')
  // Claimed by the worker, then by the sending thread.
  const transfer = tensor.transfer()
  await peer.ok('claim', { key: 'x', transfer })
  throwsCode(t, () => Tensor.fromTransfer(transfer), 'ERR_DLPACK_TRANSFER_CLAIMED', CapsuleError)
  t.false(releaseTransfer(transfer), 'a claimed token is no longer pending')
  // Released unclaimed: the claim fails; a second release does nothing.
  const unclaimed = tensor.transfer()
  t.true(releaseTransfer(unclaimed))
  t.false(releaseTransfer(unclaimed))
  throwsCode(t, () => Tensor.fromTransfer(unclaimed), 'ERR_DLPACK_TRANSFER_CLAIMED', CapsuleError)
  // A token that is the last holder: releasing it runs the deleter.
  const last = tensor.transfer()
  tensor.dispose()
  await peer.ok('dispose', { key: 'x' })
  t.is(c.deleterCalls(), before, 'the unclaimed token still holds the memory')
  t.true(releaseTransfer(last))
  t.is(c.deleterCalls(), before + 1, 'released with the token, once')
  // Another process's token (its key differs) is refused before anything is looked up.
  const foreign = { ...last, process: 'another-process' } as TensorTransfer
  throwsCode(t, () => Tensor.fromTransfer(foreign), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
  await peer.end('process.exit')
  t.is(c.deleterCalls(), before + 1)
})

for (const exit of ['natural', 'process.exit', 'terminate'] as const) {
  test.serial(`token: unclaimed when its sending worker ends (${exit}), it is released then (deleter once) and a later claim throws`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    const pending = native.pendingTransfers()
    const peer = new Peer({ op: 'makeForeign', shape: [4], device: zeroCopy ? undefined : ROCM, disposeOwn: true, end: exit })
    const made = await peer.started
    const transfer = made.transfer as TensorTransfer
    t.is(transfer.kind, 'token')
    t.is(native.pendingTransfers(), pending + 1)
    t.is(c.deleterCalls(), before, 'the token holds the tensor')
    t.is(await peer.end(exit), exit === 'terminate' ? 1 : 0)
    t.is(await deletersSettle(before + 1), before + 1, 'released at the sender\'s teardown, exactly once')
    t.is(native.pendingTransfers(), pending)
    throwsCode(t, () => Tensor.fromTransfer(transfer), 'ERR_DLPACK_TRANSFER_CLAIMED', CapsuleError)
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })

  test.serial(`token: claimed before its sending worker ends (${exit}), the tensor outlives it and the deleter runs when the receiver lets go`, async (t) => {
    await drainGarbage()
    const before = c.deleterCalls()
    // The worker keeps its own tensor too: its teardown releases that one, not the memory.
    const peer = new Peer({ op: 'makeForeign', key: 'own', shape: [4], device: zeroCopy ? undefined : ROCM, disposeOwn: false, end: exit })
    const made = await peer.started
    const tensor = Tensor.fromTransfer(made.transfer as TensorTransfer<'float32'>)
    t.is(tensor.dataPointer, made.pointer as bigint, 'the same memory')
    await peer.end(exit)
    await drainGarbage()
    t.is(c.deleterCalls(), before, 'the receiver still holds the memory')
    if (zeroCopy) t.deepEqual([...tensor.data], [0, 1, 2, 3], 'and it is intact')
    tensor.dispose()
    t.is(c.deleterCalls(), before + 1)
  })
}

/** Deno does not stop a Worker terminated while running JS: `exit` fires, but the thread goes on
 *  running (measured: a spinning worker's writes into a SharedArrayBuffer continue after `exit`),
 *  so its env cleanup hooks and finalizers never run and what it held is never released (the C
 *  deleter never runs, napi-dlpack's or not). Only Node and Bun can pass the busy-terminate
 *  deleter test. */
const busyTerminateReleases = runtime !== 'deno'

for (const mainDisposedFirst of [false, true]) {
  ;(busyTerminateReleases ? hostToken : test.serial.skip)(`a worker terminated while writing into a claimed tensor${mainDisposedFirst ? ' (the last holder)' : ''}: the deleter runs once, ${mainDisposedFirst ? 'at its teardown' : 'when the main thread lets go'}`, async (t) => {
    await drainGarbage()
    const peer = new Peer()
    const before = c.deleterCalls()
    const tensor = importC([64])
    await peer.ok('claim', { key: 's', transfer: tensor.transfer() })
    await peer.spin('s')
    t.true(await until(() => workerWrote(tensor.data)), 'the worker is writing into our memory')
    if (mainDisposedFirst) tensor.dispose()
    t.is(await peer.end('terminate'), 1)
    if (mainDisposedFirst) {
      t.is(await deletersSettle(before + 1), before + 1, 'released by the worker\'s teardown')
    } else {
      t.is(c.deleterCalls(), before, 'the main thread still holds it')
      tensor.data[0] = 5 // still valid memory
      tensor.dispose()
      t.is(c.deleterCalls(), before + 1)
    }
    await drainGarbage()
    t.is(c.deleterCalls(), before + 1)
  })
}

test.serial('a worker terminated while writing into a SharedArrayBuffer tensor: the memory stays with the main thread', async (t) => {
  const peer = new Peer()
  const tensor = Tensor.zeros([64], 'float32', { shared: true })
  await peer.ok('claim', { key: 's', transfer: tensor.transfer() })
  await peer.spin('s')
  t.true(await until(() => workerWrote(tensor.data)), 'the worker is writing into our memory')
  t.is(await peer.end('terminate'), 1)
  if (busyTerminateReleases) {
    tensor.data[0] = 5
    t.is(tensor.data[0], 5)
  } else {
    // Deno: the terminated worker goes on writing (see busyTerminateReleases), so a write here
    // races with it; the memory itself stays valid, held by both threads.
    t.is(tensor.data.length, 64)
    t.true(Number.isFinite(tensor.data[0]))
  }
})

/** Whether onnxruntime-node takes a typed array over a SharedArrayBuffer. Its binding reads the
 *  array's buffer with napi_get_arraybuffer_info, which accepts a SharedArrayBuffer in Node 22
 *  and 24 (nodejs/node#59071) and Bun, and refuses one ("Invalid argument") in Node 20 and Deno.
 *  The test below checks this on the main thread; the pool tests then rely on it. */
const ortTakesShared = runtime === 'bun' || (runtime === 'node' && Number(process.versions.node.split('.')[0]) >= 22)

test('onnxruntime-node takes arrays over a SharedArrayBuffer where the runtime\'s Node-API does (Node 22+, Bun; not Node 20, Deno)', async (t) => {
  const session = await ort.InferenceSession.create(denseReluModel(), { logSeverityLevel: 4 })
  const x = new Float32Array(new SharedArrayBuffer(8)).fill(2)
  const w = new Float32Array(new SharedArrayBuffer(8)).fill(3)
  const run = () => session.run({ x: new ort.Tensor('float32', x, [1, 2]), w: new ort.Tensor('float32', w, [2, 1]) })
  if (ortTakesShared) t.deepEqual([...((await run()).y!.data as Float32Array)], [12])
  else await t.throwsAsync(run, { message: 'Invalid argument' })
  await session.release()
})

test.serial('a worker pool computes a dense layer in JS on tensors the main thread produced, writing results in place (no copies)', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  const pending = native.pendingTransfers()
  const pool = [new Peer(), new Peer(), new Peer()]
  const [n, k, m] = [3, 4, 4]
  // Weights from a native producer: by token where its memory is viewable zero-copy, else (Electron
  // mode) the import is already a copy in V8 memory, moved into a SharedArrayBuffer once.
  const imported = importC([k, m])
  const weights = zeroCopy ? imported : imported.toShared()
  if (!zeroCopy) throwsCode(t, () => imported.transfer(), 'ERR_DLPACK_COPY_REQUIRED', BufferError)
  const w = imported.toArray() as number[][]
  const jobs = Array.from({ length: 12 }, (_, job) => {
    const input = Tensor.empty([n, k], 'float32', { shared: true })
    input.data.forEach((_, i) => (input.data[i] = ((i * 7 + job) % 5) - 2))
    return { input, output: Tensor.zeros([n, m], 'float32', { shared: true }) }
  })
  const replies = await Promise.all(
    jobs.map(({ input, output }, job) =>
      pool[job % pool.length]!.ok('infer', { input: input.transfer(), weights: weights.transfer(), output: output.transfer() }),
    ),
  )
  jobs.forEach(({ input, output }, job) => {
    t.deepEqual(replies[job]!.pointers, [input.dataPointer, weights.dataPointer, output.dataPointer], `job ${job}: same memory`)
    t.deepEqual(output.toArray(), denseRelu(input.toArray() as number[][], w), `job ${job}: the worker's result is in our output tensor`)
  })
  t.is(native.pendingTransfers(), pending, 'every token was claimed')
  await Promise.all(pool.map((peer) => peer.end('process.exit')))
  weights.dispose()
  imported.dispose()
  t.is(await deletersSettle(before + 1), before + 1, 'the weights\' deleter ran once')
})

/** The routes by which the pool's tensors reach ONNX Runtime in a worker. */
const ortRoutes = {
  /** Inputs and outputs in JS memory allocated `{ shared: true }`; the weights from the C addon. */
  shared: {
    run: ortTakesShared,
    reason: `onnxruntime-node refuses arrays over a SharedArrayBuffer in ${runtime} ${process.version} (napi_get_arraybuffer_info refuses one: "Invalid argument")`,
  },
  /** Inputs, weights and outputs in the C addon's memory, each by token (views are external
   *  ArrayBuffers, which ORT takes in every runtime). */
  foreign: {
    run: zeroCopy,
    reason: 'foreign memory is a copy in V8 memory at import with external buffers disallowed (Electron mode)',
  },
} as const

for (const [route, { run, reason }] of Object.entries(ortRoutes)) {
  for (const end of ['natural', 'terminate'] as const) {
    const title = `a worker pool runs ONNX Runtime on tensors the main thread produced (${route} memory): ORT reads them and writes its results in place (no copies); every deleter runs once, storages back to start, when the workers ${end === 'natural' ? 'end by themselves' : 'are terminated'}`
    if (!run) {
      console.log(`# skipped "${title}": ${reason}`)
      test.serial.skip(title, () => {})
      continue
    }
    test.serial(title, async (t) => {
      await drainGarbage()
      const before = c.deleterCalls()
      const live = liveStorages()
      const pending = native.pendingTransfers()
      const pool = [new Peer(), new Peer(), new Peer()]
      const [n, k, m] = [3, 4, 4]
      // Each worker makes its own session from the model's bytes (built here, posted to it).
      const model = denseReluModel()
      for (const { inputNames, outputNames } of await Promise.all(pool.map((peer) => peer.ok('ortSession', { model })))) {
        t.deepEqual([inputNames, outputNames], [['x', 'w'], ['y']])
      }
      // Weights from a native producer, sent once to each worker, which keeps them: by token where
      // the import is zero-copy, else (Electron mode) through a SharedArrayBuffer (one copy).
      const imported = importC([k, m])
      const weights = zeroCopy ? imported : imported.toShared()
      const w = imported.toArray() as number[][]
      for (const peer of pool) {
        const claimed = await peer.ok('claim', { key: 'w', transfer: weights.transfer() })
        t.is(claimed.pointer, weights.dataPointer, 'the worker holds the weights at our address')
        t.is(claimed.isCopy, false)
      }
      const make = (shape: number[]) =>
        route === 'shared' ? Tensor.empty(shape, 'float32', { shared: true }) : importC(shape, { fill: 'none' })
      const jobs = Array.from({ length: 12 }, (_, job) => {
        const input = make([n, k])
        input.data.forEach((_, i) => (input.data[i] = ((i * 7 + job) % 5) - 2))
        const output = make([n, m])
        output.data.fill(Number.NaN) // what ORT does not write stays NaN
        return { input, output, outputView: output.data }
      })
      const replies = await Promise.all(
        jobs.map(({ input, output }, job) =>
          pool[job % pool.length]!.ok('ortInfer', { input: input.transfer(), weightsKey: 'w', output: output.transfer() }),
        ),
      )
      jobs.forEach(({ input, output, outputView }, job) => {
        t.deepEqual(replies[job]!.pointers, [input.dataPointer, weights.dataPointer, output.dataPointer], `job ${job}: the worker's tensors are our memory`)
        t.deepEqual(replies[job]!.ortHeldOurArrays, [true, true, true], `job ${job}: ORT was given those very arrays`)
        t.deepEqual(output.toArray(), denseRelu(input.toArray() as number[][], w), `job ${job}: ORT's result is in our output tensor`)
        t.is(output.data, outputView, `job ${job}: the same view (nothing replaced it)`)
      })
      t.is(native.pendingTransfers(), pending, 'every token was claimed')
      // The C tensors of a job (input, output; foreign route): the workers let go after their
      // job, so the main thread is their last holder.
      const perJob = route === 'foreign' ? 2 : 0
      for (const { input, output } of jobs) {
        input.dispose()
        output.dispose()
      }
      t.is(c.deleterCalls(), before + jobs.length * perJob + (zeroCopy ? 0 : 1), 'the jobs\' C memory was released once each, when we let go')
      // The main thread lets go of the weights first: the workers are their last holders.
      weights.dispose()
      imported.dispose()
      t.is(c.deleterCalls(), before + jobs.length * perJob + (zeroCopy ? 0 : 1), zeroCopy ? 'the workers still hold the weights' : 'Electron mode: the C weights were released at import (a copy)')
      if (end === 'natural') {
        await Promise.all(pool.map((peer) => peer.ok('finish')))
        t.deepEqual(await Promise.all(pool.map(async (peer) => (await peer.exited)[0])), [0, 0, 0], 'each worker ended by itself')
      } else {
        t.deepEqual(await Promise.all(pool.map((peer) => peer.end('terminate'))), [1, 1, 1])
      }
      const expected = before + jobs.length * perJob + 1
      t.is(await deletersSettle(expected), expected, 'the weights\' deleter ran once, at the last worker\'s end')
      t.true(await gcUntil(() => liveStorages() === live), `storages back to start (${liveStorages()} live, ${live} before)`)
      await drainGarbage()
      t.is(c.deleterCalls(), expected, 'and no deleter ran again')
      t.is(liveStorages(), live)
    })
  }
}

test('a producer addon loaded only in the sending worker stays loaded: its deleter runs on the receiver after that worker ended', (t) => {
  // In a fresh process whose main thread never loads the C addon: Node unloads an addon loaded
  // only in a Worker when the Worker ends, so without the pin the deleter would be unmapped code
  // by the time the receiver releases the tensor (the child crashed with SIGSEGV).
  const script = join(here, '..', 'harness', 'workers', 'transfer-producer-gone.mjs')
  const args = runtime === 'deno' ? ['run', '-A', script, addonPath] : [script, addonPath]
  const output = execFileSync(process.execPath, args, { encoding: 'utf8' })
  const report = JSON.parse(output.trim().split('\n').at(-1) ?? '') as { code: number; values: number[] | null; deleterCalls: number }
  t.is(report.code, 0)
  if (zeroCopy) t.deepEqual(report.values, [0, 1, 2, 3], 'the memory was intact after its sender ended')
  t.is(report.deleterCalls, 1, 'the deleter ran once, and the library was never unloaded (its counter survived)')
})

/** Bun ends the process without running C atexit handlers, where the C addon reports its count
 *  (seen: no report at all, for a live import neither), so this is observable in Node and Deno. */
const atExitObservable = runtime !== 'bun'

;(atExitObservable ? test : test.skip)('a token still unclaimed when the process ends is released by the main thread\'s teardown (deleter once)', (t) => {
  const script = join(here, '..', 'harness', 'workers', 'transfer-at-exit.mjs')
  const args = runtime === 'deno' ? ['run', '-A', script, addonPath] : [script, addonPath]
  const output = execFileSync(process.execPath, args, { encoding: 'utf8', env: { ...process.env, C_ADDON_REPORT_AT_EXIT: '1' } })
  const [first, last] = [output.trim().split('\n')[0] ?? '', output.trim().split('\n').at(-1)]
  t.deepEqual(JSON.parse(first), { kind: 'token', deleterCallsBeforeExit: 0 }, 'the token held the tensor until the end')
  t.is(last, 'c-addon-deleter-calls-at-exit 1')
})

test.serial('token: read-only and zero-size tensors keep their flags and layout across threads', async (t) => {
  await drainGarbage()
  const peer = new Peer()
  const before = c.deleterCalls()
  const readOnly = importC([2, 3], zeroCopy ? { readonly: true } : { readonly: true, device: ROCM })
  t.true(readOnly.readonly)
  const claimed = await peer.ok('claim', { key: 'r', transfer: readOnly.transfer() })
  t.true(claimed.readonly, 'READ_ONLY travels with the token')
  t.is(claimed.pointer, readOnly.dataPointer)
  if (zeroCopy) {
    const write = await peer.ask('write', { key: 'r', index: 0, value: 1 })
    t.is(write.error?.code, 'ERR_DLPACK_READ_ONLY', 'the receiver cannot get a writable view either')
    t.deepEqual((await peer.ok('read', { key: 'r' })).values, [0, 1, 2, 3, 4, 5])
  }
  const empty = importC([0, 4], zeroCopy ? {} : { device: ROCM })
  const emptyClaim = await peer.ok('claim', { key: 'e', transfer: empty.transfer() })
  t.deepEqual(emptyClaim.shape, [0, 4])
  for (const key of ['r', 'e']) await peer.ok('dispose', { key })
  readOnly.dispose()
  empty.dispose()
  t.is(c.deleterCalls(), before + 2, 'one deleter each')
  await peer.end('process.exit')
})

test('malformed transfer objects are refused with ERR_DLPACK_INVALID_ARGUMENT', (t) => {
  const good = Tensor.zeros([2, 2], 'float32', { shared: true }).transfer() as TensorTransfer & Record<string, unknown>
  const cases: [string, unknown][] = [
    ['not an object', 42],
    ['no marker', { kind: 'shared' }],
    ['unknown kind', { ...good, kind: 'other' }],
    ['bad dtype', { ...good, dtype: 'float31' }],
    ['bad shape', { ...good, shape: [1.5] }],
    ['an ArrayBuffer', { ...good, buffer: new ArrayBuffer(16) }],
    ['outside the buffer', { ...good, byteOffset: 8 }],
    ['a token without id', { ...good, kind: 'token', process: native.transferProcessKey() }],
  ]
  for (const [what, value] of cases) {
    throwsCode(t, () => Tensor.fromTransfer(value as TensorTransfer), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError, what)
  }
  // A layout reaching past its bytes is refused by the same validation as Tensor.from.
  t.throws(() => Tensor.fromTransfer({ ...good, shape: [4, 4], strides: [4, 1] } as TensorTransfer), { code: 'ERR_DLPACK_INVALID_LAYOUT' })
  throwsCode(t, () => Tensor.fromTransfer({ ...good, kind: 'token', process: native.transferProcessKey(), id: -1 } as TensorTransfer), 'ERR_DLPACK_INVALID_ARGUMENT', DLPackTypeError)
})
