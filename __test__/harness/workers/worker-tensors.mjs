// Worker for lifetime.spec.ts: makes tensors, capsules and views, keeps them alive, reports,
// and exits without disposing anything (or, with workerData.exit === 'terminate', waits to be
// terminated). Env teardown must release them all.
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const { Tensor, fromDLPack } = require('../../../dist/index.js')
const native = require('../../../dist/binding/index.js')

const kept = []
for (let i = 0; i < workerData.count; i++) {
  const tensor = Tensor.zeros([8])
  // An unconsumed capsule, a copy viewed from JS, and a round trip whose consumed capsule
  // became the new tensor's handle: all released by env teardown.
  kept.push(tensor, tensor.__dlpack__(), fromDLPack(tensor.__dlpack__({ copy: true })).data)
  kept.push(fromDLPack(Tensor.zeros([4]).__dlpack__()))
}
parentPort.postMessage({ made: workerData.count, live: native.nativeStats().liveStorages })
globalThis.kept = kept
if (workerData.exit === 'terminate') setInterval(() => {}, 1000)
