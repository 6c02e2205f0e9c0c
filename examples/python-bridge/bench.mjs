// `node --expose-gc bench.mjs`: what the bridge costs against what node-calls-python offers
// without it, measured in the same run. Rounds interleave the operations; the table reports the
// median over rounds of the mean microseconds per operation (one operation = one py.callSync plus
// the exchange, for a uint8 array of each size).
//
//   empty call            py.callSync of a function returning 0 (the floor of every row)
//   numpy -> Node, bridge     fromDLPack(bridge.fromPython(token)) of numpy's array, disposed
//   numpy -> Node, bytes      array.tobytes() returned: copied by numpy, then by node-calls-python
//   numpy -> Node, array      the ndarray returned as is: node-calls-python builds a JS array
//   Node -> numpy, bridge     bridge.toPython(tensor), np.from_dlpack on the Python side
//   Node -> numpy, TypedArray tensor.data passed: node-calls-python copies it into bytes
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const here = dirname(fileURLToPath(import.meta.url))
const bridge = require('./index.js')
const { Tensor, fromDLPack } = require(join(here, '..', '..', 'dist', 'index.js'))

const py = bridge.loadInterpreter()
const m = py.importSync(join(here, 'bench.py'))
const quick = process.argv.includes('--quick')
const ROUNDS = quick ? 3 : 9
const SIZES = [
  ['1 KiB', 1 << 10],
  ['1 MiB', 1 << 20],
  ['6 MiB (1920x1080x3)', 1920 * 1080 * 3],
]

function operations(name, nbytes) {
  const tensor = Tensor.from(new Uint8Array(nbytes).fill(7), [nbytes])
  const ops = {
    'empty call': () => py.callSync(m, 'nothing'),
    'numpy -> Node, bridge': () => fromDLPack(bridge.fromPython(py.callSync(m, 'export', name))).dispose(),
    'numpy -> Node, bytes': () => Tensor.from(new Uint8Array(py.callSync(m, 'as_bytes', name)), [nbytes]),
    'Node -> numpy, bridge': () => py.callSync(m, 'first_of_token', bridge.toPython(tensor)),
    'Node -> numpy, TypedArray': () => py.callSync(m, 'first_of_bytes', tensor.data),
  }
  // Element by element: only where it ends in reasonable time.
  if (nbytes <= 1 << 10) ops['numpy -> Node, array'] = () => Tensor.from(Uint8Array.from(py.callSync(m, 'as_list', name)), [nbytes])
  return ops
}

/** Mean microseconds per call of `fn` over enough calls to take about `budgetMs`. */
function time(fn, budgetMs) {
  let calls = 0
  const start = process.hrtime.bigint()
  const deadline = start + BigInt(budgetMs * 1e6)
  let now = start
  do {
    fn()
    calls++
    now = process.hrtime.bigint()
  } while (now < deadline)
  return Number(now - start) / 1e3 / calls
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const rows = []
for (const [label, nbytes] of SIZES) {
  const name = `a${nbytes}`
  py.callSync(m, 'make', name, nbytes)
  const ops = operations(name, nbytes)
  for (const fn of Object.values(ops)) fn() // warm up
  const samples = Object.fromEntries(Object.keys(ops).map((op) => [op, []]))
  for (let round = 0; round < ROUNDS; round++) {
    for (const [op, fn] of Object.entries(ops)) {
      samples[op].push(time(fn, quick ? 50 : 200))
      globalThis.gc?.()
    }
  }
  for (const [op, values] of Object.entries(samples)) rows.push({ size: label, operation: op, 'median µs/op': +median(values).toFixed(2) })
}
console.table(rows)
if (bridge.pending() !== 0) throw new Error(`${bridge.pending()} tokens left unclaimed`)
