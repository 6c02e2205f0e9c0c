// `npm run bench`: the JS side of the exchange, timed against baselines measured in the same
// run. Each sample runs the operation BATCH times and then yields one event-loop turn (so the
// finalizers of the capsules it made run inside the timed region, see `measure`); the table
// reports mean nanoseconds per operation.
//
//   export only          t.__dlpack__()              one capsule (a tagged napi_external)
//   (metadata is read lazily, once per native handle: the "+ first metadata read" row adds it)
//   capsule round trip   fromDLPack(t.__dlpack__())  export + consume + new Tensor
//   shared owner         fromDLPack(t)               a new Tensor on the same native owner
//   cached .data         t.data                      after the first access
//   first .data, foreign fromDLPack(f.__dlpack__()).data on foreign (non-V8) memory: round
//                        trip plus one external ArrayBuffer (not flat in V8: its external
//                        memory accounting triggers GC)
//   floor                create + finalize a type-tagged napi_external (the least a capsule costs),
//                        from a raw Node-API callback like the exchange's own entry points
//   copy baseline        TypedArray.prototype.slice() of the same bytes
//   library tensor       fromDLPack({ type, dims, data, location }) (an ONNX Runtime tensor's
//                        fields, lib/interop/from-library.ts), against its baseline Tensor.from(data, dims)
import { cpus } from 'node:os'
import { createRequire } from 'node:module'

import { Bench } from 'tinybench'

const require = createRequire(import.meta.url)
const { Tensor, fromDLPack } = require('../../dist/index.js')
const native = require('../../dist/binding/index.js')

const SIZES = [
  ['1 KiB', 1 << 10],
  ['1 MiB', 1 << 20],
  ['16 MiB', 1 << 24],
  ['256 MiB', 1 << 28],
]
const quick = process.argv.includes('--quick')
const time = quick ? 100 : 1000
const gc = globalThis.gc ?? (() => {})

const rows = new Map()
function record(task, size, nsPerOp) {
  if (!rows.has(task)) rows.set(task, new Map())
  rows.get(task).set(size, nsPerOp)
}

/** Collects garbage and lets pending Node-API finalizers run, so one task's leftovers (each
 *  capsule and handle is a finalizable napi_external) do not slow the next one down. */
async function settle() {
  for (let i = 0; i < 4; i++) {
    gc()
    await new Promise((resolve) => setImmediate(resolve))
  }
}

/** One turn of the event loop: Node-API finalizers queued by a garbage collection run here. */
const turn = () => new Promise((resolve) => setImmediate(resolve))

/**
 * Times `fn` in batches of `batch` calls, each batch followed by one event-loop turn inside the
 * timed region. A capsule's cost is only paid in full once its finalizer has run, and Node
 * runs Node-API finalizers from the event loop (SetImmediate) after a GC: a loop that never
 * yields would time creation alone and pile up finalizers (and their memory) for later. The
 * turn itself costs a few microseconds per batch (the "empty" row), under 10 ns per operation.
 */
async function measure(label, size, batch, fn) {
  await settle()
  const bench = new Bench({ time, warmupTime: time / 4 })
  bench.add(label, async () => {
    for (let i = 0; i < batch; i++) fn()
    await turn()
  })
  await bench.run()
  const [task] = bench.tasks
  record(label, size, (task.result.latency.mean * 1e6) / batch)
}

let sink = 0
for (const [size, bytes] of SIZES) {
  const tensor = Tensor.zeros([bytes / 4], 'float32')
  const foreign = fromDLPack(tensor.__dlpack__({ copy: true })) // Rust-owned memory
  const array = tensor.data
  gc()
  await measure('empty (loop and event-loop turn only)', size, 1000, () => {
    sink += 1
  })
  await measure('shared owner: fromDLPack(t)', size, 1000, () => {
    sink += fromDLPack(tensor) === undefined ? 0 : 1
  })
  await measure('cached .data', size, 10000, () => {
    sink += tensor.data.length
  })
  await measure('export only: t.__dlpack__()', size, 1000, () => {
    sink += tensor.__dlpack__() === undefined ? 0 : 1
  })
  await measure('capsule round trip: fromDLPack(t.__dlpack__())', size, 1000, () => {
    sink += fromDLPack(tensor.__dlpack__()) === undefined ? 0 : 1
  })
  await measure('round trip + first metadata read (.shape)', size, 1000, () => {
    sink += fromDLPack(tensor.__dlpack__()).shape.length
  })
  await measure('first .data of foreign memory (round trip + external ArrayBuffer)', size, 100, () => {
    sink += fromDLPack(foreign.__dlpack__()).data.length
  })
  await measure('floor: tagged napi_external', size, 1000, () => {
    sink += native.benchTaggedExternal() === undefined ? 0 : 1
  })
  await measure('copy baseline: TypedArray.prototype.slice()', size, bytes >= 1 << 24 ? 1 : 100, () => {
    sink += array.slice().length
  })
  const ortLike = { type: 'float32', dims: [bytes / 4], data: array, location: 'cpu' }
  await measure('library tensor: fromDLPack(ortTensor)', size, 1000, () => {
    const imported = fromDLPack(ortLike)
    sink += imported.numel
    imported.dispose()
  })
  await measure('  its baseline: Tensor.from(data, dims)', size, 1000, () => {
    const wrapped = Tensor.from(ortLike.data, ortLike.dims)
    sink += wrapped.numel
    wrapped.dispose()
  })
  foreign.dispose()
  tensor.dispose()
}

const fmt = (ns) => (ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : ns >= 1e4 ? `${(ns / 1e3).toFixed(1)} µs` : `${ns.toFixed(0)} ns`)
const sizes = SIZES.map(([size]) => size)
console.log(`\nnode ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores${quick ? ' (quick)' : ''}`)
console.log(`| operation | ${sizes.join(' | ')} | slowest / fastest |`)
console.log(`|---|${sizes.map(() => '---:').join('|')}|---:|`)
for (const [task, bySize] of rows) {
  const values = sizes.map((size) => bySize.get(size))
  const ratio = Math.max(...values) / Math.min(...values)
  console.log(`| ${task} | ${values.map(fmt).join(' | ')} | ${ratio.toFixed(2)} |`)
}
if (sink === 0.5) console.log(sink) // keep results observable
