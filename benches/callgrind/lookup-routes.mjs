// What each Node-API route from a JS value to a native pointer adds to a native call, in
// instructions (callgrind): the routes a borrowed tensor argument could take (issue 13's goal
// is 50 ns per tensor above an empty call). The routes are the plain C functions of
// benches/callgrind/lookup-routes/lookup_routes.c, so only Node-API is counted, none of this package's
// code. Each case runs twice in its own `node --predictable` process, with LOW and HIGH calls;
// the difference divided by HIGH - LOW is the cost per call, and the floor's is subtracted.
// Then wall time in this process: medians of 40 interleaved rounds of 200,000 calls per route.
//
//   node benches/callgrind/lookup-routes.mjs     (needs valgrind and a C compiler; run it with
//                                                 another node binary to measure that version)
import { execFileSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { instructions, perOperation } from './runner.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
execFileSync(
  'bash',
  [join(root, '__test__', 'native', 'c-addon', 'build-fixture.sh'), 'lookup-routes', 'benches/callgrind/lookup-routes/lookup_routes.c', 'lookup_routes.node'],
  { stdio: ['ignore', 'ignore', 'inherit'] },
)
const addonPath = join(root, 'target', 'lookup-routes', 'lookup_routes.node')

const LOW = 20_000
const HIGH = 220_000
const ROUTES = {
  floor: 'the floor: an empty native call of one argument',
  viaSymbol: 'a tagged external under a registered symbol (what Tensor exposes now)',
  viaTagUnwrap: 'the object itself type-tagged and wrapped (napi_check_object_type_tag + napi_unwrap)',
  viaUnwrapOnly: 'napi_unwrap alone (cannot tell our wrap from another addon\'s: a lower bound)',
  viaExternalArg: 'the tagged external passed as the argument itself (`f(t.native)`, not `f(t)`)',
}

function program(route, n) {
  return `
    const routes = require(${JSON.stringify(addonPath)})
    class Tensor { constructor() { this.shape = [2, 3]; this.dtype = 'float32' } }
    const t = new Tensor()
    const external = routes.setup(t, Symbol.for('__dlpack_napi_exchange_api__'))
    const arg = ${JSON.stringify(route)} === 'viaExternalArg' ? external : t
    const f = routes[${JSON.stringify(route)}]
    for (let i = 0; i < ${n}; i++) f(arg)
    const expected = ${JSON.stringify(route)} === 'floor' ? 0 : ${n}
    if (routes.lookups() !== expected) throw new Error('${route}: ' + routes.lookups() + ' lookups, not ' + expected)
  `
}


console.log(`node ${process.version}: instructions per call ((n=${HIGH}) - (n=${LOW})) / ${HIGH - LOW}`)
let floor = 0
for (const [route, what] of Object.entries(ROUTES)) {
  const perCall = perOperation((n) => instructions(process.execPath, ['--predictable', '-e', program(route, n)]), LOW, HIGH)
  if (route === 'floor') floor = perCall
  const above = route === 'floor' ? '' : `  (+${(perCall - floor).toFixed(0)} above the floor)`
  console.log(`  ${route.padEnd(15)} ${perCall.toFixed(0).padStart(6)}${above}  ${what}`)
}

const routes = (await import('node:module')).createRequire(import.meta.url)(addonPath)
class Tensor {
  constructor() {
    this.shape = [2, 3]
  }
}
const t = new Tensor()
const external = routes.setup(t, Symbol.for('__dlpack_napi_exchange_api__'))
const CALLS = 200_000
const ROUNDS = 40
const samples = Object.fromEntries(Object.keys(ROUTES).map((route) => [route, []]))
// Round 0 warms every route up and is not kept.
for (let round = 0; round <= ROUNDS; round++) {
  for (const route of Object.keys(ROUTES)) {
    const f = routes[route]
    const arg = route === 'viaExternalArg' ? external : t
    const start = process.hrtime.bigint()
    for (let i = 0; i < CALLS; i++) f(arg)
    const ns = Number(process.hrtime.bigint() - start) / CALLS
    if (round > 0) samples[route].push(ns)
  }
}
const median = (values) => values.sort((a, b) => a - b)[values.length >> 1]
const wallFloor = median(samples.floor)
console.log(`wall: median ns per call over ${ROUNDS} interleaved rounds of ${CALLS} calls`)
for (const route of Object.keys(ROUTES)) {
  const ns = median(samples[route])
  const above = route === 'floor' ? '' : `  (+${(ns - wallFloor).toFixed(1)} above the floor)`
  console.log(`  ${route.padEnd(15)} ${ns.toFixed(1).padStart(6)}${above}`)
}
