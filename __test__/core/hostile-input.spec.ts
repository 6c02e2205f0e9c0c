// Hostile and malformed input to the public JS API (issue 26, items 2-6 and 12; issue 22's first
// two false claims): every one is a thrown Error with a stable `code` (the user's own exception
// kept as `cause` where one was thrown), never a TypeError or RangeError of the runtime, an
// uncoded napi-rs conversion error, a hang or a V8 abort.

import { Tensor as HfTensor } from '@huggingface/transformers'
import test, { type ExecutionContext } from 'ava'
import * as ort from 'onnxruntime-node'

import { BufferError, DLPackError, EXCHANGE_API_PROPERTY, Tensor, fromDLPack } from '../../dist/index.js'
import { throwsCode, nativeFixture } from '../harness/helpers.js'

const addon = nativeFixture<typeof import('../../examples/consumer-addon/index.js')>('consumer-addon', 'consumer_addon.node').addon

/** `fn` throws a DLPackError with `code` whose `cause` is `cause`. */
function throwsWithCause(t: ExecutionContext, fn: () => unknown, code: string, cause: unknown, message?: string): void {
  const error = throwsCode(t, fn, code, DLPackError, message)
  t.is((error as { cause?: unknown }).cause, cause, `${message ?? code}: cause`)
}

test('toArray() counts the nested arrays too: [2 ** 32, 0] is ERR_DLPACK_TOO_LARGE at once, not a V8 abort', (t) => {
  const started = Date.now()
  throwsCode(t, () => Tensor.zeros([2 ** 32, 0]).toArray(), 'ERR_DLPACK_TOO_LARGE')
  throwsCode(t, () => Tensor.zeros([2 ** 16, 2 ** 16, 0]).toArray(), 'ERR_DLPACK_TOO_LARGE')
  t.true(Date.now() - started < 2000)
  t.deepEqual(Tensor.zeros([2, 0]).toArray(), [[], []])
  t.deepEqual(Tensor.zeros([2, 1, 0]).toArray(), [[[]], [[]]])
  t.deepEqual(Tensor.zeros([0, 2 ** 40]).toArray(), [])
})

test('toArray() builds at most 2^24 values: [2 ** 31, 0] is ERR_DLPACK_TOO_LARGE, not a V8 out-of-heap abort', (t) => {
  // Under 2^32 - 1 values, the old limit, yet 2^31 empty arrays: V8 ran out of heap and aborted
  // the process (2^27 did). The cap's measurements: docs/api.md.
  const started = Date.now()
  throwsCode(t, () => Tensor.zeros([2 ** 31, 0]).toArray(), 'ERR_DLPACK_TOO_LARGE')
  throwsCode(t, () => Tensor.zeros([2 ** 24 + 1, 0]).toArray(), 'ERR_DLPACK_TOO_LARGE', BufferError, 'one empty array past the cap')
  throwsCode(t, () => Tensor.zeros([2 ** 24 + 1]).toArray(), 'ERR_DLPACK_TOO_LARGE', BufferError, 'one element past the cap')
  throwsCode(t, () => Tensor.zeros([2 ** 23 + 1], 'complex64').toArray(), 'ERR_DLPACK_TOO_LARGE', BufferError, 'a complex element counts twice')
  throwsCode(t, () => Tensor.zeros([2 ** 12, 2 ** 12]).toArray(), 'ERR_DLPACK_TOO_LARGE', BufferError, '2^24 elements and 2^12 rows')
  t.true(Date.now() - started < 2000)
  t.is((Tensor.zeros([2 ** 12, 2 ** 12 - 1]).toArray() as number[][]).length, 2 ** 12, 'under the cap: built')
  t.deepEqual(Tensor.zeros([1], 'complex64').toArray(), [[0, 0]])
})

test('an empty tensor may not start past the end of its buffer', (t) => {
  throwsCode(t, () => Tensor.from(new Float32Array(4), [0], { offset: 10 }), 'ERR_DLPACK_INVALID_LAYOUT')
  // Up to the end is fine, and its views are empty.
  const atEnd = Tensor.from(new Float32Array(4), [0], { offset: 4 })
  t.is(atEnd.data.length, 0)
  t.is(atEnd.getData().length, 0)
  t.is(atEnd.toOrt()[1].length, 0)
  t.is(atEnd.toShared().numel, 0)
  throwsCode(t, () => atEnd.transfer(), 'ERR_DLPACK_COPY_REQUIRED', DLPackError, 'an ArrayBuffer tensor does not travel')
  t.is(atEnd.toShared().transfer().kind, 'shared')
})

test('bad arguments are coded errors, not TypeErrors: BigInts, null, null-prototype objects, Proxies', (t) => {
  const tensor = Tensor.zeros([2, 3])
  const invalid = 'ERR_DLPACK_INVALID_ARGUMENT'
  throwsCode(t, () => tensor.to([1n, 0] as never), invalid, DLPackError, 'to([1n, 0])')
  throwsCode(t, () => tensor.to(null as never), invalid, DLPackError, 'to(null)')
  throwsCode(t, () => tensor.to(Object.create(null) as never), invalid, DLPackError, 'to(Object.create(null))')
  throwsCode(t, () => tensor.to('cpu', 'yes' as never), invalid, DLPackError, "to('cpu', 'yes')")
  t.is(tensor.getData(null as never).length, 6, 'getData(null) is getData()')
  throwsCode(t, () => tensor.getData(42 as never), invalid, DLPackError, 'getData(42)')
  throwsCode(t, () => tensor.getData({ offset: Object.create(null) }), invalid, DLPackError, 'getData({ offset: Object.create(null) })')
  throwsCode(t, () => tensor.getData({ length: 1n as never }), invalid, DLPackError, 'getData({ length: 1n })')
  t.is(tensor.toOrt(null as never)[1].length, 6, 'toOrt(null) is toOrt()')
  throwsCode(t, () => tensor.__dlpack__({ stream: Object.create(null) }), invalid, DLPackError, 'stream: Object.create(null)')
  throwsCode(t, () => tensor.permute(Object.create(null) as never), invalid, DLPackError, 'permute(Object.create(null))')
  throwsCode(t, () => tensor.permute([, 1] as never), invalid, DLPackError, 'permute([, 1])')
  throwsCode(t, () => tensor.permute([1n, 0] as never), invalid, DLPackError, 'permute([1n, 0])')
  throwsCode(t, () => tensor.reshape([, 6] as never), invalid, DLPackError, 'reshape([, 6])')
  throwsCode(t, () => tensor.astype('float32', { scale: [1, , 2] as never, axis: 1 }), invalid, DLPackError, 'astype scale with a hole')
  throwsCode(t, () => tensor.astype(1n as never), invalid, DLPackError, 'astype(1n)')
  const deviceIsNull = { __dlpack__: () => tensor.__dlpack__(), __dlpack_device__: () => null }
  throwsCode(t, () => fromDLPack(deviceIsNull as never), invalid, DLPackError, '__dlpack_device__ returning null')
  throwsCode(t, () => fromDLPack(tensor, 'x' as never), invalid, DLPackError, "fromDLPack(t, 'x')")
  t.is(fromDLPack(tensor, null as never).numel, 6, 'null options are no options')
  const data = new Float32Array(4)
  throwsCode(t, () => Tensor.from(data, undefined, { offset: 1n as never }), invalid, DLPackError, 'offset: 1n')
  throwsCode(t, () => Tensor.from(new Proxy(data, {})), invalid, DLPackError, 'a Proxy of a Float32Array')
  throwsCode(t, () => Tensor.from(new Proxy(new ArrayBuffer(8), {})), invalid, DLPackError, 'a Proxy of an ArrayBuffer')
  throwsCode(t, () => Tensor.from(Object.create(ArrayBuffer.prototype) as ArrayBuffer), invalid, DLPackError, 'an object inheriting from ArrayBuffer')
  throwsCode(t, () => Tensor.from(data, undefined, { readonly: 'yes' as never }), invalid, DLPackError, "readonly: 'yes'")
  throwsCode(t, () => Tensor.from(data, undefined, { clamped: 1 as never }), invalid, DLPackError, 'clamped: 1')
  throwsCode(t, () => Tensor.from(data, [1n] as never), invalid, DLPackError, 'shape [1n]')
  throwsCode(t, () => Tensor.from(data, [2, 2], { dtype: 1n as never }), invalid, DLPackError, 'dtype 1n')
  t.is(Tensor.from(data, undefined, null as never).numel, 4, 'null options are no options')
  throwsCode(t, () => Tensor.zeros([2], 'float32', { shared: 'yes' as never }), invalid, DLPackError, "shared: 'yes'")
  throwsCode(t, () => Tensor.zeros([2], 'float32', { device: 1n as never }), invalid, DLPackError, 'device: 1n')
})

test('a shape is read once: an array whose iterator differs from its indices gets the indices checked and used', (t) => {
  const shape = [NaN, 1]
  ;(shape as unknown as { [Symbol.iterator]: () => Iterator<number> })[Symbol.iterator] = function* () {
    yield 1
  }
  throwsCode(t, () => Tensor.from(new Float32Array(4), shape), 'ERR_DLPACK_INVALID_ARGUMENT')
  throwsCode(t, () => Tensor.zeros(shape), 'ERR_DLPACK_INVALID_ARGUMENT')
  const fine = [2, 2]
  ;(fine as unknown as { [Symbol.iterator]: () => Iterator<number> })[Symbol.iterator] = function* () {
    yield 4
  }
  t.deepEqual(Tensor.from(new Float32Array(4), fine).shape, [2, 2])
  t.deepEqual(Tensor.zeros(fine).shape, [2, 2])
  // A getter that answers differently on each read is read once.
  let reads = 0
  const shifty = [0, 4]
  Object.defineProperty(shifty, 0, { get: () => (reads++ === 0 ? 1 : -1) })
  t.deepEqual(Tensor.from(new Float32Array(4), shifty).shape, [1, 4])
  t.is(reads, 1)
  throwsCode(t, () => Tensor.zeros(new Array(65).fill(1)), 'ERR_DLPACK_NDIM', DLPackError, 'more than MAX_NDIM dimensions')
})

/** An Arrow Data-like chunk (apache-arrow's fields; type ids: Int 2, Float 3, Bool 6, FixedSizeList 16). */
function chunk(type: object, length: number, values: unknown, children: unknown[] = [], offset = 0): Record<string, unknown> {
  return { type, length, offset, nullCount: 0, values, children }
}

test('hostile Arrow-like objects: cycles are bounded, lengths checked against the buffers, DataViews refused', (t) => {
  const invalid = 'ERR_DLPACK_INVALID_ARGUMENT'
  const started = Date.now()
  // A FixedSizeList type whose child type is itself.
  const cyclicType: Record<string, unknown> = { typeId: 16, listSize: 1 }
  cyclicType.children = [{ type: cyclicType }]
  throwsCode(t, () => fromDLPack({ type: cyclicType, data: [] } as never), invalid, DLPackError, 'a cyclic type')
  // A chunk whose child is itself.
  const cyclicChunk = chunk({ typeId: 16, listSize: 1, children: [{ type: { typeId: 3, precision: 1 } }] }, 1, undefined)
  cyclicChunk.children = [cyclicChunk]
  throwsCode(t, () => fromDLPack(cyclicChunk as never), invalid, DLPackError, 'a cyclic chunk')
  t.true(Date.now() - started < 2000, 'no hang')
  // Booleans: a length the bits do not hold, short values, a huge length with copy: true.
  const bools = (length: number, bits: Uint8Array, offset = 0) => chunk({ typeId: 6 }, length, bits, [], offset)
  throwsCode(t, () => fromDLPack(bools(2 ** 31, new Uint8Array(1)) as never, { copy: true }), invalid, DLPackError, 'length 2 ** 31')
  throwsCode(t, () => fromDLPack(bools(9, new Uint8Array([0xff])) as never, { copy: true }), invalid, DLPackError, '9 values in 8 bits')
  throwsCode(t, () => fromDLPack(bools(8, new Uint8Array([0xff]), 1) as never, { copy: true }), invalid, DLPackError, '8 values from bit 1 of 8')
  t.deepEqual(fromDLPack(bools(3, new Uint8Array([0b101]), 0) as never, { copy: true }).toArray(), [true, false, true])
  t.deepEqual(fromDLPack(bools(2, new Uint8Array([0b100]), 1) as never, { copy: true }).toArray(), [false, true])
  // A DataView as values.
  throwsCode(t, () => fromDLPack(chunk({ typeId: 3, precision: 1 }, 2, new DataView(new ArrayBuffer(8))) as never), invalid, DLPackError, 'DataView values')
  t.deepEqual(fromDLPack(chunk({ typeId: 3, precision: 1 }, 2, new Float32Array([1, 2])) as never).toArray(), [1, 2])
})

test('a cached .data view whose buffer was transferred away: ERR_TENSOR_DETACHED, not the stale empty view', (t) => {
  const detach = (buffer: ArrayBufferLike) => structuredClone(buffer, { transfer: [buffer as ArrayBuffer] })
  const make = () => {
    const tensor = Tensor.from(new Uint8Array(12), [3, 4])
    const data = tensor.data
    detach(data.buffer)
    t.is(data.length, 0)
    return tensor
  }
  throwsCode(t, () => make().data, 'ERR_TENSOR_DETACHED')
  throwsCode(t, () => make().getData(), 'ERR_TENSOR_DETACHED')
  throwsCode(t, () => make().toOrt(), 'ERR_TENSOR_DETACHED')
  throwsCode(t, () => make().toImageData(), 'ERR_TENSOR_DETACHED')
  throwsCode(t, () => make().toTypedArray(), 'ERR_TENSOR_DETACHED')
  // A read-only tensor's view, cached by getData({ allowReadOnly: true }).
  const readonly = Tensor.from(new Uint8Array(4), [4], { readonly: true })
  detach(readonly.getData({ allowReadOnly: true }).buffer)
  throwsCode(t, () => readonly.getData({ allowReadOnly: true }), 'ERR_TENSOR_DETACHED')
})

test('GPU-located ONNX Runtime and transformers.js tensors: ERR_DLPACK_NOT_CPU, their data never read (JS and typed arguments)', (t) => {
  const gpu = [
    ort.Tensor.fromGpuBuffer({ size: 8 } as never, { dataType: 'float32', dims: [2] }),
    ort.Tensor.fromTexture({} as never, { width: 1, height: 1, format: 'RGBA' }),
    ort.Tensor.fromMLTensor({} as never, { dataType: 'float32', dims: [1] }),
  ]
  gpu.push(new HfTensor(gpu[0] as never) as never)
  for (const tensor of gpu) {
    t.throws(() => tensor.data, undefined, 'ORT refuses to read it')
    throwsCode(t, () => fromDLPack(tensor as never), 'ERR_DLPACK_NOT_CPU', DLPackError, `fromDLPack (${tensor.location})`)
    t.is((t.throws(() => addon.inspect(tensor as never)) as { code?: string }).code, 'ERR_DLPACK_NOT_CPU', `typed argument (${tensor.location})`)
    t.is((t.throws(() => addon.inspectOwned(tensor as never)) as { code?: string }).code, 'ERR_DLPACK_NOT_CPU', `owned argument (${tensor.location})`)
  }
})

test('copy: false on the library path throws where the import would copy (misaligned memory); typed arguments never get a copy', (t) => {
  // sharp's raw output of 16-bit pixels in a Buffer at an odd byte offset: uint16 elements at
  // odd addresses, which no TypedArray can view.
  const bytes = new Uint8Array(9).subarray(1)
  const raw = { data: bytes, info: { width: 2, height: 1, channels: 2, depth: 'ushort' } }
  t.true(fromDLPack(raw).isCopy, 'copied when allowed')
  throwsCode(t, () => fromDLPack(raw, { copy: false }), 'ERR_DLPACK_COPY_REQUIRED')
  t.is((t.throws(() => addon.inspect(raw as never)) as { code?: string }).code, 'ERR_DLPACK_COPY_REQUIRED')
  // Aligned, it is the library's memory either way.
  const aligned = { data: new Uint8Array(8), info: { width: 2, height: 1, channels: 2, depth: 'ushort' } }
  t.false(fromDLPack(aligned, { copy: false }).isCopy)
})

test("exceptions thrown by the caller's objects are the cause of a coded error (fromDLPack and typed arguments)", (t) => {
  const boom = new Error('boom')
  const thrower = () => {
    throw boom
  }
  const invalid = 'ERR_DLPACK_INVALID_ARGUMENT'
  const getters: [string, object][] = [
    ['the exchange symbol', Object.defineProperty({}, EXCHANGE_API_PROPERTY, { get: thrower })],
    ['__dlpack__', Object.defineProperty({}, '__dlpack__', { get: thrower })],
    ['__dlpack__()', { __dlpack__: thrower }],
    ['an ORT-like data getter', Object.defineProperty({ type: 'float32', dims: [1] }, 'data', { get: thrower })],
  ]
  for (const [what, value] of getters) {
    const inspect = () => addon.inspect(value as never)
    const error = t.throws(inspect) as { code?: string; cause?: unknown }
    t.is(error.code, invalid, `typed argument: ${what}`)
    t.is(error.cause, boom, `typed argument: ${what}: cause`)
    const owned = t.throws(() => addon.inspectOwned(value as never)) as { code?: string; cause?: unknown }
    t.is(owned.code, invalid, `owned argument: ${what}`)
    t.is(owned.cause, boom, `owned argument: ${what}: cause`)
    if (what !== 'the exchange symbol') throwsWithCause(t, () => fromDLPack(value as never), invalid, boom, `fromDLPack: ${what}`)
  }
  throwsWithCause(t, () => fromDLPack({ __dlpack__: () => Tensor.zeros([1]).__dlpack__(), __dlpack_device__: thrower } as never), invalid, boom, '__dlpack_device__()')
  // A coded error passes as it is.
  const coded = Object.assign(new Error('coded'), { code: 'ERR_SOMETHING' })
  const codedThrower = {
    __dlpack__: () => {
      throw coded
    },
  }
  t.is(t.throws(() => addon.inspect(codedThrower as never)), coded)
  t.is(t.throws(() => fromDLPack(codedThrower as never)), coded)
})
