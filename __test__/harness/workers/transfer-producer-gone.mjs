// Child process for __test__/threads/workers.spec.ts: the C addon (the producer) is loaded only in a
// Worker, which makes a tensor, sends it by transfer token and ends; this thread claims it, and
// releases it after the Worker is gone, when Node has unloaded the addons only that Worker
// loaded. Prints one JSON line: { code, values, deleterCalls } (deleterCalls read by loading the
// C addon afterwards: its counter survives only if the library stayed mapped).
import { once } from 'node:events'
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

const require = createRequire(import.meta.url)
const { Tensor, externalBuffersAllowed } = require('../../../dist/index.js')
const addonPath = process.argv[2]

const gate = new Int32Array(new SharedArrayBuffer(4))
// Device memory where host memory would be copied at import (Electron mode): it goes by token too.
const device = externalBuffersAllowed() ? undefined : [10, 1]
const startup = { op: 'makeForeign', key: 'own', shape: [4], device, disposeOwn: false, end: 'natural', gate }
const worker = new Worker(new URL('transfer-worker.mjs', import.meta.url), { workerData: { addonPath, startup } })
const exited = once(worker, 'exit')
const [made] = await once(worker, 'message')
if (made.error) throw new Error(`transfer worker: ${made.error.message}`)
const tensor = Tensor.fromTransfer(made.transfer)
Atomics.store(gate, 0, 1)
Atomics.notify(gate, 0)
const [code] = await exited
const values = device ? null : Array.from(tensor.data)
tensor.dispose() // the producer's deleter runs here, on this thread
console.log(JSON.stringify({ code, values, deleterCalls: require(addonPath).deleterCalls() }))
