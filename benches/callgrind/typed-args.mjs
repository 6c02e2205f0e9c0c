// Instructions per call of tensor arguments (benches/wall/typed-args.mjs's cases), counted by
// callgrind (valgrind): wall time on a shared 2-core machine is noise, instruction counts are
// not. Side by side, for 1, 3 and 8 arguments:
//
//   raw        a raw C callback of that arity (napi_get_cb_info only: the floor;
//              benches/callgrind/lookup-routes/lookup_routes.c)
//   napiEmpty  an empty napi-rs `#[napi]` function of that arity (plain objects, not converted)
//   hotEmpty   an empty hot function (napi_dlpack::hot_function!) of that arity
//   object     `#[napi]` with TensorArg arguments, given napi-dlpack Tensors
//   handle     the same given the Tensors' handles (`t.native`: an id external)
//   id         the same given the Tensors' ids (`t.id`: numbers)
//   hotObject  a hot function with TensorArg arguments, given Tensors
//   hotHandle  the same given handles
//   hotId      the same given ids
//   capsule, library, fromDLPack (1 and 3 only): a capsule per tensor, an ONNX Runtime-shaped
//              tensor through napi-dlpack's adapter, fromDLPack(ortLike) then borrowed
//
// Each case runs three times in its own `node --predictable` process (deterministic garbage
// collection), with LOW, MID and HIGH calls in batches of 1000, one event-loop turn between
// batches (capsule finalizers run there) and a closing collection. The count per call is the
// difference of two runs over the difference of their calls, reported for (LOW, MID) and
// (MID, HIGH): equal counts show LOW is past V8's warm-up (with the earlier LOW of 5,000 the
// floors were still moving).
//
//   node benches/callgrind/typed-args.mjs [case ...]     (needs valgrind; takes ~15 minutes)
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { batchedProgram, converged, instructions } from './runner.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const addonPath = join(root, 'target', 'consumer-addon', 'consumer_addon.node')
if (!existsSync(addonPath)) execFileSync('bash', [join(root, '__test__', 'native', 'consumer-addon', 'build.sh')], { stdio: 'inherit' })
execFileSync(
  'bash',
  [join(root, '__test__', 'native', 'c-addon', 'build-fixture.sh'), 'lookup-routes', 'benches/callgrind/lookup-routes/lookup_routes.c', 'lookup_routes.node'],
  { stdio: ['ignore', 'ignore', 'inherit'] },
)
const routesPath = join(root, 'target', 'lookup-routes', 'lookup_routes.node')

const LOW = 20_000
const MID = 60_000
const HIGH = 100_000

const ARITIES = [1, 3, 8]
const objects = (n) => ['o1', 'o2', 'o3', 'o4', 'o5', 'o6', 'o7', 'o8'].slice(0, n).join(', ')
const tensors = (n) => ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].slice(0, n).join(', ')
const handles = (n) => ['na', 'nb', 'nc', 'nd', 'ne', 'nf', 'ng', 'nh'].slice(0, n).join(', ')
const ids = (n) => ['ia', 'ib', 'ic', 'id', 'ie', 'if_', 'ig', 'ih'].slice(0, n).join(', ')
const rawFloor = { 1: 'floor', 3: 'floor3', 8: 'floor8' }

const CASES = {}
for (const n of ARITIES) {
  CASES[`raw${n}`] = `routes.${rawFloor[n]}(${objects(n)})`
  CASES[`napiEmpty${n}`] = `addon.benchFloor${n}(${objects(n)})`
  CASES[`hotEmpty${n}`] = `addon.benchHotEmpty${n}(${objects(n)})`
  CASES[`object${n}`] = `addon.benchTensorArg${n}(${tensors(n)})`
  CASES[`handle${n}`] = `addon.benchTensorArg${n}(${handles(n)})`
  CASES[`hotObject${n}`] = `addon.benchHot${n}(${tensors(n)})`
  CASES[`hotHandle${n}`] = `addon.benchHot${n}(${handles(n)})`
  CASES[`id${n}`] = `addon.benchTensorArg${n}(${ids(n)})`
  CASES[`hotId${n}`] = `addon.benchHot${n}(${ids(n)})`
}
CASES.capsule1 = 'addon.benchTensorArg1(a.__dlpack__())'
CASES.capsule3 = 'addon.benchTensorArg3(a.__dlpack__(), b.__dlpack__(), c.__dlpack__())'
// An ONNX Runtime-shaped tensor as it is: the crate's last resort, napi-dlpack's library
// adapter (a JS call that recognises it and makes a capsule, consumed by the argument).
CASES.library1 = 'addon.benchTensorArg1(ortLike)'
// What the caller wrote before the adapter: a Tensor over the same memory, borrowed.
CASES.fromDLPack1 = 'addon.benchTensorArg1(fromDLPack(ortLike))'

/** The program each process runs: N calls in batches of 1000, one event-loop turn between
 *  batches (capsule finalizers run there), and a closing collection. The function called is
 *  read into a local first, as a hot loop would: a napi-rs addon's own exports object is in
 *  V8's dictionary mode (its generated index.js copies the functions into a fast object), and
 *  looking a function up there costs ~80 instructions more than on the C floor's exports. */
function program(body, n) {
  const [, callee, args] = /^([\w.]+)\((.*)\)$/.exec(body)
  return batchedProgram(
    `const { Tensor, fromDLPack } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
const addon = require(${JSON.stringify(addonPath)})
const routes = require(${JSON.stringify(routesPath)})
const make = () => Tensor.from(new Float32Array(256), [16, 16])
const a = make(), b = make(), c = make(), d = make(), e = make(), f = make(), g = make(), h = make()
const na = a.native, nb = b.native, nc = c.native, nd = d.native, ne = e.native, nf = f.native, ng = g.native, nh = h.native
const ia = a.id, ib = b.id, ic = c.id, id = d.id, ie = e.id, if_ = f.id, ig = g.id, ih = h.id
const o1 = {}, o2 = {}, o3 = {}, o4 = {}, o5 = {}, o6 = {}, o7 = {}, o8 = {}
const ortLike = { type: 'float32', dims: [16, 16], location: 'cpu', data: new Float32Array(256) }
const callee = ${callee}`,
    `callee(${args})`,
    n,
  )
}

const count = (body) => (n) => instructions(process.execPath, ['--predictable', '--expose-gc', '-e', program(body, n)])

const chosen = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(CASES)
const results = {}
console.log(`node ${process.version}: instructions per call, ((n=${MID}) - (n=${LOW})) / ${MID - LOW} and ((n=${HIGH}) - (n=${MID})) / ${HIGH - MID}`)
for (const name of chosen) {
  const body = CASES[name]
  if (!body) throw new Error(`unknown case ${name} (${Object.keys(CASES).join(', ')})`)
  const { first, second, drift } = converged(count(body), LOW, MID, HIGH)
  results[name] = second
  console.log(`  ${name.padEnd(12)} ${first.toFixed(0).padStart(6)} ${second.toFixed(0).padStart(6)}  (drift ${drift >= 0 ? '+' : ''}${drift.toFixed(0)})  ${body}`)
}

console.log('\n| arguments | raw C floor | empty napi-rs | empty hot | object | handle | id | hot object | hot handle | hot id | hot handle / floor | hot id / floor | hot handle, per tensor above the floor | hot id, per tensor above the floor | handle, per tensor above empty napi-rs | id, per tensor above empty napi-rs |')
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
const cell = (value) => (value === undefined ? '' : value.toFixed(0))
const ratio = (value, floor) => (value !== undefined && floor !== undefined ? `${(value / floor).toFixed(2)}x` : '')
const above = (value, floor, n) => (value !== undefined && floor !== undefined ? ((value - floor) / n).toFixed(0) : '')
for (const n of ARITIES) {
  const get = (kind) => results[`${kind}${n}`]
  const floor = get('raw')
  const empty = get('napiEmpty')
  const columns = [get('raw'), get('napiEmpty'), get('hotEmpty'), get('object'), get('handle'), get('id'), get('hotObject'), get('hotHandle'), get('hotId')].map(cell)
  columns.push(ratio(get('hotHandle'), floor), ratio(get('hotId'), floor))
  columns.push(above(get('hotHandle'), floor, n), above(get('hotId'), floor, n), above(get('handle'), empty, n), above(get('id'), empty, n))
  console.log(`| ${n} | ${columns.join(' | ')} |`)
}
for (const n of [1, 3]) {
  const floor = results[`napiEmpty${n}`]
  for (const kind of ['capsule', 'library', 'fromDLPack']) {
    const value = results[`${kind}${n}`]
    if (floor !== undefined && value !== undefined) {
      console.log(`${kind}, ${n} argument${n > 1 ? 's' : ''}: ${((value - floor) / n).toFixed(0)} instructions per tensor above the empty napi-rs call`)
    }
  }
}
