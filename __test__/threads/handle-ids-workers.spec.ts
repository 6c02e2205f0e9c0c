// Handle ids across JS threads (docs/protocol.md §5.6): a slot records its owner thread's key (its
// thread pointer, given up when the thread ends, or a never-reused serial), so an id (a number can
// be posted anywhere) is refused on every other thread, both ways, and after its Worker ended, by
// the producer's borrow_id (the C consumer) and by the crate's inline borrow (the hot functions); a tensor handed over with transfer() gets a new
// id on the receiving thread, and the sender's id is refused there. Runs in both modes.
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test from 'ava'

import { Tensor } from '../../dist/index.js'
import { codeOf, nativeFixture } from '../harness/helpers.js'

type Addon = typeof import('../../examples/consumer-addon/index.js')

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const { path: addonPath, addon } = nativeFixture<Addon>('consumer-addon', 'consumer_addon.node')
const { path: cPath } = nativeFixture<unknown>('exchange-c', 'exchange_c.node')
const STALE = 'ERR_TENSOR_STALE_ID'

/** Runs `body` in a new Worker (with `Tensor`, `addon`, `c`, `codeOf` and `input` in scope) and
 *  returns what it returns; the Worker has ended when this resolves. */
async function inWorker(body: string, input: unknown): Promise<Record<string, unknown>> {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
    const addon = require(${JSON.stringify(addonPath)})
    const c = require(${JSON.stringify(cPath)})
    const codeOf = (fn) => { try { fn(); return undefined } catch (error) { return error.code } }
    const input = workerData
    parentPort.postMessage((() => { ${body} })())
  `
  const worker = new Worker(code, { eval: true, workerData: input })
  const exited = new Promise((resolve) => worker.once('exit', resolve))
  const message = await new Promise<Record<string, unknown>>((resolve, reject) => {
    worker.once('message', resolve)
    worker.once('error', reject)
  })
  await exited
  return message
}

test.serial("ids are refused on another thread, both ways, and after the thread that made them ended", async (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3]))
  const id = tensor.id
  // Borrowed once here first: its slot is then ready, so a consumer's inline borrow (no call
  // into the producer) is what the Worker's hot and #[napi] calls try, and its owner check is
  // what refuses them.
  t.is(addon.inspectHot(id as never).dataPointer, tensor.dataPointer)
  const seen = await inWorker(
    `
      const own = Tensor.from(new Float32Array([4, 5]))
      globalThis.keep = own
      return {
        hot: codeOf(() => addon.inspectHot(input.id)),
        napi: codeOf(() => addon.inspect(input.id)),
        owned: codeOf(() => addon.inspectOwned(input.id)),
        c: codeOf(() => c.idBorrowSum(input.id)),
        ownSum: c.idBorrowSum(own.id).sum,
        ownId: own.id,
      }
    `,
    { id },
  )
  t.deepEqual([seen.hot, seen.napi, seen.owned, seen.c], [STALE, STALE, STALE, STALE], "the main thread's id in a Worker")
  t.is(seen.ownSum, 9, "the Worker's own id works there")
  const workerId = seen.ownId as number
  // The Worker has ended: its id names nothing here (its slots were given up when it ended).
  t.is(codeOf(() => addon.inspectHot(workerId as never)), STALE, "a finished Worker's id on the main thread")
  const later = await inWorker('return { code: codeOf(() => addon.inspectHot(input.id)) }', { id: workerId })
  t.is(later.code, STALE, "a finished Worker's id in a new Worker")
  t.is(addon.inspectHot(id as never).dataPointer, tensor.dataPointer, 'the main thread still lends its own')
})

test.serial("transfer(): the receiving thread's tensor has its own id; the sender's is refused there", async (t) => {
  const tensor = Tensor.from(new Float32Array(new SharedArrayBuffer(16)))
  const id = tensor.id
  const seen = await inWorker(
    `
      const received = Tensor.fromTransfer(input.transfer)
      addon.scaleHot(received.id, 0)
      const data = received.data
      data[1] = 7
      return {
        sender: codeOf(() => addon.inspectHot(input.id)),
        same: received.id !== input.id,
        pointer: addon.inspectHot(received.native).dataPointer,
      }
    `,
    { id, transfer: tensor.transfer() },
  )
  t.is(seen.sender, STALE)
  t.true(seen.same)
  t.is(seen.pointer, tensor.dataPointer, 'the same memory, by its new id')
  t.is(tensor.data[1], 7, "the Worker's write is seen here")
  t.is(addon.inspectHot(id as never).dataPointer, tensor.dataPointer, "the sender's id still names the sender's tensor")
})
