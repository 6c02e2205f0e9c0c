// Worker for __test__/abi/consumer-addon.spec.ts: the example Rust addon (built on the napi-dlpack
// crate) exports matrices into capsules in a Worker; some are left unconsumed, some imported
// into Tensors and kept, some re-exported into our capsules and left unconsumed. The Worker
// then ends (workerData.exit: 'natural' | 'terminate') and env teardown must free every matrix:
// the crate's capsules through the crate's cleanup hook, ours through napi-dlpack's (and the
// crate's cached symbols, through its hooks).
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const addon = require(workerData.addonPath)
const { fromDLPack } = require('../../../dist/index.js')

const kept = []
for (let i = 0; i < workerData.each; i++) {
  kept.push(addon.makeMatrix(4, 4, 'float32')) // the crate's capsule, unconsumed
  const imported = fromDLPack(addon.makeMatrix(2, 8, 'float64'))
  void imported.data
  kept.push(imported) // imported into a tensor, kept
  const reexported = fromDLPack(addon.makeTransposedMatrix(3, 5, 'float32', { legacy: true }))
  kept.push(reexported.__dlpack__()) // our capsule holding it, unconsumed
  reexported.dispose()
}
// A library tensor through the crate's typed argument: the crate keeps the library adapter's key
// in a reference of this env, which the env's teardown must delete (the valgrind check).
addon.inspect({ type: 'float32', dims: [2], location: 'cpu', data: new Float32Array(2) })
globalThis.kept = kept
parentPort.postMessage({ made: 3 * workerData.each })
if (workerData.exit === 'terminate') setInterval(() => {}, 1000)
