// `node benches/wall/compare.mjs [checkout]`: the steady-state cost of the capsule path of one build
// (default: this checkout), for comparing builds on the same machine. Run it alternately on two
// checkouts (each built with `npm run build`), since this VM drifts by tens of percent over
// seconds. Each operation runs in batches of 1 000 followed by one event-loop turn inside the
// timed region, so capsule finalizers are paid where they are caused (see benches/wall/exchange.mjs).
import { createRequire } from 'node:module'
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(process.argv[2] ?? fileURLToPath(new URL('../..', import.meta.url)))
const require = createRequire(`${root}/`)
const { Tensor, fromDLPack } = require(`${root}/dist/index.js`)
// The generated binding: dist/binding/ (copied from lib/binding/); checkouts built before it moved
// there have it at their root.
const native = require(existsSync(`${root}/dist/binding/index.js`) ? `${root}/dist/binding/index.js` : `${root}/index.js`)

const tensor = Tensor.zeros([256], 'float32')
const turn = () => new Promise((done) => setImmediate(done))
let sink = 0

async function nsPerOp(fn, rounds = 300) {
  for (let r = 0; r < 50; r++) {
    for (let i = 0; i < 1000; i++) fn()
    await turn()
  }
  const start = process.hrtime.bigint()
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < 1000; i++) fn()
    await turn()
  }
  return Math.round(Number(process.hrtime.bigint() - start) / (rounds * 1000))
}

const result = {
  floor: await nsPerOp(() => (sink += native.benchTaggedExternal() ? 1 : 0)),
  export: await nsPerOp(() => (sink += tensor.__dlpack__() ? 1 : 0)),
  roundTrip: await nsPerOp(() => (sink += fromDLPack(tensor.__dlpack__()) ? 1 : 0)),
  roundTripShape: await nsPerOp(() => (sink += fromDLPack(tensor.__dlpack__()).shape.length)),
}
console.log(JSON.stringify({ root, ...result }))
if (sink === 0.5) console.log(sink) // keep results observable
