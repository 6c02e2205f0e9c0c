// `npm run bench` (part): the cost of tensor arguments of functions built on
// `napi_dlpack::arg::TensorArg` (examples/consumer-addon: `#[napi]` functions in src/typed.rs,
// hot functions in src/hot.rs), with 1, 3 and 8 tensor arguments, side by side with the floors
// of the same call shape:
//
//   raw C floor    a raw Node-API callback in C of that arity (napi_get_cb_info only;
//                  benches/callgrind/lookup-routes/lookup_routes.c)
//   empty napi-rs  an empty #[napi] call taking plain objects
//   empty hot      an empty hot function (napi_dlpack::hot_function!) taking plain objects
//   Tensor         napi-dlpack Tensors, borrowed through the exchange table (no capsule)
//   handle         the Tensors' native handles (`t.native`: id externals), borrowed by id
//   id             the Tensors' ids (`t.id`: numbers), borrowed by id
//   capsule        a capsule per tensor: export + consume (1 and 3 arguments)
//
// Every case runs in batches of BATCH calls followed by one event-loop turn (capsule finalizers
// run there, inside the timed region); the cases are interleaved round by round and the table
// reports the median over rounds of ns per call, and per tensor above the raw C floor and above
// the empty call of its kind.
//
//   node --expose-gc benches/wall/typed-args.mjs [--quick]
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const require = createRequire(import.meta.url)
const addonPath = join(root, 'target', 'consumer-addon', 'consumer_addon.node')
try {
  execFileSync('bash', [join(root, '__test__', 'native', 'consumer-addon', 'build.sh')], { stdio: 'inherit' })
} catch (error) {
  // A machine without cargo can still run a copied build.
  if (!existsSync(addonPath)) throw error
  console.warn('consumer-addon: could not rebuild, using the existing build')
}
const { Tensor } = require('../../dist/index.js')
const addon = require(addonPath)
execFileSync(
  'bash',
  [join(root, '__test__', 'native', 'c-addon', 'build-fixture.sh'), 'lookup-routes', 'benches/callgrind/lookup-routes/lookup_routes.c', 'lookup_routes.node'],
  { stdio: ['ignore', 'ignore', 'inherit'] },
)
const routes = require(join(root, 'target', 'lookup-routes', 'lookup_routes.node'))

const quick = process.argv.includes('--quick')
const ROUNDS = quick ? 5 : 21
const BATCH = 2000
const BATCHES = quick ? 5 : 20
const gc = globalThis.gc ?? (() => {})
const turn = () => new Promise((resolve) => setImmediate(resolve))

const make = () => Tensor.from(new Float32Array(256), [16, 16])
const [a, b, c, d, e, f, g, h] = [make(), make(), make(), make(), make(), make(), make(), make()]
const [na, nb, nc, nd, ne, nf, ng, nh] = [a, b, c, d, e, f, g, h].map((x) => x.native)
const [ia, ib, ic, id, ie, if_, ig, ih] = [a, b, c, d, e, f, g, h].map((x) => x.id)
const [o1, o2, o3, o4, o5, o6, o7, o8] = [{}, {}, {}, {}, {}, {}, {}, {}]
// The functions, read into locals as a hot loop would (a napi-rs addon's own exports object is
// in V8's dictionary mode: a lookup there costs more than on the C floor's exports).
const { floor, floor3, floor8 } = routes
const { benchFloor1, benchFloor3, benchFloor8, benchHotEmpty1, benchHotEmpty3, benchHotEmpty8 } = addon
const { benchTensorArg1, benchTensorArg3, benchTensorArg8, benchHot1, benchHot3, benchHot8 } = addon
const s = (n) => (n > 1 ? 's' : '')

/** Each case: [name, arity, kind, body running `n` calls]. Written out, not generated, so each
 *  loop calls one function with one argument shape (what a hot loop in an application does). */
const cases = [
  ['raw C floor', 1, 'raw', (n) => { for (let i = 0; i < n; i++) floor(o1) }],
  ['empty napi-rs', 1, 'napiEmpty', (n) => { for (let i = 0; i < n; i++) benchFloor1(o1) }],
  ['empty hot', 1, 'hotEmpty', (n) => { for (let i = 0; i < n; i++) benchHotEmpty1(o1) }],
  ['napi-rs, Tensor', 1, 'object', (n) => { for (let i = 0; i < n; i++) benchTensorArg1(a) }],
  ['napi-rs, handle (t.native)', 1, 'handle', (n) => { for (let i = 0; i < n; i++) benchTensorArg1(na) }],
  ['napi-rs, id (t.id)', 1, 'id', (n) => { for (let i = 0; i < n; i++) benchTensorArg1(ia) }],
  ['hot, Tensor', 1, 'hotObject', (n) => { for (let i = 0; i < n; i++) benchHot1(a) }],
  ['hot, handle (t.native)', 1, 'hotHandle', (n) => { for (let i = 0; i < n; i++) benchHot1(na) }],
  ['hot, id (t.id)', 1, 'hotId', (n) => { for (let i = 0; i < n; i++) benchHot1(ia) }],
  ['napi-rs, capsule', 1, 'capsule', (n) => { for (let i = 0; i < n; i++) benchTensorArg1(a.__dlpack__()) }],
  ['raw C floor', 3, 'raw', (n) => { for (let i = 0; i < n; i++) floor3(o1, o2, o3) }],
  ['empty napi-rs', 3, 'napiEmpty', (n) => { for (let i = 0; i < n; i++) benchFloor3(o1, o2, o3) }],
  ['empty hot', 3, 'hotEmpty', (n) => { for (let i = 0; i < n; i++) benchHotEmpty3(o1, o2, o3) }],
  ['napi-rs, Tensor', 3, 'object', (n) => { for (let i = 0; i < n; i++) benchTensorArg3(a, b, c) }],
  ['napi-rs, handle (t.native)', 3, 'handle', (n) => { for (let i = 0; i < n; i++) benchTensorArg3(na, nb, nc) }],
  ['napi-rs, id (t.id)', 3, 'id', (n) => { for (let i = 0; i < n; i++) benchTensorArg3(ia, ib, ic) }],
  ['hot, Tensor', 3, 'hotObject', (n) => { for (let i = 0; i < n; i++) benchHot3(a, b, c) }],
  ['hot, handle (t.native)', 3, 'hotHandle', (n) => { for (let i = 0; i < n; i++) benchHot3(na, nb, nc) }],
  ['hot, id (t.id)', 3, 'hotId', (n) => { for (let i = 0; i < n; i++) benchHot3(ia, ib, ic) }],
  ['napi-rs, capsule', 3, 'capsule', (n) => { for (let i = 0; i < n; i++) benchTensorArg3(a.__dlpack__(), b.__dlpack__(), c.__dlpack__()) }],
  ['raw C floor', 8, 'raw', (n) => { for (let i = 0; i < n; i++) floor8(o1, o2, o3, o4, o5, o6, o7, o8) }],
  ['empty napi-rs', 8, 'napiEmpty', (n) => { for (let i = 0; i < n; i++) benchFloor8(o1, o2, o3, o4, o5, o6, o7, o8) }],
  ['empty hot', 8, 'hotEmpty', (n) => { for (let i = 0; i < n; i++) benchHotEmpty8(o1, o2, o3, o4, o5, o6, o7, o8) }],
  ['napi-rs, Tensor', 8, 'object', (n) => { for (let i = 0; i < n; i++) benchTensorArg8(a, b, c, d, e, f, g, h) }],
  ['napi-rs, handle (t.native)', 8, 'handle', (n) => { for (let i = 0; i < n; i++) benchTensorArg8(na, nb, nc, nd, ne, nf, ng, nh) }],
  ['napi-rs, id (t.id)', 8, 'id', (n) => { for (let i = 0; i < n; i++) benchTensorArg8(ia, ib, ic, id, ie, if_, ig, ih) }],
  ['hot, Tensor', 8, 'hotObject', (n) => { for (let i = 0; i < n; i++) benchHot8(a, b, c, d, e, f, g, h) }],
  ['hot, handle (t.native)', 8, 'hotHandle', (n) => { for (let i = 0; i < n; i++) benchHot8(na, nb, nc, nd, ne, nf, ng, nh) }],
  ['hot, id (t.id)', 8, 'hotId', (n) => { for (let i = 0; i < n; i++) benchHot8(ia, ib, ic, id, ie, if_, ig, ih) }],
].map(([what, arity, kind, body]) => [`${what}, ${arity} argument${s(arity)}`, arity, kind, body])

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
for (const [, , , body] of cases) await sample(body)
const samples = new Map(cases.map(([name]) => [name, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, , , body] of cases) {
    gc()
    await turn()
    samples.get(name).push(await sample(body))
  }
}

const results = new Map(cases.map(([name, arity, kind]) => [name, { arity, kind, ns: median(samples.get(name)) }]))
const find = (arity, kind) => [...results.values()].find((r) => r.arity === arity && r.kind === kind)?.ns
console.log(`\n### tensor arguments (Node ${process.versions.node}; median of ${ROUNDS} interleaved rounds of ${BATCH * BATCHES} calls)\n`)
console.log('| call | ns per call | above the raw C floor | per tensor above the raw C floor | per tensor above the empty call of its kind |')
console.log('|---|---:|---:|---:|---:|')
for (const [name, { arity, kind, ns }] of results) {
  const floor = find(arity, 'raw')
  const empty = kind.startsWith('hot') ? find(arity, 'hotEmpty') : find(arity, 'napiEmpty')
  const tensorCase = !['raw', 'napiEmpty', 'hotEmpty'].includes(kind)
  const above = kind === 'raw' ? '' : (ns - floor).toFixed(1)
  const perTensor = tensorCase ? ((ns - floor) / arity).toFixed(1) : ''
  const aboveEmpty = tensorCase ? ((ns - empty) / arity).toFixed(1) : ''
  console.log(`| ${name} | ${ns.toFixed(1)} | ${above} | ${perTensor} | ${aboveEmpty} |`)
}
for (const arity of [1, 3, 8]) {
  const floor = find(arity, 'raw')
  const empty = find(arity, 'napiEmpty')
  console.log(
    `\n${arity} argument${s(arity)}: hot handle / raw C floor ${(find(arity, 'hotHandle') / floor).toFixed(2)}x, hot id / raw C floor ${(find(arity, 'hotId') / floor).toFixed(2)}x; ` +
      `napi-rs above the empty napi-rs call: by handle ${(find(arity, 'handle') - empty).toFixed(1)} ns, by id ${(find(arity, 'id') - empty).toFixed(1)} ns`,
  )
}
