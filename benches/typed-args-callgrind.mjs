// Instructions per call of the typed-argument cases of benches/typed-args.mjs, counted by
// callgrind (valgrind): wall time on a shared 2-core machine is noise, instruction counts are
// not. Each case runs twice in its own `node --predictable` process (deterministic garbage
// collection: without it, when collections happen moves the counts by thousands), with LOW and
// HIGH calls, and the difference divided by HIGH - LOW is reported, so start-up, warm-up and
// teardown cancel out.
//
//   node benches/typed-args-callgrind.mjs [case ...]     (needs valgrind; takes minutes)
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { instructions, perOperation } from './callgrind.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')
const addonPath = join(root, 'target', 'consumer-addon', 'consumer_addon.node')
if (!existsSync(addonPath)) execFileSync('bash', [join(root, '__test__', 'native', 'consumer-addon', 'build.sh')], { stdio: 'inherit' })

const LOW = 5000
const HIGH = 25000
const CASES = {
  floor1: 'addon.benchFloor1(o1)',
  borrowed1: 'addon.benchTensorArg1(a)',
  // The tensor's handle passed as the argument itself (`Tensor.native`): no property lookup.
  handle1: 'addon.benchTensorArg1(na)',
  capsule1: 'addon.benchTensorArg1(a.__dlpack__())',
  floor3: 'addon.benchFloor3(o1, o2, o3)',
  borrowed3: 'addon.benchTensorArg3(a, b, c)',
  handle3: 'addon.benchTensorArg3(na, nb, nc)',
  capsule3: 'addon.benchTensorArg3(a.__dlpack__(), b.__dlpack__(), c.__dlpack__())',
  // An ONNX Runtime-shaped tensor as it is: the crate's last resort, napi-dlpack's library
  // adapter (a JS call that recognises it and makes a capsule, consumed by the argument).
  library1: 'addon.benchTensorArg1(ortLike)',
  // What the caller wrote before the adapter: a Tensor over the same memory, borrowed.
  fromDLPack1: 'addon.benchTensorArg1(fromDLPack(ortLike))',
}

/** The program each process runs: N calls in batches of 1000, one event-loop turn between
 *  batches (capsule finalizers run there), and a closing collection. */
function program(body, n) {
  return `
const { Tensor, fromDLPack } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
const addon = require(${JSON.stringify(addonPath)})
const a = Tensor.from(new Float32Array(256), [16, 16]), b = Tensor.from(new Float32Array(256), [16, 16]), c = Tensor.from(new Float32Array(256), [16, 16])
const na = a.native, nb = b.native, nc = c.native
const o1 = {}, o2 = {}, o3 = {}
const ortLike = { type: 'float32', dims: [16, 16], location: 'cpu', data: new Float32Array(256) }
const turn = () => new Promise((resolve) => setImmediate(resolve))
;(async () => {
  for (let done = 0; done < ${n}; done += 1000) {
    for (let i = 0; i < 1000; i++) ${body}
    await turn()
  }
  globalThis.gc(); await turn()
})()`
}

const count = (body) => (n) => instructions(process.execPath, ['--predictable', '--expose-gc', '-e', program(body, n)])

const chosen = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(CASES)
const results = {}
for (const name of chosen) {
  const body = CASES[name]
  if (!body) throw new Error(`unknown case ${name} (${Object.keys(CASES).join(', ')})`)
  results[name] = perOperation(count(body), LOW, HIGH)
  console.log(`${name}: ${results[name].toFixed(0)} instructions per call`)
}
for (const arity of [1, 3]) {
  const floor = results[`floor${arity}`]
  for (const kind of ['borrowed', 'handle', 'capsule', 'library']) {
    const value = results[`${kind}${arity}`]
    if (floor !== undefined && value !== undefined) {
      console.log(`${kind}, ${arity} argument${arity > 1 ? 's' : ''}: ${((value - floor) / arity).toFixed(0)} instructions per tensor above the floor`)
    }
  }
}
