// Worker for __test__/threads/valgrind/workload.mjs: JS-memory tensors exported to the plain C addon.
// Half are released by the C addon on another thread (their JS references go through the
// release queue), half are still held by C when the Worker ends (their references must be
// deleted at teardown, and the C finalizer that releases them later must not touch them again).
import { createRequire } from 'node:module'
import { workerData } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const c = require(workerData.addonPath)
const { Tensor } = require('../../../dist/index.js')

const held = []
for (let i = 0; i < workerData.count; i++) {
  const tensor = Tensor.from(new Float32Array(16).fill(i))
  const consumed = c.consume(tensor.__dlpack__())
  tensor.dispose()
  if (i % 2 === 0) {
    if (!c.releaseOnThread(consumed)) throw new Error('the C addon held no tensor')
  } else {
    held.push(consumed)
  }
}
globalThis.held = held
