// Child process for __test__/cuda/release.spec.ts (fake driver, FAKE_CUDA_DEFERRED=1): imports a foreign CUDA
// tensor from the cuda-peer whose deleter takes 500 ms, queues a copy out of it (which does not
// run: deferred mode) and disposes it, so the deleter is handed to the release thread; then the
// process ends at once (argv[2]: 'natural', or 'exit' for process.exit(0)), or (argv[2]:
// 'worker') a Worker does all that and ends, and this thread prints the peer's deleter count
// when the Worker's exit is reported. The peer prints its count again from an atexit handler,
// which runs after the environments' cleanup hooks.
import { createRequire } from 'node:module'
import { Worker, isMainThread, parentPort } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const { fromDLPack } = require('../../../dist/index.js')
const native = require('../../../dist/binding/index.js')
const peer = require('../../../target/cuda-peer/cuda_peer.node')
const mode = isMainThread ? process.argv[2] : 'in-worker'

if (mode === 'worker') {
  peer.printDeleterCallsAtExit()
  const worker = new Worker(new URL(import.meta.url))
  worker.on('message', (report) => console.log(JSON.stringify(report)))
  worker.on('exit', () => console.log(`deleter-calls-after-worker-exit ${peer.deleterCalls()}`))
} else {
  if (mode !== 'in-worker') peer.printDeleterCallsAtExit()
  peer.setDeleterDelay(500)
  const ptr = peer.alloc(16)
  peer.upload(ptr, new Float32Array([1, 2, 3, 4]))
  const foreign = fromDLPack(peer.makeTensor({ ptr, shape: [4] })) // owned: the deleter frees ptr
  const copy = foreign.to('cuda:0', { copy: true }) // queued, reads the peer's memory
  foreign.dispose() // the deleter now waits for the copy, on the release thread
  const report = { deleted: peer.deleterCalls(), pending: native.cudaReleaseStats().pending }
  if (mode === 'in-worker') parentPort.postMessage(report)
  else console.log(JSON.stringify(report))
  globalThis.kept = copy
  if (mode === 'exit') process.exit(0)
}
