import test from 'ava'

import { native } from '../../dist/native.js'
import {
  BufferError,
  CapsuleError,
  DLPackError,
  DTYPE_NAMES,
  type DLPackCapsule,
  type DLPackOptions,
  MAX_VERSION,
  Tensor,
  externalBuffersAllowed,
  fromDLPack,
  isCapsule,
  isCapsuleConsumed,
} from '../../dist/index.js'
import { drainGarbage } from '../harness/helpers.js'

const electronMode = !externalBuffersAllowed()

test('__dlpack__ returns a consume-once capsule', (t) => {
  const tensor = Tensor.from(new Int32Array([1, 2, 3]))
  const capsule = tensor.__dlpack__()
  t.true(isCapsule(capsule))
  t.false(isCapsuleConsumed(capsule))
  const imported = fromDLPack(capsule)
  t.true(isCapsuleConsumed(capsule))
  t.deepEqual(Array.from(imported.data as Int32Array), [1, 2, 3])
  const error = t.throws(() => fromDLPack(capsule))
  t.true(error instanceof CapsuleError)
  t.is((error as DLPackError).code, 'ERR_DLPACK_CAPSULE_CONSUMED')
  t.false(isCapsule({}))
  t.false(isCapsule(tensor))
})

test('round trips through capsules are zero-copy for JS memory, in every runtime mode', (t) => {
  // JS-allocated memory is V8's own, so exports never need external buffers (Electron-safe).
  const source = Tensor.from(new Float64Array([1, 2, 3, 4]), [2, 2])
  for (const options of [{}, { maxVersion: [1, 0] }, { maxVersion: [1, 3] }, { maxVersion: [0, 8] }, { maxVersion: [2, 0] }] as DLPackOptions[]) {
    const imported = fromDLPack(source.__dlpack__(options))
    t.is(imported.dataPointer, source.dataPointer, JSON.stringify(options))
    t.false(imported.isCopy)
    imported.data[3] = 40
    t.is(source.data[3], 40)
    source.data[3] = 4
  }
})

test('maxVersion below 1.0 gives a legacy capsule, otherwise versioned 1.3', (t) => {
  const source = Tensor.zeros([2])
  const info = (capsule: DLPackCapsule) => native.handleInfo(native.importCapsule(capsule, 0))
  t.deepEqual(info(source.__dlpack__()).version, [1, 3])
  t.deepEqual(info(source.__dlpack__({ maxVersion: [1, 0] })).version, [1, 3])
  t.deepEqual(info(source.__dlpack__({ maxVersion: [5, 0] })).version, [1, 3])
  t.is(info(source.__dlpack__({ maxVersion: [0, 8] })).version, undefined)
  t.deepEqual(MAX_VERSION, [1, 3])
})

test('every dtype round trips with exact values', (t) => {
  for (const dtype of DTYPE_NAMES) {
    const source = Tensor.zeros([2, 3], dtype)
    const bytes = new Uint8Array(source.data.buffer, source.data.byteOffset, source.nbytes)
    for (let i = 0; i < bytes.length; i++) bytes[i] = dtype === 'bool' ? i % 2 : (i * 37) % 251
    const imported = fromDLPack(source.__dlpack__())
    t.is(imported.dtype, dtype)
    t.deepEqual(imported.shape, [2, 3])
    t.is(imported.dataPointer, source.dataPointer, dtype)
    const back = imported.getData({ allowReadOnly: true })
    t.deepEqual(new Uint8Array(back.buffer, back.byteOffset, imported.nbytes), bytes, dtype)
  }
})

test('legacy export of sub-byte dtypes is refused (it cannot carry the padded flag)', (t) => {
  const tensor = Tensor.zeros([2], 'float4_e2m1fn')
  t.is((t.throws(() => tensor.__dlpack__({ maxVersion: [0, 8] })) as DLPackError).code, 'ERR_DLPACK_DTYPE')
  t.is(fromDLPack(tensor.__dlpack__()).dtype, 'float4_e2m1fn')
})

test('strides, offsets and negative strides survive the exchange', (t) => {
  const base = new Float32Array([0, 1, 2, 3, 4, 5, 6, 7])
  const views: Array<[readonly number[], readonly number[], number]> = [
    [[4, 2], [1, 4], 0], // transpose
    [[2, 2], [4, 2], 1], // steps + offset
    [[4], [-2], 7], // negative stride from the end
    [[2, 3], [0, 1], 2], // broadcast
  ]
  for (const [shape, strides, offset] of views) {
    const view = Tensor.from(base, shape, { strides, offset })
    const imported = fromDLPack(view.__dlpack__())
    t.deepEqual(imported.shape, shape)
    t.deepEqual(imported.strides, strides)
    t.is(imported.dataPointer, view.dataPointer)
    t.deepEqual(imported.toArray(), view.toArray())
    // The first element is the same byte for both.
    t.is(imported.data[imported.offset], base[offset])
  }
})

test('fromDLPack of a Tensor shares its memory without a capsule', (t) => {
  const source = Tensor.from(new Uint16Array([1, 2, 3]))
  const shared = fromDLPack(source)
  t.not(shared, source)
  t.is(shared.dataPointer, source.dataPointer)
  shared.data[0] = 100
  t.is(source.data[0], 100)
  // Disposing one keeps the other alive.
  source.dispose()
  t.deepEqual(Array.from(shared.data), [100, 2, 3])
  t.deepEqual(shared.shape, [3])
})

test('copy: true always copies and marks the result', (t) => {
  const source = Tensor.from(new Float32Array([1, 2, 3, 4]), [2, 2], { strides: [1, 2] })
  for (const copy of [fromDLPack(source, { copy: true }), fromDLPack(source.__dlpack__({ copy: true })), fromDLPack(source.__dlpack__(), { copy: true })]) {
    t.true(copy.isCopy)
    t.not(copy.dataPointer, source.dataPointer)
    t.deepEqual(copy.toArray(), source.toArray())
    copy.data[0] = 99
    t.is((source.toArray() as number[][])[0]?.[0], 1)
  }
  // IS_COPIED is set only on the copied export.
  t.is(native.handleInfo(native.importCapsule(source.__dlpack__({ copy: true }), 0)).flags & 2, 2)
  t.is(native.handleInfo(native.importCapsule(source.__dlpack__(), 0)).flags & 2, 0)
})

test('copy: false never copies JS memory', (t) => {
  const source = Tensor.from(new Int8Array([1, 2]))
  t.is(fromDLPack(source, { copy: false }).dataPointer, source.dataPointer)
  t.is(fromDLPack(source.__dlpack__(), { copy: false }).dataPointer, source.dataPointer)
  t.is(fromDLPack(new Int8Array(source.data.buffer), { copy: false }).dataPointer, source.dataPointer)
})

test('fromDLPack accepts any object with __dlpack__ and passes the negotiation options', (t) => {
  const inner = Tensor.from(new Float32Array([5, 6]))
  const calls: unknown[] = []
  const producer = {
    __dlpack_device__: () => [1, 0] as const,
    __dlpack__(options?: DLPackOptions) {
      calls.push(options)
      return inner.__dlpack__(options)
    },
  }
  const imported = fromDLPack(producer)
  t.is(imported.dataPointer, inner.dataPointer)
  t.deepEqual(calls, [{ maxVersion: [1, 3], copy: null }])
  fromDLPack(producer, { copy: true, device: 'cpu' })
  t.deepEqual(calls[1], { maxVersion: [1, 3], copy: true, dlDevice: [1, 0] })

  const liar = { __dlpack__: () => ({}) }
  t.is((t.throws(() => fromDLPack(liar as never)) as DLPackError).code, 'ERR_DLPACK_NOT_A_CAPSULE')
})

test('fromDLPack wraps ArrayBuffer, SharedArrayBuffer, every TypedArray, DataView and Buffer zero-copy', (t) => {
  const arrayBuffer = new ArrayBuffer(8)
  const fromBuffer = fromDLPack(arrayBuffer)
  t.is(fromBuffer.dtype, 'uint8')
  fromBuffer.data[1] = 7
  t.is(new Uint8Array(arrayBuffer)[1], 7)

  const shared = new SharedArrayBuffer(8)
  const fromShared = fromDLPack(shared)
  fromShared.data[2] = 9
  t.is(new Uint8Array(shared)[2], 9)
  t.is(fromDLPack(fromShared.__dlpack__()).dataPointer, fromShared.dataPointer)

  const arrays = [
    new Int8Array(2),
    new Uint8Array(2),
    new Uint8ClampedArray(2),
    new Int16Array(2),
    new Uint16Array(2),
    new Int32Array(2),
    new Uint32Array(2),
    new Float32Array(2),
    new Float64Array(2),
    new BigInt64Array(2),
    new BigUint64Array(2),
  ]
  for (const array of arrays) {
    const tensor = fromDLPack(array)
    t.deepEqual(tensor.shape, [2])
    t.is(tensor.data.buffer, array.buffer, array.constructor.name)
  }

  const view = new DataView(new ArrayBuffer(6), 2, 4)
  const fromView = fromDLPack(view)
  t.deepEqual(fromView.shape, [4])
  fromView.data[0] = 5
  t.is(view.getUint8(0), 5)

  const buffer = Buffer.from([1, 2, 3])
  const fromNodeBuffer = fromDLPack(buffer)
  fromNodeBuffer.data[0] = 10
  t.is(buffer[0], 10)
})

test('fromDLPack reads ndarray-like objects (data, shape, stride|strides, offset)', (t) => {
  const data = new Float32Array([0, 1, 2, 3, 4, 5])
  const scijsLike = { data, shape: [3, 2], stride: [1, 3], offset: 0 }
  t.deepEqual(fromDLPack(scijsLike).toArray(), [
    [0, 3],
    [1, 4],
    [2, 5],
  ])
  const stdlibLike = { data, shape: [3], strides: [-2], offset: 5, dtype: 'float32' }
  const tensor = fromDLPack(stdlibLike)
  t.deepEqual(tensor.toArray(), [5, 3, 1])
  tensor.data[tensor.offset] = 50
  t.is(data[5], 50)
})

test('a capsule kept alive keeps the memory alive after the tensor is disposed', async (t) => {
  const source = Tensor.from(new Float32Array([1, 2, 3]))
  const capsule = source.__dlpack__()
  const second = source.__dlpack__()
  source.dispose()
  await drainGarbage()
  const imported = fromDLPack(capsule)
  t.deepEqual(Array.from(imported.data as Float32Array), [1, 2, 3])
  t.is(fromDLPack(second).dataPointer, imported.dataPointer)
})

test('foreign memory is viewed zero-copy, or copied in Electron mode', (t) => {
  // An Owned export (copy: true) is memory that V8 does not own: the JS view needs an
  // external ArrayBuffer, which Electron forbids.
  const source = Tensor.from(new Float32Array([1, 2, 3]))
  const capsule = source.__dlpack__({ copy: true })
  const imported = fromDLPack(capsule)
  t.deepEqual(Array.from(imported.data as Float32Array), [1, 2, 3])
  t.true(imported.isCopy) // IS_COPIED from the producer, in both modes
  const pointer = imported.dataPointer
  if (electronMode) {
    // Copied again into V8 memory: still readable and writable, the copy is reported.
    imported.data[0] = 5
    t.is((imported.toArray() as number[])[0], 5)
    t.is((t.throws(() => fromDLPack(source.__dlpack__({ copy: true }), { copy: false })) as DLPackError).code, 'ERR_DLPACK_COPY_REQUIRED')
  } else {
    // Zero-copy: re-exporting the import hands out the very same foreign pointer.
    t.is(fromDLPack(imported.__dlpack__()).dataPointer, pointer)
    const noCopy = fromDLPack(source.__dlpack__({ copy: true }), { copy: false })
    t.true(noCopy.isCopy)
    t.is(noCopy.data.length, 3)
  }
})

test('dispose detaches zero-copy views of foreign memory', (t) => {
  const imported = fromDLPack(Tensor.from(new Float32Array([1, 2])).__dlpack__({ copy: true }))
  const view = imported.data
  t.is(view.length, 2)
  imported.dispose()
  // Foreign memory is released at dispose, so its views are emptied (JS-owned copies, in
  // Electron mode, stay readable because V8 owns them).
  t.is(view.length, electronMode ? 2 : 0)
})

test('requesting another device from fromDLPack is refused', (t) => {
  const source = Tensor.zeros([1])
  const error = t.throws(() => fromDLPack(source.__dlpack__(), { device: 'cuda:0' }))
  t.true(error instanceof BufferError)
  t.is((error as DLPackError).code, 'ERR_DLPACK_DEVICE')
  t.is((t.throws(() => fromDLPack(source, { device: 'cuda:0', copy: false })) as DLPackError).code, 'ERR_DLPACK_COPY_REQUIRED')
})


test('fromDLPack refuses a capsule before consuming it when an option or the device is wrong; it stays usable', (t) => {
  const source = Tensor.from(new Float32Array([1, 2]))
  const capsule = source.__dlpack__()
  const refusals: [Parameters<typeof fromDLPack>[1], string][] = [
    [{ device: 'cuda:0' }, 'ERR_DLPACK_DEVICE'],
    [{ device: 'cuda:0', copy: false }, 'ERR_DLPACK_COPY_REQUIRED'],
    [{ stream: 0n }, 'ERR_DLPACK_STREAM'],
    [{ stream: 1.5 }, 'ERR_DLPACK_INVALID_ARGUMENT'],
    [{ copy: 1 as never }, 'ERR_DLPACK_INVALID_ARGUMENT'],
    [{ device: 'gpu' as never }, 'ERR_DLPACK_INVALID_ARGUMENT'],
  ]
  for (const [options, code] of refusals) {
    t.is((t.throws(() => fromDLPack(capsule, options)) as DLPackError).code, code)
    t.false(isCapsuleConsumed(capsule), code)
  }
  const imported = fromDLPack(capsule, { device: [1, 0] })
  t.is(imported.dataPointer, source.dataPointer)
})

test('fromDLPack checks every option before it asks a producer to export', (t) => {
  let exports = 0
  const producer = {
    __dlpack_device__: () => [1, 0] as const,
    __dlpack__(options?: DLPackOptions) {
      exports += 1
      return Tensor.zeros([1]).__dlpack__(options)
    },
  }
  for (const options of [{ copy: 'no' }, { stream: 'x' }, { stream: 2 ** 60 }, { device: 'nowhere' }, { device: [1, -1] }]) {
    t.is((t.throws(() => fromDLPack(producer, options as never)) as DLPackError).code, 'ERR_DLPACK_INVALID_ARGUMENT', JSON.stringify(options))
  }
  t.is(exports, 0)
  // The same for the other inputs: a bad option is never ignored.
  t.is((t.throws(() => fromDLPack(new Float32Array(1), { copy: 'no' as never })) as DLPackError).code, 'ERR_DLPACK_INVALID_ARGUMENT')
  t.is((t.throws(() => fromDLPack(Tensor.zeros([1]), { stream: 'x' as never })) as DLPackError).code, 'ERR_DLPACK_INVALID_ARGUMENT')
})
