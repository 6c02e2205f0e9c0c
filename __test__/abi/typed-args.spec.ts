// The crate's typed arguments and results (napi_dlpack::arg) in a separately built addon
// (examples/consumer-addon, src/typed.rs): TensorArg borrows napi-dlpack Tensors through the
// exchange table and consumes capsules or __dlpack__ objects; OwnedTensorArg outlives the call
// (an AsyncTask); TensorResult returns a Tensor. Also a third-party producer's own table (the C
// fixture's CTensor), unknown table majors, and the generated index.d.ts (typed below through
// `typeof import(...)`, so `tsc` checks that it names napi-dlpack's types).
// Library tensors and images (ONNX Runtime, transformers.js, sharp, ImageData, Arrow) are typed
// arguments as they are, through napi-dlpack's library adapter (lib/interop/native-adapter.ts).
// Runs in both modes (with NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1: the Electron path).
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import { RawImage, Tensor as HfTensor } from '@huggingface/transformers'
import * as arrow from 'apache-arrow'
import test from 'ava'
import * as ort from 'onnxruntime-node'
import sharp from 'sharp'

import { native } from '../../dist/native.js'
import { type DLPackCapsule, EXCHANGE_API_PROPERTY, type HasExchangeApi, Tensor, externalBuffersAllowed, fromDLPack, isCapsule, isCapsuleConsumed } from '../../dist/index.js'
import { addressOf, codeOf, drainGarbage, gcUntil, nativeFixture } from '../harness/helpers.js'

type Typed = typeof import('../../examples/consumer-addon/index.js')
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
const root = join(here, '..', '..')
const require = createRequire(import.meta.url)
const { path: addonPath, addon } = nativeFixture<Typed & Extras>('consumer-addon', 'consumer_addon.node')
const { addon: c } = nativeFixture<ExchangeC>('exchange-c', 'exchange_c.node')
const { ImageData } = require('@napi-rs/canvas') as typeof import('@napi-rs/canvas')

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

test('sub-byte dtypes (float4, float6) are borrowed as typed arguments, as their capsules are imported', (t) => {
  for (const dtype of ['float4_e2m1fn', 'float6_e2m3fn', 'float6_e3m2fn'] as const) {
    const tensor = Tensor.zeros([2, 3], dtype)
    const seen = addon.inspect(tensor)
    t.true(seen.borrowed, dtype)
    t.is(seen.dtype, dtype)
    t.is(seen.dataPointer, tensor.dataPointer)
    t.deepEqual(seen.shape, [2, 3])
    t.is(addon.inspect(tensor.native).dtype, dtype, `${dtype} by handle`)
    t.is(addon.inspect(tensor.__dlpack__()).dtype, dtype, `${dtype} through a capsule`)
  }
})

test.serial('Tensor.native (an id external) is borrowed with no lookup: same memory, writes seen; owned, it outlives dispose()', async (t) => {
  await drainGarbage()
  const data = new Float32Array([1, 2, 3, 4, 5, 6])
  const tensor = Tensor.from(data, [3, 2], { strides: [1, 3] })
  const handle = tensor.native
  const before = live()
  const seen = addon.inspect(handle)
  t.true(seen.borrowed)
  t.is(seen.dataPointer, tensor.dataPointer)
  t.deepEqual(seen.shape, [3, 2])
  t.deepEqual(seen.strides, [1, 3])
  t.is(live(), before, 'nothing was exported')
  addon.scaleInPlace(handle, 2)
  t.deepEqual([...data], [2, 4, 6, 8, 10, 12], 'strided writes through the handle are seen in JS')
  t.is(addon.inspectOwned(handle).dataPointer, tensor.dataPointer, 'an owning export of the handle')
  const pending = addon.sumAsync(handle)
  tensor.dispose()
  t.is(await pending, 42, 'the owned argument outlived dispose()')
  t.is(codeOf(() => addon.inspect(handle)), 'ERR_TENSOR_STALE_ID')
  t.is(codeOf(() => addon.inspectOwned(handle)), 'ERR_TENSOR_STALE_ID')
  t.is(codeOf(() => tensor.native), 'ERR_TENSOR_DISPOSED')
  // Another producer's per-object external passed as the argument: borrowed through its own
  // table's dltensor_from_object. This producer does not take its external as the value of
  // an owning export, and says so with a code.
  const producer = new c.CTensor()
  const external = (producer as unknown as Record<symbol, unknown>)[EXCHANGE_API_PROPERTY]
  const counts = c.borrowCounts()
  t.is(addon.inspect(external as never).dataPointer, producer.pointer())
  t.deepEqual(c.borrowCounts(), { object: counts.object + 1, value: counts.value }, 'through its per-object data')
  t.is(codeOf(() => addon.inspectOwned(external as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
  // A table external passed as the value is no tensor (and no capsule).
  const table = Object.getOwnPropertyDescriptor(Tensor.prototype, EXCHANGE_API_PROPERTY)?.value
  t.is(codeOf(() => addon.inspect(table as never)), 'ERR_DLPACK_NOT_A_CAPSULE')
  t.true(await gcUntil(() => live() <= before), `live ${live()} before ${before}`)
})

test.serial('a C tensor passed by its handle: the deleter runs once, after the last owned use', async (t) => {
  await drainGarbage()
  const target = c.makeTensor(4, false)
  const owed = zeroCopy ? 1 : 0
  const before = c.deleterCalls()
  t.deepEqual(addon.addInto(target.native, Tensor.from(new Float32Array([10, 20, 30, 40]))), [10, 21, 32, 43])
  const pending = addon.sumAsync(target.native)
  target.dispose()
  t.is(await pending, 106)
  await gcUntil(() => c.deleterCalls() === before + owed, 4)
  t.is(c.deleterCalls(), before + owed, 'once')
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

test('one memory as two arguments, one written and one read, is ERR_DLPACK_ALIASED; disjoint parts of one buffer are not', (t) => {
  // addInto(target, source) reads `source` and writes `target`: with both over the same bytes
  // that would be an overlapping &mut and & in the addon (undefined behaviour). Every way JS can
  // make two arguments of one memory is refused, and leaves the memory as it was.
  const values = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8])
  const x = Tensor.from(values)
  const twoCapsules = () => [x.__dlpack__(), x.__dlpack__()] as const
  const cases: Array<[string, () => readonly [unknown, unknown]]> = [
    ['the same Tensor twice (borrowed, borrowed)', () => [x, x]],
    ['two capsules of one Tensor (owned, owned)', twoCapsules],
    ['a Tensor and a capsule of it (borrowed, owned)', () => [x, x.__dlpack__()]],
    ['a Tensor and a Tensor over part of its memory', () => [x, Tensor.from(new Float32Array(values.buffer, 12, 8 - 3))]],
    ['a Tensor and an object whose __dlpack__ gives it', () => [x, { __dlpack__: () => x.__dlpack__() }]],
    ['a Tensor and its native handle', () => [x, x.native]],
    ['the native handle twice', () => [x.native, x.native]],
  ]
  for (const [name, make] of cases) {
    const [target, source] = make()
    const error = t.throws(() => addon.addInto(target as never, source as never), undefined, name)
    t.is((error as { code?: string }).code, 'ERR_DLPACK_ALIASED', name)
  }
  t.deepEqual(Array.from(values), [1, 2, 3, 4, 5, 6, 7, 8], 'nothing was written')
  // The claims were given back: the same tensor is written again, from another one.
  t.deepEqual(addon.addInto(x, Tensor.from(new Float32Array(8).fill(1))), [2, 3, 4, 5, 6, 7, 8, 9])
  // Two halves of one buffer share no byte: both are lent at once.
  const halves = new Float32Array([1, 2, 3, 4, 10, 20, 30, 40])
  const low = Tensor.from(new Float32Array(halves.buffer, 0, 4))
  const high = Tensor.from(new Float32Array(halves.buffer, 16, 4))
  t.deepEqual(addon.addInto(low, high), [11, 22, 33, 44])
  t.is(addressOf(halves) + 16n, high.dataPointer, 'the halves are the one buffer')
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
    const result = addon.matrix(2, 3, 'float32') // TensorResult<'float32'> (ts_return_type)
    if (!(result instanceof Tensor)) return t.fail('a Tensor while napi-dlpack is loaded')
    const tensor: Tensor<'float32'> = result // narrowed by instanceof, no cast
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
  t.is(codeOf(() => addon.matrix(2, 2, 'int8' as never)), 'ERR_DLPACK_INVALID_ARGUMENT')
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

test.serial('an ONNX Runtime tensor is a typed argument as it is: its own memory, written in place, nothing left behind', async (t) => {
  await drainGarbage()
  const values = new Float32Array([1, 2, 3, 4, 5, 6])
  const input = new ort.Tensor('float32', values, [2, 3])
  const before = live()
  const seen = addon.inspect(input)
  t.is(seen.dataPointer, addressOf(values), "zero-copy: ORT's own Float32Array")
  t.deepEqual(seen.shape, [2, 3])
  t.deepEqual(seen.strides, [3, 1])
  t.is(seen.dtype, 'float32')
  t.false(seen.readonly)
  t.is(live(), before, 'the storage of the argument was released when the call returned')
  addon.scaleInPlace(input, 2)
  t.deepEqual([...values], [2, 4, 6, 8, 10, 12], 'the write landed in the ORT tensor')
  const ones = new ort.Tensor('float32', new Float32Array(6).fill(1), [2, 3])
  t.deepEqual(addon.addInto(input, ones), [3, 5, 7, 9, 11, 13], 'two library arguments in one call')
  t.deepEqual([...(input.data as Float32Array)], [3, 5, 7, 9, 11, 13])
  // The owned argument: outlives the call (an AsyncTask), same memory.
  t.is(addon.inspectOwned(input).dataPointer, addressOf(values))
  t.is(await addon.sumAsync(input), 48)
  t.is(live(), before, 'owned exports released too')
  // Refusals keep fromDLPack's codes.
  const onGpu = { type: 'float32', dims: [2], data: new Float32Array(2), location: 'gpu-buffer' }
  t.is(codeOf(() => addon.inspect(onGpu)), 'ERR_DLPACK_NOT_CPU')
  t.is(codeOf(() => addon.inspect({ type: 'string', dims: [1], data: ['a'], location: 'cpu' })), 'ERR_DLPACK_UNSUPPORTED_DTYPE')
  t.is(codeOf(() => addon.inspect({ type: 'float32', dims: [3], data: new Float32Array(2), location: 'cpu' })), 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is(live(), before)
})

test.serial('a transformers.js Tensor is a typed argument as it is: same memory, writes seen', async (t) => {
  await drainGarbage()
  const values = new Float32Array([1, 2, 3, 4])
  const hf = new HfTensor('float32', values, [2, 2])
  const before = live()
  const seen = addon.inspect(hf)
  t.is(seen.dataPointer, addressOf(values))
  t.deepEqual(seen.shape, [2, 2])
  addon.scaleInPlace(hf, 10)
  t.deepEqual(hf.tolist(), [
    [10, 20],
    [30, 40],
  ])
  t.is(await addon.sumAsync(hf), 100)
  t.is(live(), before)
})

test.serial("images as they are: sharp's raw output, ImageData and RawImage (HWC), same pixels", async (t) => {
  await drainGarbage()
  const pixels = Uint8Array.from({ length: 4 * 5 * 3 }, (_, i) => i)
  const output = await sharp(pixels, { raw: { width: 5, height: 4, channels: 3 } })
    .raw()
    .toBuffer({ resolveWithObject: true })
  const before = live()
  const fromSharp = addon.inspect(output)
  t.is(fromSharp.dataPointer, addressOf(output.data), "zero-copy: sharp's Buffer")
  t.deepEqual(fromSharp.shape, [4, 5, 3])
  t.is(fromSharp.dtype, 'uint8')
  const image = new ImageData(3, 2)
  const fromImageData = addon.inspect(image)
  t.is(fromImageData.dataPointer, addressOf(image.data))
  t.deepEqual(fromImageData.shape, [2, 3, 4])
  const raw = new RawImage(new Uint8ClampedArray(2 * 2 * 3), 2, 2, 3)
  t.is(addon.inspect(raw).dataPointer, addressOf(raw.data))
  t.deepEqual(addon.inspect(raw).shape, [2, 2, 3])
  // Float pixels (sharp-style and ImageData-style objects), written in place by the addon.
  const sharpStyle = { data: new Float32Array([1, 2, 3, 4, 5, 6]), info: { width: 1, height: 2, channels: 3 } }
  addon.scaleInPlace(sharpStyle, 2)
  t.deepEqual([...sharpStyle.data], [2, 4, 6, 8, 10, 12])
  const imageStyle = { data: new Float64Array([1, 2, 3, 4]), width: 2, height: 2 }
  t.deepEqual(addon.inspect(imageStyle).shape, [2, 2, 1])
  addon.scaleInPlace(imageStyle, -1)
  t.deepEqual([...imageStyle.data], [-1, -2, -3, -4])
  t.is(live(), before)
})

test.serial("an Arrow vector is a typed argument over Arrow's values; nulls and chunks are refused with fromDLPack's codes", async (t) => {
  await drainGarbage()
  const values = new Float32Array([1, 2, 3, 4])
  const vector = arrow.makeVector(values)
  const before = live()
  t.is(addon.inspect(vector).dataPointer, addressOf(values))
  addon.scaleInPlace(vector, 10)
  t.is(vector.get(1), 20, 'Arrow sees the write')
  t.is(await addon.sumAsync(vector), 100)
  // A FixedSizeList column of rows: [rows, listSize].
  const rows = new arrow.Data(new arrow.FixedSizeList(2, new arrow.Field('x', new arrow.Float64())), 0, 2, 0, undefined, [
    arrow.makeVector(new Float64Array([1, 2, 3, 4])).data[0]!,
  ])
  t.deepEqual(addon.inspect(arrow.makeVector(rows)).shape, [2, 2])
  const withNulls = arrow.vectorFromArray([1, null, 3], new arrow.Float64())
  t.is(codeOf(() => addon.inspect(withNulls)), 'ERR_DLPACK_NULLS')
  t.is(codeOf(() => addon.inspectOwned(withNulls)), 'ERR_DLPACK_NULLS')
  const chunked = arrow.makeVector([new Float32Array([1, 2]), new Float32Array([3])])
  t.is(codeOf(() => addon.inspect(chunked)), 'ERR_DLPACK_COPY_REQUIRED')
  t.is(codeOf(() => addon.inspect(arrow.vectorFromArray([true, false]))), 'ERR_DLPACK_COPY_REQUIRED', 'bit-packed booleans')
  t.is(live(), before)
})

test('a read-only library tensor (tfjs-like: its array is shared) stays read-only through the adapter', (t) => {
  const shared = new Float64Array([1, 2])
  const tfLike = { dtype: 'float64', shape: [2], isDisposed: false, dataSync: () => shared }
  const seen = addon.inspect(tfLike)
  t.true(seen.readonly)
  t.is(seen.dataPointer, addressOf(shared))
  t.is(codeOf(() => addon.scaleInPlace(tfLike, 2)), 'ERR_DLPACK_READ_ONLY')
  t.deepEqual([...shared], [1, 2])
})

test('each worker thread gets its own adapter: a library tensor is a typed argument there too', async (t) => {
  const code = `
    const { parentPort } = require('node:worker_threads')
    const { Tensor } = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
    const addon = require(${JSON.stringify(addonPath)})
    const values = new Float32Array([1, 2, 3])
    addon.scaleInPlace({ type: 'float32', dims: [3], location: 'cpu', data: values }, 2)
    const whole = Tensor.from(new Uint8Array(values.buffer))
    const seen = addon.inspect({ data: values, shape: [3] })
    parentPort.postMessage({ values: Array.from(values), same: seen.dataPointer === whole.dataPointer })`
  const worker = new Worker(code, { eval: true })
  const exited = new Promise((resolve) => worker.once('exit', resolve))
  const message = await new Promise((resolve, reject) => {
    worker.once('message', resolve)
    worker.once('error', reject)
  })
  t.deepEqual(message, { values: [2, 4, 6], same: true }, 'an ORT-like tensor written in place, an ndarray-like zero-copy')
  t.is(await exited, 0)
})

test('fromDLPack(x) of a library tensor is still borrowed as a Tensor (no adapter involved)', (t) => {
  const values = new Float32Array([1, 2, 3, 4])
  const ortLike = { type: 'float32', dims: [2, 2], location: 'cpu', data: values }
  const tensor = fromDLPack(ortLike)
  const seen = addon.inspect(tensor)
  t.true(seen.borrowed)
  t.deepEqual(seen.shape, [2, 2])
  t.is(seen.dataPointer, tensor.dataPointer)
  t.is(tensor.data.buffer, values.buffer)
  // Through the adapter the same object arrives as a consumed capsule of the same memory.
  const adapted = addon.inspect(ortLike)
  t.false(adapted.borrowed)
  t.is(adapted.dataPointer, addressOf(values))
})

test('without napi-dlpack loaded a library object is refused as before; whatever sits under the adapter key is checked', (t) => {
  // A fresh process with the consumer addon alone: no adapter on globalThis. Then functions
  // planted under the adapter's key that answer wrongly, and finally napi-dlpack itself.
  const script = `
    const addon = require(${JSON.stringify(addonPath)})
    const code = (fn) => { try { fn(); return 'none' } catch (error) { return error.code } }
    const ortLike = { type: 'float32', dims: [2], location: 'cpu', data: new Float32Array([1, 2]) }
    const key = Symbol.for('__dlpack_napi_adapter__')
    const out = { alone: code(() => addon.inspect(ortLike)) }
    globalThis[key] = () => ({ not: 'a capsule' })
    out.notCapsule = code(() => addon.inspect(ortLike))
    globalThis[key] = () => { const e = new Error('refused'); e.code = 'ERR_PLANTED'; throw e }
    out.thrown = code(() => addon.inspect(ortLike))
    globalThis[key] = () => undefined
    out.undefined = code(() => addon.inspect(ortLike))
    delete globalThis[key]
    const dlpack = require(${JSON.stringify(join(root, 'dist', 'index.js'))})
    out.loaded = code(() => addon.inspect(ortLike))
    out.keyed = globalThis[key] !== undefined && dlpack.ADAPTER_PROPERTY === key
    out.plain = code(() => addon.inspect({}))
    process.stdout.write(JSON.stringify(out))`
  const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as Record<string, unknown>
  t.deepEqual(out, {
    alone: 'ERR_DLPACK_INVALID_ARGUMENT',
    notCapsule: 'ERR_DLPACK_NOT_A_CAPSULE',
    thrown: 'ERR_PLANTED',
    undefined: 'ERR_DLPACK_INVALID_ARGUMENT',
    loaded: 'none',
    keyed: true,
    plain: 'ERR_DLPACK_INVALID_ARGUMENT',
  })
})
