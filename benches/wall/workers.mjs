// `node benches/wall/workers.mjs`: handing a tensor to a worker_threads Worker, which reads its first
// and last element and answers. Three ways, timed in the same run, interleaved (one round of each
// way per sample), medians of the round trips (post -> worker reads -> answer received):
//
//   structured clone   postMessage(typedArray): the copy Node makes today (the baseline)
//   shared             postMessage(t.transfer()) of a { shared: true } tensor; the worker calls
//                      Tensor.fromTransfer (the SharedArrayBuffer travels by reference)
//   token              postMessage(t.transfer()) of memory no thread owns (a private copy made by
//                      __dlpack__({ copy: true }), as a native producer's would be); the worker
//                      claims the token, reads through .data and disposes its tensor
//   token-no-view      the same, but the worker only takes the tensor's address (as a native
//                      consumer would): no external ArrayBuffer over the memory. Creating one
//                      over a large foreign region costs V8 external-memory accounting (GC)
//
// Then a pool of 3 workers, each running ONNX Runtime (onnxruntime-node, CPU, one thread each)
// on one dense layer y = relu(x @ w) (the model of __test__/harness/onnx-model.mjs), 12 jobs per round
// spread over the pool; the time per job is a round's wall time / 12, median of the rounds:
//
//   structured clone   x posted as a Float32Array (copied), y posted back (copied)
//   token              x and y in memory no thread owns, posted as transfer(): ORT reads x and
//                      writes y where the main thread has them (fetches)
//   shared             the same over { shared: true } tensors, where onnxruntime-node takes
//                      arrays over a SharedArrayBuffer (Node 22+, Bun; not Node 20)
//
// The weights w are sent once per worker (by token) in every way.
//
// `--quick` takes fewer samples; `--pool` runs only the pool.
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

import { denseReluModel } from '../../__test__/harness/onnx-model.mjs'

const require = createRequire(import.meta.url)
const { Tensor, fromDLPack } = require('../../dist/index.js')

const SIZES = [
  ['4 KiB', 1 << 10],
  ['1 MiB', 1 << 18],
  ['64 MiB', 1 << 24],
]
const samples = process.argv.includes('--quick') ? 9 : 41
/** `--only=shared,token`: time just these ways (each alone shows its cost without the garbage
 *  the others leave, which the interleaved run charges to whichever way triggers the GC). */
const poolOnly = process.argv.includes('--pool')
const only = (process.argv.find((arg) => arg.startsWith('--only='))?.slice(7).split(',') ?? []).filter(Boolean)

const worker = new Worker(
  `
  const { parentPort } = require('node:worker_threads')
  const { Tensor } = require(${JSON.stringify(require.resolve('../../dist/index.js'))})
  parentPort.on('message', ({ way, payload }) => {
    if (way === 'structured clone') {
      parentPort.postMessage(payload[0] + payload[payload.length - 1])
      return
    }
    const tensor = Tensor.fromTransfer(payload)
    if (way === 'token-no-view') {
      parentPort.postMessage(Number(tensor.dataPointer & 1n))
    } else {
      const data = tensor.data
      parentPort.postMessage(data[0] + data[data.length - 1])
    }
    tensor.dispose()
  })
  `,
  { eval: true },
)
worker.unref()

function roundTrip(message) {
  return new Promise((resolve) => {
    const started = process.hrtime.bigint()
    worker.once('message', () => resolve(Number(process.hrtime.bigint() - started)))
    worker.postMessage(message)
  })
}

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
const ratio = (a, b) => (Number.isNaN(a / b) ? '-' : `${(a / b).toFixed(1)}x`)
const format = (ns) => (Number.isNaN(ns) ? '-' : ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : `${(ns / 1e3).toFixed(1)} µs`)

if (!poolOnly) {
  console.log(`round trip to a worker and back, median of ${samples} interleaved samples (node ${process.versions.node})`)
  const WAYS = ['structured clone', 'shared', 'token', 'token-no-view']
  console.log(`size     | ${WAYS.map((way) => way.padStart(17)).join(' | ')} | clone / shared | clone / token`)
  for (const [label, elements] of SIZES) {
    const array = new Float32Array(elements).fill(1)
    const shared = Tensor.zeros([elements], 'float32', { shared: true })
    shared.data.fill(1)
    const owned = fromDLPack(Tensor.from(array).__dlpack__({ copy: true }))
    const ways = {
      'structured clone': () => ({ way: 'structured clone', payload: array }),
      shared: () => ({ way: 'shared', payload: shared.transfer() }),
      token: () => ({ way: 'token', payload: owned.transfer() }),
      'token-no-view': () => ({ way: 'token-no-view', payload: owned.transfer() }),
    }
    const times = Object.fromEntries(WAYS.map((way) => [way, []]))
    for (let round = 0; round < samples + 2; round++) {
      for (const [way, make] of Object.entries(ways).filter(([way]) => only.length === 0 || only.includes(way))) {
        const ns = await roundTrip(make())
        if (round >= 2) times[way].push(ns) // two warm-up rounds
      }
    }
    const medians = WAYS.map((way) => (times[way].length ? median(times[way]) : NaN))
    const [clone, sab, token] = medians
    console.log(
      `${label.padEnd(8)} | ${medians.map((ns) => format(ns).padStart(17)).join(' | ')} | ${ratio(clone, sab).padStart(14)} | ${ratio(clone, token).padStart(13)}`,
    )
    shared.dispose()
    owned.dispose()
  }
}
await worker.terminate()

// ---------------------------------------------------------------------------------------------
// A pool of workers running ONNX Runtime on the main thread's tensors.

const ortPath = require.resolve('onnxruntime-node')
const ort = require(ortPath)
const POOL = 3
const JOBS = 12
const poolSamples = process.argv.includes('--quick') ? 5 : 21
/** Memory no thread owns (a private copy, as a native producer's would be). */
const nativeTensor = (shape) => fromDLPack(Tensor.zeros(shape, 'float32').__dlpack__({ copy: true }))

/** Whether this runtime's onnxruntime-node takes an array over a SharedArrayBuffer. */
async function ortTakesShared() {
  const session = await ort.InferenceSession.create(denseReluModel(), { logSeverityLevel: 4 })
  const one = () => new ort.Tensor('float32', new Float32Array(new SharedArrayBuffer(4)), [1, 1])
  try {
    await session.run({ x: one(), w: one() })
    return true
  } catch {
    return false
  } finally {
    await session.release()
  }
}

function startPoolWorker(model, weights) {
  const worker = new Worker(
    `
    const { parentPort, workerData } = require('node:worker_threads')
    const { Tensor } = require(${JSON.stringify(require.resolve('../../dist/index.js'))})
    const ort = require(${JSON.stringify(ortPath)})
    const options = { executionProviders: ['cpu'], logSeverityLevel: 4, intraOpNumThreads: 1, interOpNumThreads: 1 }
    const ready = (async () => {
      const session = await ort.InferenceSession.create(workerData.model, options)
      const w = Tensor.fromTransfer(workerData.weights)
      return { session, w: new ort.Tensor(...w.toOrt()) }
    })()
    parentPort.on('message', async ({ way, x, xShape, y }) => {
      const { session, w } = await ready
      if (way === 'structured clone') {
        const result = await session.run({ x: new ort.Tensor('float32', x, xShape), w })
        parentPort.postMessage(result.y.data)
        return
      }
      const [input, output] = [Tensor.fromTransfer(x), Tensor.fromTransfer(y)]
      await session.run({ x: new ort.Tensor(...input.toOrt()), w }, { y: new ort.Tensor(...output.toOrt()) })
      input.dispose()
      output.dispose()
      parentPort.postMessage(0)
    })
    `,
    { eval: true, workerData: { model, weights: weights.transfer() } },
  )
  worker.unref()
  return worker
}

/** Runs one job on `worker`; resolves when its answer is back. */
function job(worker, message) {
  return new Promise((resolve) => {
    worker.once('message', resolve)
    worker.postMessage(message)
  })
}

const model = denseReluModel()
const POOL_SIZES = [
  // [label, x shape, w shape]
  ['x 3x4, w 4x4', [3, 4], [4, 4]],
  ['x 64x4096 (1 MiB), w 4096x16', [64, 4096], [4096, 16]],
]
const shared = await ortTakesShared()
const POOL_WAYS = ['structured clone', 'token', ...(shared ? ['shared'] : [])]
console.log(
  `\nworker pool (${POOL} workers) running ONNX Runtime ${ort.env.versions.common}: time per job, ${JOBS} jobs a round, median of ${poolSamples} interleaved rounds` +
    (shared ? '' : ' (no "shared": onnxruntime-node refuses SharedArrayBuffer arrays here)'),
)
console.log(`size                          | ${POOL_WAYS.map((way) => way.padStart(17)).join(' | ')} | clone / token`)
for (const [label, xShape, wShape] of POOL_SIZES) {
  const weights = nativeTensor(wShape)
  weights.data.fill(0.01)
  const pool = Array.from({ length: POOL }, () => startPoolWorker(model, weights))
  const yShape = [xShape[0], wShape[1]]
  // The main thread's inputs and outputs, made once (a producer fills them in a real program).
  const inputs = {
    'structured clone': Array.from({ length: JOBS }, () => new Float32Array(xShape[0] * xShape[1]).fill(1)),
    token: Array.from({ length: JOBS }, () => [nativeTensor(xShape), nativeTensor(yShape)]),
    shared: Array.from({ length: JOBS }, () => [Tensor.zeros(xShape, 'float32', { shared: true }), Tensor.zeros(yShape, 'float32', { shared: true })]),
  }
  const message = (way, i) =>
    way === 'structured clone'
      ? { way, x: inputs[way][i], xShape }
      : { way, x: inputs[way][i][0].transfer(), y: inputs[way][i][1].transfer() }
  const times = Object.fromEntries(POOL_WAYS.map((way) => [way, []]))
  for (let round = 0; round < poolSamples + 2; round++) {
    for (const way of POOL_WAYS) {
      const started = process.hrtime.bigint()
      // Each worker takes its jobs one after another (as a pool's queue would give them).
      await Promise.all(
        pool.map(async (worker, w) => {
          for (let i = w; i < JOBS; i += POOL) await job(worker, message(way, i))
        }),
      )
      if (round >= 2) times[way].push(Number(process.hrtime.bigint() - started) / JOBS)
    }
  }
  const medians = POOL_WAYS.map((way) => median(times[way]))
  console.log(`${label.padEnd(29)} | ${medians.map((ns) => format(ns).padStart(17)).join(' | ')} | ${ratio(medians[0], medians[1]).padStart(13)}`)
  await Promise.all(pool.map((worker) => worker.terminate()))
  for (const pair of [...inputs.token, ...inputs.shared]) for (const tensor of pair) tensor.dispose()
  weights.dispose()
}
