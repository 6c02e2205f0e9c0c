// `node benches/workers.mjs`: handing a tensor to a worker_threads Worker, which reads its first
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
// `--quick` takes fewer samples.
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const { Tensor, fromDLPack } = require('../dist/index.js')

const SIZES = [
  ['4 KiB', 1 << 10],
  ['1 MiB', 1 << 18],
  ['64 MiB', 1 << 24],
]
const samples = process.argv.includes('--quick') ? 9 : 41
/** `--only=shared,token`: time just these ways (each alone shows its cost without the garbage
 *  the others leave, which the interleaved run charges to whichever way triggers the GC). */
const only = (process.argv.find((arg) => arg.startsWith('--only='))?.slice(7).split(',') ?? []).filter(Boolean)

const worker = new Worker(
  `
  const { parentPort } = require('node:worker_threads')
  const { Tensor } = require(${JSON.stringify(require.resolve('../dist/index.js'))})
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
await worker.terminate()
