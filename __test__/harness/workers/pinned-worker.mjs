// Worker for __test__/cuda/pinned.spec.ts (fake CUDA driver, a test double): pinned (cuda_host)
// tensors that live and die in a Worker.
//   workerData.mode 'leave': allocates pinned tensors and leaves them behind when the Worker
//     ends (one disposed, one alive, one alive with a cached `.data` view, one exported to a
//     capsule nobody consumes), reports their addresses, then ends.
//   workerData.mode 'claim': claims the transfer in workerData.transfer (a pinned tensor of the
//     main thread), writes 7s through its `.data` (zero-copy: the main thread sees them), reports
//     the address it sees, disposes it and ends.
import { createRequire } from 'node:module'
import { parentPort, workerData } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const { Tensor } = require('../../../dist/index.js')

if (workerData.mode === 'leave') {
  const disposed = Tensor.zeros([16], 'float32', { device: 'cuda_host' })
  disposed.dispose()
  const alive = Tensor.empty([1024], 'uint8', { device: 'cuda_host' })
  const viewed = Tensor.zeros([8], 'float64', { device: 'cuda_host' })
  // A cached JS view, where the runtime allows one (not in Electron mode).
  if (!process.env.NAPI_DLPACK_NO_EXTERNAL_BUFFERS) viewed.data.fill(1.5)
  const exported = Tensor.zeros([4], 'int32', { device: 'cuda_host' })
  const capsule = exported.__dlpack__()
  exported.dispose()
  globalThis.kept = [alive, viewed, capsule]
  parentPort.postMessage({ pointers: [alive.dataPointer, viewed.dataPointer].map(String) })
} else if (workerData.mode === 'claim') {
  const tensor = Tensor.fromTransfer(workerData.transfer)
  tensor.data.fill(7)
  parentPort.postMessage({ device: String(tensor.device), pointer: String(tensor.dataPointer) })
  tensor.dispose()
}
