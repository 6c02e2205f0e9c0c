// `npm run bench` (part): the cost of tensor arguments of a `#[napi]` function built on
// `napi_dlpack::arg::TensorArg` (examples/consumer-addon, src/typed.rs), with 1 and 3 tensor
// arguments, against the floor of the same call shape:
//
//   floor      benchFloor1(o) / benchFloor3(o, o, o)   an empty #[napi] call taking plain objects
//   borrowed   benchTensorArg1(t) / (t, t, t)          napi-dlpack Tensors, borrowed through the
//                                                      exchange table (no capsule)
//   handle     benchTensorArg1(t.native) / ...         the Tensors' native handles (Tensor.native),
//                                                      borrowed with no property lookup
//   capsule    benchTensorArg1(t.__dlpack__()) / ...   a capsule per tensor: export + consume
//
// Every case runs in batches of BATCH calls followed by one event-loop turn (capsule finalizers
// run there, inside the timed region); the cases are interleaved round by round and the table
// reports the median over rounds of ns per call, and per tensor above the floor.
//
//   node --expose-gc benches/typed-args.mjs [--quick]
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')
const require = createRequire(import.meta.url)
const addonPath = join(root, 'target', 'consumer-addon', 'consumer_addon.node')
try {
  execFileSync('bash', [join(root, '__test__', 'native', 'consumer-addon', 'build.sh')], { stdio: 'inherit' })
} catch (error) {
  // A machine without cargo can still run a copied build.
  if (!existsSync(addonPath)) throw error
  console.warn('consumer-addon: could not rebuild, using the existing build')
}
const { Tensor } = require('../dist/index.js')
const addon = require(addonPath)

const quick = process.argv.includes('--quick')
const ROUNDS = quick ? 5 : 21
const BATCH = 2000
const BATCHES = quick ? 5 : 20
const gc = globalThis.gc ?? (() => {})
const turn = () => new Promise((resolve) => setImmediate(resolve))

const a = Tensor.from(new Float32Array(256), [16, 16])
const b = Tensor.from(new Float32Array(256), [16, 16])
const c = Tensor.from(new Float32Array(256), [16, 16])
const [na, nb, nc] = [a.native, b.native, c.native]
const o1 = {}
const o2 = {}
const o3 = {}

/** Each case: [name, tensors per call, body running `n` calls]. */
const cases = [
  ['floor, 1 argument', 1, (n) => { for (let i = 0; i < n; i++) addon.benchFloor1(o1) }],
  ['borrowed Tensor, 1 argument', 1, (n) => { for (let i = 0; i < n; i++) addon.benchTensorArg1(a) }],
  ['handle (Tensor.native), 1 argument', 1, (n) => { for (let i = 0; i < n; i++) addon.benchTensorArg1(na) }],
  ['capsule, 1 argument', 1, (n) => { for (let i = 0; i < n; i++) addon.benchTensorArg1(a.__dlpack__()) }],
  ['floor, 3 arguments', 3, (n) => { for (let i = 0; i < n; i++) addon.benchFloor3(o1, o2, o3) }],
  ['borrowed Tensor, 3 arguments', 3, (n) => { for (let i = 0; i < n; i++) addon.benchTensorArg3(a, b, c) }],
  ['handle (Tensor.native), 3 arguments', 3, (n) => { for (let i = 0; i < n; i++) addon.benchTensorArg3(na, nb, nc) }],
  ['capsule, 3 arguments', 3, (n) => { for (let i = 0; i < n; i++) addon.benchTensorArg3(a.__dlpack__(), b.__dlpack__(), c.__dlpack__()) }],
]

async function sample(body) {
  const started = process.hrtime.bigint()
  for (let k = 0; k < BATCHES; k++) {
    body(BATCH)
    await turn()
  }
  return Number(process.hrtime.bigint() - started) / (BATCH * BATCHES)
}

const median = (values) => {
  const sorted = [...values].sort((x, y) => x - y)
  return sorted[Math.floor(sorted.length / 2)]
}

// Warm-up (JIT, inline caches, the addon's lazy state).
for (const [, , body] of cases) await sample(body)
const samples = new Map(cases.map(([name]) => [name, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, , body] of cases) {
    gc()
    await turn()
    samples.get(name).push(await sample(body))
  }
}

const results = new Map(cases.map(([name, arity]) => [name, { arity, ns: median(samples.get(name)) }]))
const floorOf = (arity) => results.get(`floor, ${arity} argument${arity > 1 ? 's' : ''}`).ns
console.log(`\n### tensor arguments of a #[napi] function (Node ${process.versions.node}; median of ${ROUNDS} interleaved rounds of ${BATCH * BATCHES} calls)\n`)
console.log('| call | ns per call | ns per tensor above the floor |')
console.log('|---|---:|---:|')
for (const [name, { arity, ns }] of results) {
  const above = name.startsWith('floor') ? '' : ((ns - floorOf(arity)) / arity).toFixed(1)
  console.log(`| ${name} | ${ns.toFixed(1)} | ${above} |`)
}
const ratio = results.get('borrowed Tensor, 3 arguments').ns / floorOf(3)
console.log(`\nborrowed 3-tensor call / floor: ${ratio.toFixed(2)}x`)
const handleRatio = results.get('handle (Tensor.native), 3 arguments').ns / floorOf(3)
console.log(`handle 3-tensor call / floor: ${handleRatio.toFixed(2)}x`)
