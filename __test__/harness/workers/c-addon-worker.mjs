// Worker script for __test__/abi/c-addon-deleters.spec.ts: loads the plain C addon and napi-dlpack in a
// worker_threads Worker, imports some C capsules into Tensors (never disposed), re-exports
// others into our own capsules left unconsumed (the imports disposed), and leaves other C
// capsules unconsumed, then exits. The main thread checks that every C deleter ran at env
// teardown. workerData: { addonPath, imported, reexported, unconsumed,
// exit: 'process.exit' | 'natural' | 'terminate' (stays alive until the parent terminates it),
// producerHook: boolean } (producerHook: the C addon releases its own unconsumed capsules in
// an env cleanup hook, as a producer must where the runtime skips their finalizers).
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const c = require(workerData.addonPath)
if (workerData.producerHook) c.releaseAtTeardown()
const { fromDLPack, externalBuffersAllowed } = require('../../../dist/index.js')

const before = c.deleterCalls()
const kept = []
for (let i = 0; i < workerData.imported; i++) {
  const versioned = i % 2 === 0
  const tensor = fromDLPack(c.makeTensor({ shape: [4, 8], versioned }))
  // touch the zero-copy view too, so an external ArrayBuffer holds the memory as well
  if (tensor.data[5] !== 5) throw new Error(`worker: bad value ${tensor.data[5]}`)
  kept.push(tensor)
}
for (let i = 0; i < workerData.reexported; i++) {
  const tensor = fromDLPack(c.makeTensor({ shape: [8], versioned: i % 2 === 1 }))
  kept.push(tensor.__dlpack__()) // only this capsule of ours holds the C tensor now
  tensor.dispose()
}
for (let i = 0; i < workerData.unconsumed; i++) {
  kept.push(c.makeTensor({ shape: [16], versioned: i % 2 === 1 }))
}
globalThis.keptAlive = kept
parentPort.postMessage({
  made: workerData.imported + workerData.reexported + workerData.unconsumed,
  deletedBeforeExit: c.deleterCalls() - before,
  externalBuffers: externalBuffersAllowed(),
  isCopy: kept.slice(0, workerData.imported).map((t) => t.isCopy),
})
// Leave with everything still referenced: only env teardown can release it. Either end the
// thread at once, let its event loop run dry, or wait to be terminated.
if (workerData.exit === 'process.exit') process.exit(0)
if (workerData.exit === 'terminate') setInterval(() => {}, 1000)
