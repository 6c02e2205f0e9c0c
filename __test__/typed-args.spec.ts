// The crate's typed arguments and results (napi_dlpack::arg) in a separately built addon
// (examples/consumer-addon, src/typed.rs): TensorArg borrows napi-dlpack Tensors through the
// exchange table and consumes capsules or __dlpack__ objects; OwnedTensorArg outlives the call
// (an AsyncTask); TensorResult returns a Tensor. Also a third-party producer's own table (the C
// fixture's CTensor), unknown table majors, and the generated index.d.ts (typed below through
// `typeof import(...)`, so `tsc` checks that it names napi-dlpack's types).
// Runs in both modes (with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1: the Electron path).
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import test from 'ava'

import { native } from '../dist/native.js'
import { type DLPackCapsule, EXCHANGE_API_PROPERTY, type HasExchangeApi, Tensor, externalBuffersAllowed, fromDLPack, isCapsule, isCapsuleConsumed } from '../dist/index.js'
import { codeOf, drainGarbage, gcUntil } from './helpers.js'

type Typed = typeof import('../examples/consumer-addon/index.js')
interface Extras {
  liveMatrices(): number
  lastExportedPointer(): bigint
}
/** The C fixture's class puts an exchange table on its prototype. */
interface CTensorInstance extends HasExchangeApi {
  pointer(): bigint
  values(): number[]
}
interface ExchangeC {
  CTensor: new (readonly?: boolean) => CTensorInstance
  BadVersionTensor: new () => CTensorInstance
  ChainedTensor: new () => CTensorInstance
  deleterCalls(): number
  liveCTensors(): number
  makeTensor(n: number, readonly: boolean): Tensor
  forgedObject(kind: 'future' | 'empty' | 'untagged'): object
  borrowCounts(): { object: number; value: number }
}

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')
const require = createRequire(import.meta.url)
const addonPath = join(root, 'target', 'consumer-addon', 'consumer_addon.node')
if (!existsSync(addonPath)) execFileSync('bash', [join(here, 'consumer-addon', 'build.sh')], { stdio: 'inherit' })
const cPath = join(root, 'target', 'exchange-c', 'exchange_c.node')
if (!existsSync(cPath)) execFileSync('bash', [join(here, 'exchange-c', 'build.sh')], { stdio: 'inherit' })
const addon = require(addonPath) as Typed & Extras
const c = require(cPath) as ExchangeC

const zeroCopy = externalBuffersAllowed()
const live = () => native.nativeStats().liveStorages
test('a Tensor argument is borrowed: same memory, no capsule, no storage', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3])
  const before = live()
  const seen = addon.inspect(tensor)
  t.true(seen.borrowed)
  t.is(seen.dataPointer, tensor.dataPointer)
  t.deepEqual(seen.shape, [2, 3])
  t.deepEqual(seen.strides, [3, 1])
  t.is(seen.dtype, 'float32')
  t.false(seen.readonly)
  t.is(live(), before, 'nothing was exported')
})

test('capsules and __dlpack__ objects are consumed (owned); the JS protocol is asked for 1.3', (t) => {
  const tensor = Tensor.from(new Float64Array([1, 2, 3]))
  const capsule = tensor.__dlpack__()
  const seen = addon.inspect(capsule)
  t.false(seen.borrowed)
  t.is(seen.dataPointer, tensor.dataPointer)
  t.true(isCapsuleConsumed(capsule))
  let asked: unknown
  const protocol = {
    __dlpack__(options: unknown) {
      asked = options
      return tensor.__dlpack__()
    },
    __dlpack_device__: () => tensor.__dlpack_device__(),
  }
  const viaProtocol = addon.inspect(protocol)
  t.false(viaProtocol.borrowed)
  t.is(viaProtocol.dataPointer, tensor.dataPointer)
  t.deepEqual(asked, { maxVersion: [1, 3] })
})

test('in-place strided writes through a mutable strided view are seen in JS', (t) => {
  const data = new Float32Array([1, 2, 3, 4, 5, 6])
  const transposed = Tensor.from(data, [3, 2], { strides: [1, 3] })
  addon.scaleInPlace(transposed, 2)
  t.deepEqual([...data], [2, 4, 6, 8, 10, 12])
  // A broadcast (stride 0) view: the shared element is visited once per index naming it.
  const single = new Float64Array([3])
  addon.scaleInPlace(Tensor.from(single, [4], { strides: [0] }), 2)
  t.is(single[0], 48)
  // Negative strides.
  const reversed = new Float64Array([1, 2, 3])
  addon.scaleInPlace(Tensor.from(reversed, [3], { strides: [-1], offset: 2 }), 10)
  t.deepEqual([...reversed], [10, 20, 30])
})

test('contiguous &mut [T] through the typed API (FWHT), and its refusals', (t) => {
  const rows = new Float64Array([1, 0, 0, 0, 0, 1, 0, 0])
  addon.fwhtRows(Tensor.from(rows, [2, 4]))
  t.deepEqual([...rows], [1, 1, 1, 1, 1, -1, 1, -1])
  t.is(codeOf(() => addon.fwhtRows(Tensor.from(new Float64Array(6), [2, 3]))), 'ERR_DLPACK_INVALID_ARGUMENT', 'rows of 3')
  t.is(codeOf(() => addon.fwhtRows(Tensor.from(new Float64Array(16), [4, 4], { strides: [1, 4] }))), 'ERR_DLPACK_NOT_CONTIGUOUS')
})

test('READ_ONLY is refused for writes, borrowed and consumed alike', (t) => {
  const data = new Float32Array([1, 2])
  const readonly = Tensor.from(data, [2], { readonly: true })
  t.true(addon.inspect(readonly).readonly)
  t.is(codeOf(() => addon.scaleInPlace(readonly, 2)), 'ERR_DLPACK_READ_ONLY')
  t.is(codeOf(() => addon.fwhtRows(Tensor.from(new Float32Array(2), [1, 2], { readonly: true }))), 'ERR_DLPACK_READ_ONLY')
  t.is(codeOf(() => addon.scaleInPlace(readonly.__dlpack__(), 2)), 'ERR_DLPACK_READ_ONLY')
  t.deepEqual([...data], [1, 2])
})

test('wrong types, disposed tensors, consumed capsules: coded errors', (t) => {
  for (const value of [42, 'x', null, undefined, true, 1n]) {
    t.is(codeOf(() => addon.inspect(value as never)), 'ERR_DLPACK_INVALID_ARGUMENT', typeof value)
  }
  t.is(codeOf(() => addon.inspect({} as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(codeOf(() => addon.inspectOwned({} as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  const disposed = Tensor.from(new Float32Array(2))
  disposed.dispose()
  t.is(codeOf(() => addon.inspect(disposed)), 'ERR_TENSOR_DISPOSED')
  t.is(codeOf(() => addon.inspectOwned(disposed)), 'ERR_TENSOR_DISPOSED')
  const capsule = Tensor.from(new Float32Array(2)).__dlpack__()
  addon.inspect(capsule)
  t.is(codeOf(() => addon.inspect(capsule)), 'ERR_DLPACK_CAPSULE_CONSUMED')
  t.is(codeOf(() => addon.inspectOwned(capsule)), 'ERR_DLPACK_CAPSULE_CONSUMED')
  // A __dlpack__ that throws: its error (and code) reaches the caller.
  const broken = { __dlpack__: () => Tensor.from(new Float32Array(1), [1], { readonly: true }).__dlpack__({ maxVersion: [0, 8] }) }
  t.is(codeOf(() => addon.inspect(broken)), 'ERR_DLPACK_READ_ONLY')
  // Whatever __dlpack__ returns that is not a capsule: the one code NOT_A_CAPSULE (protocol §3).
  t.is(codeOf(() => addon.inspect({ __dlpack__: () => 42 } as never)), 'ERR_DLPACK_NOT_A_CAPSULE')
  t.is(codeOf(() => addon.inspectOwned({ __dlpack__: () => ({}) } as never)), 'ERR_DLPACK_NOT_A_CAPSULE')
})

test.serial('JS disposing a borrowed argument during the call frees nothing it uses; the deleter runs once, after', async (t) => {
  await drainGarbage()
  // C memory holding 0..3 (its deleter counted), imported as a Tensor; `target` is borrowed
  // first, then converting `source` runs JS that disposes it. (Without external buffers the
  // import copies and the deleter has run already: `owed` is what the Tensor still holds.)
  const target = c.makeTensor(4, false)
  const owed = zeroCopy ? 1 : 0
  const before = c.deleterCalls()
  let duringCall = -1
  const source = {
    __dlpack__() {
      target.dispose()
      duringCall = c.deleterCalls()
      return Tensor.from(new Float32Array([10, 20, 30, 40])).__dlpack__()
    },
  }
  t.deepEqual(addon.addInto(target, source as never), [10, 21, 32, 43], 'read and written after the dispose')
  t.is(duringCall, before, 'dispose() during the call ran no deleter')
  t.is(c.deleterCalls(), before + owed, 'the deleter ran once, when the argument dropped')
  t.is(codeOf(() => target.toArray()), 'ERR_TENSOR_DISPOSED')
  // The same through a getter, with a Tensor over JS memory as the source.
  const second = c.makeTensor(2, false)
  const beforeSecond = c.deleterCalls()
  const viaGetter = {
    get __dlpack__() {
      second.dispose()
      duringCall = c.deleterCalls()
      const capsule = Tensor.from(new Float32Array([5, 5])).__dlpack__()
      return () => capsule
    },
  }
  t.deepEqual(addon.addInto(second, viaGetter as never), [5, 6])
  t.is(duringCall, beforeSecond)
  t.is(c.deleterCalls(), beforeSecond + owed)
})

test('a third-party producer exposing its own table is borrowed by the crate', (t) => {
  const producer = new c.CTensor()
  const before = c.borrowCounts()
  const seen = addon.inspect(producer)
  t.deepEqual(c.borrowCounts(), { object: before.object + 1, value: before.value }, 'through its per-object data')
  t.true(seen.borrowed)
  t.is(seen.dataPointer, producer.pointer())
  t.deepEqual(seen.shape, [2, 3])
  addon.scaleInPlace(producer, 3)
  t.deepEqual(producer.values(), [0, 3, 6, 9, 12, 15], 'writes land in the C memory')
  t.is(codeOf(() => addon.scaleInPlace(new c.CTensor(true), 2)), 'ERR_DLPACK_READ_ONLY')
  t.is(codeOf(() => addon.inspect(new c.BadVersionTensor())), 'ERR_DLPACK_VERSION')
  t.true(addon.inspect(new c.ChainedTensor()).borrowed, 'an unknown major with a major-1 table behind it')
})

test.serial('a third-party producer as an owned argument: its export is released once', async (t) => {
  const deleters = c.deleterCalls()
  const producer = new c.CTensor()
  t.is(addon.inspectOwned(producer).dataPointer, producer.pointer())
  t.is(c.deleterCalls(), deleters + 1, 'the owned argument was released when the call returned')
  t.is(await addon.sumAsync(producer), 15)
  t.is(c.deleterCalls(), deleters + 2)
})

test.serial('an owned argument outlives the call: AsyncTask after the JS tensor was disposed', async (t) => {
  await drainGarbage()
  const before = live()
  const tensor = Tensor.from(new Float64Array([1, 2, 3, 4]))
  const seen = addon.inspectOwned(tensor)
  t.is(seen.dataPointer, tensor.dataPointer, 'an owning export of the same memory')
  const pending = addon.sumAsync(tensor)
  tensor.dispose()
  t.is(await pending, 10)
  // The strided path, and a capsule as the owned argument.
  t.is(await addon.sumAsync(Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2], { strides: [1, 3] })), 21)
  t.is(await addon.sumAsync(Tensor.from(new Float32Array([5])).__dlpack__()), 5)
  t.true(await gcUntil(() => live() <= before), `live ${live()} before ${before}`)
})

test.serial('TensorResult returns a napi-dlpack Tensor over the Rust matrix; deleter once', async (t) => {
  await drainGarbage()
  const matrices = addon.liveMatrices()
  ;(() => {
    const result = addon.matrix(2, 3, 'float32')
    t.true(result instanceof Tensor)
    const tensor = result as Tensor
    t.deepEqual(tensor.toArray(), [
      [0, 1, 2],
      [3, 4, 5],
    ])
    if (zeroCopy) {
      t.is(tensor.dataPointer, addon.lastExportedPointer(), 'the Tensor views the Rust allocation')
      t.is(addon.liveMatrices(), matrices + 1)
      t.true(addon.inspect(tensor).borrowed, 'and lends itself back')
      t.is(addon.inspect(tensor).dataPointer, addon.lastExportedPointer())
    } else {
      t.true(tensor.isCopy, 'Electron mode: a copy in V8 memory')
      t.is(addon.liveMatrices(), matrices, 'and the matrix was released at once')
    }
    tensor.dispose()
    const capsule = addon.matrixCapsule(2, 2, 'float64')
    t.true(isCapsule(capsule))
    t.deepEqual(fromDLPack(capsule as DLPackCapsule).toArray(), [
      [0, 1],
      [2, 3],
    ])
    addon.matrixCapsule(1, 1, 'float32') // dropped unconsumed
  })()
  t.true(await gcUntil(() => addon.liveMatrices() === matrices), `live matrices ${addon.liveMatrices() - matrices}`)
  t.is(codeOf(() => addon.matrix(2, 2, 'int8')), 'ERR_DLPACK_INVALID_ARGUMENT')
})

test('hostile values under the exchange symbol are coded errors for the crate too', (t) => {
  t.is(codeOf(() => addon.inspect(c.forgedObject('future') as never)), 'ERR_DLPACK_VERSION')
  t.is(codeOf(() => addon.inspect(c.forgedObject('empty') as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(codeOf(() => addon.inspect(c.forgedObject('untagged') as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  const tensor = Tensor.from(new Float32Array([1, 2]))
  const copy = { [EXCHANGE_API_PROPERTY]: (tensor as unknown as Record<symbol, unknown>)[EXCHANGE_API_PROPERTY] }
  t.is(addon.inspect(copy as never).dataPointer, tensor.dataPointer, 'a copied handle lends its tensor')
  tensor.dispose()
  t.is(codeOf(() => addon.inspect(tensor)), 'ERR_TENSOR_DISPOSED')
  t.is(codeOf(() => addon.inspect(copy as never)), 'ERR_TENSOR_DISPOSED')
})

test('alternating producer kinds stay right (the table selection cache)', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2]))
  const producer = new c.CTensor()
  for (let i = 0; i < 3; i++) {
    t.is(addon.inspect(tensor).dataPointer, tensor.dataPointer)
    t.is(addon.inspect(producer).dataPointer, producer.pointer())
  }
  // A plain object carrying the table as its own property: found, and its producer (ours)
  // finds no handle on it.
  const table = Object.getOwnPropertyDescriptor(Tensor.prototype, EXCHANGE_API_PROPERTY)?.value
  t.is(typeof table, 'object')
  t.is(codeOf(() => addon.inspect({ [EXCHANGE_API_PROPERTY]: table } as never)), 'ERR_TENSOR_DISPOSED')
  t.is(codeOf(() => addon.inspect({} as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  // An object inheriting Tensor.prototype without a handle is refused too.
  t.is(codeOf(() => addon.inspect(Object.create(Tensor.prototype))), 'ERR_TENSOR_DISPOSED')
  t.is(addon.inspect(tensor).dataPointer, tensor.dataPointer)
})

test('library tensors go through fromDLPack first: TensorArg itself takes Tensors, capsules and __dlpack__ objects only', (t) => {
  // The recognisers of ORT/transformers.js tensors, images, Arrow and tfjs live in napi-dlpack's
  // JS (lib/adapters.ts), not in the crate: an addon's TensorArg refuses such an object...
  const values = new Float32Array([1, 2, 3, 4])
  const ortLike = { type: 'float32', dims: [2, 2], location: 'cpu', data: values }
  t.is(codeOf(() => addon.inspect(ortLike as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  // ...and takes fromDLPack's zero-copy Tensor of it, borrowed: the library's own memory.
  const tensor = fromDLPack(ortLike)
  const seen = addon.inspect(tensor)
  t.true(seen.borrowed)
  t.deepEqual(seen.shape, [2, 2])
  t.is(seen.dataPointer, tensor.dataPointer)
  t.is(tensor.data.buffer, values.buffer)
})
