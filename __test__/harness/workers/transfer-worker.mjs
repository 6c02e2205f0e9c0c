// Worker for __test__/threads/workers.spec.ts: receives tensors sent with Tensor#transfer(), and does what
// the main thread asks with them, request by request ({ id, op, ... } -> { id, ... } or
// { id, error: { code, message } }). workerData: { addonPath } (the C test addon, a native
// producer of foreign memory), and optionally `startup`: { op, ...args, gate, end } runs one
// request at start (its reply has id 0), waits until the main thread opens `gate` (an Int32Array
// over a SharedArrayBuffer: no message listener, which would keep a Deno worker alive), then ends:
// 'natural' (its event loop runs dry), 'process.exit', or 'terminate' (waits to be terminated).
// The `ort*` ops load onnxruntime-node in this thread (only the workers that are asked to) and
// run a session on claimed tensors; such an op answers when ORT is done, and requests sent
// meanwhile run alongside it (a pool worker has several jobs in flight).
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const { Tensor, fromDLPack, externalBuffersAllowed } = require('../../../dist/index.js')
const c = require(workerData.addonPath)

/** Tensors this thread holds, by key. */
const kept = new Map()
/** onnxruntime-node and this thread's InferenceSession, once `ortSession` made one. */
let ort
let session

/** y = relu(x · w): x [n, k], w [k, m], y [n, m], all float32 and row-major. */
function infer(x, w, y) {
  const [n, k] = x.shape
  const m = w.shape[1]
  const xs = x.getData({ allowReadOnly: true })
  const ws = w.getData({ allowReadOnly: true })
  const ys = y.data
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      let sum = 0
      for (let p = 0; p < k; p++) sum += xs[i * k + p] * ws[p * m + j]
      ys[i * m + j] = Math.max(0, sum)
    }
  }
}

const ops = {
  claim({ key, transfer }) {
    const tensor = Tensor.fromTransfer(transfer)
    kept.set(key, tensor)
    return {
      pointer: tensor.dataPointer,
      isCopy: tensor.isCopy,
      readonly: tensor.readonly,
      shape: tensor.shape,
      device: tensor.__dlpack_device__(),
    }
  },
  /** Sends a held tensor back the same way. */
  transferBack({ key }) {
    return { transfer: kept.get(key).transfer() }
  },
  toArray({ key }) {
    return { values: kept.get(key).toArray() }
  },
  claimTwice({ transfer }) {
    Tensor.fromTransfer(transfer).dispose()
    try {
      Tensor.fromTransfer(transfer)
    } catch (error) {
      return { code: error.code, name: error.name }
    }
    return { code: null }
  },
  read({ key }) {
    return { values: Array.from(kept.get(key).getData({ allowReadOnly: true })) }
  },
  write({ key, index, value }) {
    kept.get(key).data[index] = value
    return {}
  },
  dispose({ key }) {
    kept.get(key).dispose()
    kept.delete(key)
    return {}
  },
  infer({ input, weights, output }) {
    const [x, w, y] = [input, weights, output].map((transfer) => Tensor.fromTransfer(transfer))
    infer(x, w, y)
    const pointers = [x, w, y].map((tensor) => tensor.dataPointer)
    for (const tensor of [x, w, y]) tensor.dispose()
    return { pointers }
  },
  /** Loads onnxruntime-node in this thread and makes a session from the model's bytes. */
  async ortSession({ model }) {
    ort = require('onnxruntime-node')
    session = await ort.InferenceSession.create(model, {
      executionProviders: ['cpu'],
      logSeverityLevel: 4,
      intraOpNumThreads: 1, // the pool is the parallelism
      interOpNumThreads: 1,
    })
    return { inputNames: session.inputNames, outputNames: session.outputNames }
  },
  /** Runs the session on claimed tensors: inputs `x` (a transfer) and `w` (a kept tensor, by key),
   *  output `y` written by ORT into the transferred output tensor's memory (a preallocated fetch). */
  async ortInfer({ input, weightsKey, output }) {
    const x = Tensor.fromTransfer(input)
    const y = Tensor.fromTransfer(output)
    const w = kept.get(weightsKey)
    const feeds = { x: new ort.Tensor(...x.toOrt({ allowReadOnly: true })), w: new ort.Tensor(...w.toOrt({ allowReadOnly: true })) }
    const fetches = { y: new ort.Tensor(...y.toOrt()) }
    await session.run(feeds, fetches)
    const reply = {
      pointers: [x, w, y].map((tensor) => tensor.dataPointer),
      // ORT was given our very arrays (no JS-side copy); it reads and writes their memory.
      ortHeldOurArrays: [feeds.x.data === x.data, feeds.w.data === w.data, fetches.y.data === y.data],
    }
    x.dispose()
    y.dispose()
    return reply
  },
  /** Answers, then stops listening: the thread ends by itself once its event loop runs dry. */
  finish() {
    setImmediate(() => parentPort.off('message', onMessage))
    return {}
  },
  makeForeign({ key, shape, device, disposeOwn }) {
    const options = device ? { device } : {}
    const tensor = fromDLPack(c.makeTensor({ shape, versioned: true, ...(device ? { device } : {}) }), options)
    const transfer = tensor.transfer()
    const pointer = tensor.dataPointer
    if (disposeOwn) tensor.dispose()
    else kept.set(key, tensor)
    return { transfer, pointer }
  },
  /** Keeps writing into a claimed tensor until the thread is terminated. */
  spin({ key }) {
    const data = kept.get(key).data
    parentPort.postMessage({ spinning: true })
    for (let i = 0; ; i++) data[i % data.length] = 1000 + (i % 1000)
  },
  exit() {
    process.exit(0)
  },
  info() {
    return { externalBuffers: externalBuffersAllowed() }
  },
}

const failure = (id, error) => ({ id, error: { code: error.code, message: error.message, name: error.name } })

/** The reply to `message`, or a promise of it for an async op. */
function answer(message) {
  const { id, op } = message
  try {
    const result = ops[op](message)
    if (result instanceof Promise) return result.then((value) => ({ id, ...value }), (error) => failure(id, error))
    return { id, ...result }
  } catch (error) {
    return failure(id, error)
  }
}

function onMessage(message) {
  const reply = answer(message)
  if (reply instanceof Promise) reply.then((value) => parentPort.postMessage(value))
  else parentPort.postMessage(reply)
}

const { startup } = workerData
if (startup) {
  parentPort.postMessage(answer({ ...startup, id: 0 }))
  Atomics.wait(startup.gate, 0, 0)
  if (startup.end === 'process.exit') process.exit(0)
  if (startup.end === 'terminate') setInterval(() => {}, 1000)
} else {
  parentPort.on('message', onMessage)
}
