// The workload that __test__/threads/valgrind/worker-teardown.mjs runs under valgrind memcheck: Workers
// that end while they still hold tensors, unconsumed capsules, zero-copy views of foreign
// memory, round-tripped capsules, and JS memory exported to (and still held by) the plain C
// addon, plus JS buffer references released from another thread, and the example Rust addon's
// capsules (the napi-dlpack crate inside another addon), and tensors handed between threads by
// transfer token. Everything must be freed at each Worker's teardown, so no block allocated
// through napi-dlpack may be definitely lost.
import { once } from 'node:events'
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

const { Tensor } = createRequire(import.meta.url)('../../../dist/index.js')

const addonPath = new URL('../../../target/c-addon/c_addon.node', import.meta.url).pathname
const consumerAddonPath = new URL('../../../target/consumer-addon/consumer_addon.node', import.meta.url).pathname

/** Runs one Worker to its end; rejects if it fails. */
async function run(url, options) {
  const worker = new Worker(url, options)
  // Both listeners first: the exit can be emitted in the same tick as the last message.
  const exited = once(worker, 'exit')
  const failed = once(worker, 'error').then(([error]) => {
    throw error
  })
  const [code] = await Promise.race([exited, failed])
  if (code !== 0) throw new Error(`worker ${url} exited with code ${code}`)
}

const fixtures = new URL('../../harness/workers/', import.meta.url)
await run(new URL('worker-tensors.mjs', fixtures), { workerData: { count: 10 } })
for (const exit of ['natural', 'process.exit']) {
  await run(new URL('c-addon-worker.mjs', fixtures), { workerData: { addonPath, imported: 4, unconsumed: 3, exit } })
}
await run(new URL('./held-exports-worker.mjs', import.meta.url), { workerData: { addonPath, count: 6 } })
// The crate inside another Rust addon: its capsules, imported, re-exported and left unconsumed.
await run(new URL('consumer-addon-worker.mjs', fixtures), { workerData: { addonPath: consumerAddonPath, each: 3, exit: 'natural' } })
// Transfer tokens: one left unclaimed (released at its sending Worker's teardown), one claimed
// here and released after its sender ended.
for (const claim of [false, true]) {
  const gate = new Int32Array(new SharedArrayBuffer(4))
  const startup = { op: 'makeForeign', key: 'own', shape: [16], disposeOwn: !claim, end: 'natural', gate }
  const worker = new Worker(new URL('transfer-worker.mjs', fixtures), { workerData: { addonPath, startup } })
  const exited = once(worker, 'exit')
  const [made] = await once(worker, 'message')
  if (made.error) throw new Error(`transfer worker: ${made.error.message}`)
  const claimed = claim ? Tensor.fromTransfer(made.transfer) : undefined
  Atomics.store(gate, 0, 1)
  Atomics.notify(gate, 0)
  await exited
  claimed?.dispose()
}
console.log('workload: done')
