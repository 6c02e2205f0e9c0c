// Hot calls (napi_dlpack::hot_function!, crates/napi-dlpack/src/node/hot.rs): functions of the
// example addon (examples/consumer-addon/src/hot.rs) registered as raw Node-API callbacks, whose
// TensorArg arguments skip napi-rs's per-call machinery. The same safety as a #[napi] function
// taking TensorArg: pointer identity, writes seen by JS, aliasing refused, READ_ONLY refused for
// writes, disposed tensors refused, every borrow released on every path (a later argument's
// failure, the body's error, a panic), and panics turned into coded errors.
// Runs in both modes (with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1: the Electron path).
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import test from 'ava'

import { native } from '../../dist/native.js'
import { type HasExchangeApi, Tensor, externalBuffersAllowed, isCapsuleConsumed } from '../../dist/index.js'
import { codeOf, drainGarbage, gcUntil, nativeFixture } from '../harness/helpers.js'

type Addon = typeof import('../../examples/consumer-addon/index.js')
interface ExchangeC {
  /** The C fixture's class puts an exchange table on its prototype. */
  CTensor: new (readonly?: boolean) => HasExchangeApi & { pointer(): bigint; values(): number[] }
  deleterCalls(): number
  makeTensor(n: number, readonly: boolean): Tensor
  borrowCounts(): { object: number; value: number }
}

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const { path: addonPath, addon } = nativeFixture<Addon>('consumer-addon', 'consumer_addon.node')
const { addon: c } = nativeFixture<ExchangeC>('exchange-c', 'exchange_c.node')

const zeroCopy = externalBuffersAllowed()
const live = () => native.nativeStats().liveStorages

test('a hot function borrows its tensor arguments: same memory, by object and by handle, nothing exported', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2], { strides: [1, 3] })
  const before = live()
  for (const argument of [tensor, tensor.native]) {
    const seen = addon.inspectHot(argument)
    t.true(seen.borrowed)
    t.is(seen.dataPointer, tensor.dataPointer)
    t.deepEqual(seen.shape, [3, 2])
    t.deepEqual(seen.strides, [1, 3])
    t.is(seen.dtype, 'float32')
    t.false(seen.readonly)
  }
  t.is(live(), before, 'nothing was exported')
  // A third-party producer (the C fixture's table), through its per-object data.
  const producer = new c.CTensor()
  const counts = c.borrowCounts()
  t.is(addon.inspectHot(producer).dataPointer, producer.pointer())
  t.deepEqual(c.borrowCounts(), { object: counts.object + 1, value: counts.value })
  // A capsule is consumed, as for a #[napi] function.
  const capsule = Tensor.from(new Float64Array([1, 2])).__dlpack__()
  t.false(addon.inspectHot(capsule).borrowed)
  t.true(isCapsuleConsumed(capsule))
})

test('writes through a hot function are seen in JS (strided, by handle, in C memory)', (t) => {
  const data = new Float32Array([1, 2, 3, 4, 5, 6])
  addon.scaleHot(Tensor.from(data, [3, 2], { strides: [1, 3] }), 2)
  t.deepEqual([...data], [2, 4, 6, 8, 10, 12])
  const doubles = new Float64Array([1, 2, 3])
  addon.scaleHot(Tensor.from(doubles, [3], { strides: [-1], offset: 2 }).native, 10)
  t.deepEqual([...doubles], [10, 20, 30])
  const target = new Float32Array([1, 2, 3, 4])
  t.deepEqual(addon.addIntoHot(Tensor.from(target), Tensor.from(new Float32Array([10, 20, 30, 40]))), [11, 22, 33, 44])
  t.deepEqual([...target], [11, 22, 33, 44])
  const producer = new c.CTensor()
  addon.scaleHot(producer, 3)
  t.deepEqual(producer.values(), [0, 3, 6, 9, 12, 15], 'writes land in the C memory')
})

test('one memory as two arguments of a hot function, one written and one read, is ERR_DLPACK_ALIASED', (t) => {
  const values = new Float32Array([1, 2, 3, 4])
  const x = Tensor.from(values)
  const cases: Array<[string, () => readonly [unknown, unknown]]> = [
    ['the same Tensor twice', () => [x, x]],
    ['a Tensor and its handle', () => [x, x.native]],
    ['the handle twice', () => [x.native, x.native]],
    ['two capsules of one Tensor', () => [x.__dlpack__(), x.__dlpack__()]],
    ['a Tensor and a view of its last three elements', () => [x, Tensor.from(new Float32Array(values.buffer, 4, 3))]],
  ]
  for (const [name, make] of cases) {
    const [target, source] = make()
    t.is(codeOf(() => addon.addIntoHot(target as never, source as never)), 'ERR_DLPACK_ALIASED', name)
  }
  t.deepEqual([...values], [1, 2, 3, 4], 'nothing was written')
  // The claims were given back.
  t.deepEqual(addon.addIntoHot(x, Tensor.from(new Float32Array(4).fill(1))), [2, 3, 4, 5])
})

test('READ_ONLY is refused for writes, and disposed tensors and handles for anything', (t) => {
  const data = new Float32Array([1, 2])
  const readonly = Tensor.from(data, [2], { readonly: true })
  t.true(addon.inspectHot(readonly).readonly)
  t.is(codeOf(() => addon.scaleHot(readonly, 2)), 'ERR_DLPACK_READ_ONLY')
  t.is(codeOf(() => addon.scaleHot(readonly.native, 2)), 'ERR_DLPACK_READ_ONLY')
  t.is(codeOf(() => addon.addIntoHot(readonly, Tensor.from(new Float32Array(2)))), 'ERR_DLPACK_READ_ONLY')
  t.is(codeOf(() => addon.scaleHot(new c.CTensor(true) as never, 2)), 'ERR_DLPACK_READ_ONLY')
  t.deepEqual([...data], [1, 2])
  const disposed = Tensor.from(new Float32Array(2))
  const handle = disposed.native
  disposed.dispose()
  t.is(codeOf(() => addon.inspectHot(disposed)), 'ERR_TENSOR_DISPOSED')
  t.is(codeOf(() => addon.inspectHot(handle)), 'ERR_TENSOR_STALE_ID')
})

test('bad arguments are coded errors: not a tensor, missing, a number expected', (t) => {
  for (const value of [42, 'x', null, undefined, true, 1n, {}]) {
    t.is(codeOf(() => addon.inspectHot(value as never)), 'ERR_DLPACK_INVALID_ARGUMENT', String(value))
  }
  t.is(codeOf(() => (addon.inspectHot as () => unknown)()), 'ERR_DLPACK_INVALID_ARGUMENT', 'no argument')
  t.is(codeOf(() => addon.addIntoHot(Tensor.from(new Float32Array(2)), 42 as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(codeOf(() => addon.addIntoHot(Tensor.from(new Float32Array(2)), Tensor.from(new Float32Array(3)))), 'ERR_DLPACK_SHAPE')
  // The factor goes through napi-rs's f64 conversion, with its own code.
  t.truthy(codeOf(() => addon.scaleHot(Tensor.from(new Float32Array(2)), 'two' as never)))
  // Extra arguments are ignored, as for any JS function.
  t.is((addon.inspectHot as (...args: unknown[]) => { dtype: string })(Tensor.from(new Uint8Array(1)), 1, 2).dtype, 'uint8')
})

test('a panic in a hot function is a coded Error; the borrow and the lent slice are given back', (t) => {
  const values = new Float32Array([1, 2, 3, 4])
  const x = Tensor.from(values)
  for (const [write, expected] of [[true, [2, 3, 4, 5]], [false, [3, 4, 5, 6]]] as const) {
    const error = t.throws(() => addon.panicHot(x, write))
    t.is((error as { code?: string }).code, 'ERR_DLPACK_NAPI')
    t.regex(error?.message ?? '', new RegExp(`a hot function panicked: panicHot: 4 elements lent for ${write ? 'writing' : 'reading'}`))
    // Had the slice's claim outlived the panic, lending x for writing would be ERR_DLPACK_ALIASED.
    t.deepEqual(addon.addIntoHot(x, Tensor.from(new Float32Array(4).fill(1))), [...expected])
  }
  t.deepEqual([...values], [3, 4, 5, 6])
})

test.serial('every borrow is released on every path: the C memory is freed once, at dispose()', async (t) => {
  await drainGarbage()
  // C memory (deleter counted) imported as a Tensor: its storage lives while any borrow holds it,
  // so a borrow leaked on any path below would keep the deleter from running at dispose(), and
  // the storage alive. (Without external buffers the import copies: the deleter has run at once
  // and only the storage count tells.)
  const owed = zeroCopy ? 1 : 0
  const before = c.deleterCalls()
  const storages = live()
  const target = c.makeTensor(4, false)
  t.deepEqual(addon.addIntoHot(target, Tensor.from(new Float32Array([1, 1, 1, 1]))), [1, 2, 3, 4], 'the body returned')
  t.is(codeOf(() => addon.addIntoHot(target, 42 as never)), 'ERR_DLPACK_INVALID_ARGUMENT', 'a later argument failed')
  t.is(codeOf(() => addon.addIntoHot(target.native, Tensor.from(new Float32Array(1)))), 'ERR_DLPACK_SHAPE', 'the body failed')
  t.is(codeOf(() => addon.addIntoHot(target, target.native)), 'ERR_DLPACK_ALIASED', 'the lending failed')
  t.is(codeOf(() => addon.panicHot(target, true)), 'ERR_DLPACK_NAPI', 'the body panicked')
  t.is(codeOf(() => addon.scaleHot(target, 'x' as never)), 'NumberExpected', 'a number argument failed')
  for (let i = 0; i < 1000; i++) addon.benchHot3(target, target.native, target)
  t.is(c.deleterCalls(), before + 1 - owed, 'alive while the Tensor is')
  target.dispose()
  t.is(c.deleterCalls(), before + 1, 'freed once, at dispose(): no borrow was left')
  t.true(await gcUntil(() => live() <= storages), `live ${live()} before ${storages}`)
  t.is(c.deleterCalls(), before + 1)
})

test('hot functions are registered in every environment: a Worker calls them too', async (t) => {
  const code = `
    const { parentPort } = require('node:worker_threads')
    const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
    const addon = require(${JSON.stringify(addonPath)})
    const data = new Float32Array([1, 2, 3])
    addon.scaleHot(Tensor.from(data), 2)
    let code
    try { addon.panicHot(Tensor.from(data), true) } catch (error) { code = error.code }
    parentPort.postMessage({ values: [...data], code })
  `
  const worker = new Worker(code, { eval: true })
  const message = await new Promise((resolve, reject) => {
    worker.once('message', resolve)
    worker.once('error', reject)
  })
  await worker.terminate()
  t.deepEqual(message, { values: [2, 4, 6], code: 'ERR_DLPACK_NAPI' })
})
