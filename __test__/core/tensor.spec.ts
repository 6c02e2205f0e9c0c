import test from 'ava'

import {
  BufferError,
  DLDeviceType,
  DLPackError,
  DLPackTypeError,
  DTYPE_NAMES,
  DTYPES,
  ReadOnlyError,
  Tensor,
  TensorDisposedError,
  externalBuffersAllowed,
  fromDLPack,
} from '../../dist/index.js'

const electronMode = !externalBuffersAllowed()

test('Tensor.from views a TypedArray without copying', (t) => {
  const array = new Float32Array([1, 2, 3, 4, 5, 6])
  const tensor = Tensor.from(array, [2, 3])
  t.deepEqual(tensor.shape, [2, 3])
  t.deepEqual(tensor.strides, [3, 1])
  t.is(tensor.dtype, 'float32')
  t.is(String(tensor.device), 'cpu')
  t.deepEqual(tensor.__dlpack_device__(), [DLDeviceType.CPU, 0])
  t.is(tensor.numel, 6)
  t.is(tensor.ndim, 2)
  t.is(tensor.nbytes, 24)
  t.true(tensor.isContiguous)
  t.false(tensor.readonly)
  t.false(tensor.isCopy)
  t.is(tensor.offset, 0)
  t.is(tensor.byteOffset, 0)
  // Same memory: writes go both ways, and `data` is a view of the same ArrayBuffer.
  t.is(tensor.data.buffer, array.buffer)
  tensor.data[4] = 50
  t.is(array[4], 50)
  array[0] = -1
  t.is(tensor.data[0], -1)
  t.is(tensor.toString(), 'Tensor(shape=[2, 3], dtype=float32, device=cpu)')
})

test('Tensor.from respects the view offset of a subarray', (t) => {
  const backing = new Int16Array([0, 1, 2, 3, 4, 5, 6, 7])
  const sub = backing.subarray(3, 7)
  const tensor = Tensor.from(sub)
  t.deepEqual(tensor.shape, [4])
  t.deepEqual(Array.from(tensor.data), [3, 4, 5, 6])
  t.is(tensor.data.byteOffset, 6)
  tensor.data[0] = 30
  t.is(backing[3], 30)
})

test('the data view is cached', (t) => {
  const tensor = Tensor.zeros([4], 'int32')
  t.is(tensor.data, tensor.data)
})

test('empty and zeros allocate zero-filled V8 memory', (t) => {
  for (const dtype of DTYPE_NAMES) {
    const tensor = Tensor.zeros([2, 3], dtype)
    t.is(tensor.dtype, dtype)
    t.is(tensor.nbytes, 6 * DTYPES[dtype].itemsize)
    const data = tensor.data as ArrayLike<number | bigint>
    t.is(data.length, 6 * DTYPES[dtype].lanes, dtype)
    t.true(Array.from(data).every((v) => v === 0 || v === 0n), dtype)
  }
})

test('data has the TypedArray type of its dtype', (t) => {
  const expected: Record<string, string> = {
    bool: 'Uint8Array',
    int8: 'Int8Array',
    int16: 'Int16Array',
    int32: 'Int32Array',
    int64: 'BigInt64Array',
    uint8: 'Uint8Array',
    uint16: 'Uint16Array',
    uint32: 'Uint32Array',
    uint64: 'BigUint64Array',
    float16: typeof (globalThis as { Float16Array?: unknown }).Float16Array === 'function' ? 'Float16Array' : 'Uint16Array',
    bfloat16: 'Uint16Array',
    float32: 'Float32Array',
    float64: 'Float64Array',
    complex64: 'Float32Array',
    complex128: 'Float64Array',
  }
  for (const dtype of DTYPE_NAMES) {
    const name = expected[dtype] ?? 'Uint8Array' // float8, float6, float4: raw bytes
    t.is(Object.prototype.toString.call(Tensor.zeros([1], dtype).data).slice(8, -1), name, dtype)
  }
})

test('complex data is interleaved real and imaginary parts', (t) => {
  const tensor = Tensor.from(new Float32Array([1, -1, 2, -2]), undefined, { dtype: 'complex64' })
  t.deepEqual(tensor.shape, [2])
  t.is(tensor.dtype, 'complex64')
  t.deepEqual(tensor.toArray(), [
    [1, -1],
    [2, -2],
  ])
})

test('bool and int64 convert to booleans and bigints in toArray', (t) => {
  t.deepEqual(Tensor.from(new Uint8Array([0, 1, 1]), undefined, { dtype: 'bool' }).toArray(), [false, true, true])
  t.deepEqual(Tensor.from(new BigInt64Array([1n, -2n])).toArray(), [1n, -2n])
})

test('strided views: transpose, step and negative strides', (t) => {
  const base = new Float64Array([0, 1, 2, 3, 4, 5])
  const transposed = Tensor.from(base, [3, 2], { strides: [1, 3] })
  t.false(transposed.isContiguous)
  t.deepEqual(transposed.toArray(), [
    [0, 3],
    [1, 4],
    [2, 5],
  ])
  t.deepEqual(Array.from(transposed.toTypedArray()), [0, 3, 1, 4, 2, 5])

  const reversed = Tensor.from(base, [3], { strides: [-2], offset: 5 })
  t.deepEqual(reversed.toArray(), [5, 3, 1])
  // `data` spans lowest to highest element; `offset` locates the first element inside it.
  t.is(reversed.offset, 4)
  t.is(reversed.data[reversed.offset], 5)
  reversed.data[reversed.offset] = 50
  t.is(base[5], 50)

  const broadcast = Tensor.from(new Int32Array([7, 8]), [3, 2], { strides: [0, 1] })
  t.deepEqual(broadcast.toArray(), [
    [7, 8],
    [7, 8],
    [7, 8],
  ])
})

test('0-d, zero-size and 32-d tensors', (t) => {
  const scalar = Tensor.from(new Float32Array([3.5]), [])
  t.deepEqual(scalar.shape, [])
  t.is(scalar.numel, 1)
  t.is(scalar.toArray(), 3.5)

  for (const shape of [[0], [0, 3], [1, 8, 0, 128]]) {
    const empty = Tensor.empty(shape, 'float32')
    t.is(empty.numel, 0)
    t.is(empty.data.length, 0)
    t.deepEqual(empty.toArray(), shape[0] === 0 ? [] : [Array.from({ length: 8 }, () => [])])
  }

  const deep = Tensor.from(new Uint8Array([9]), new Array(32).fill(1))
  t.is(deep.ndim, 32)
  t.true(deep.isContiguous)
})

test('layouts that reach outside the buffer are refused', (t) => {
  const array = new Float32Array(4)
  for (const [shape, options] of [
    [[5], {}],
    [[2], { offset: 3 }],
    [[3], { strides: [2] }],
    [[3], { strides: [-1] }],
  ] as const) {
    const error = t.throws(() => Tensor.from(array, shape, options))
    t.true(error instanceof DLPackError)
    t.is((error as DLPackError).code, 'ERR_DLPACK_INVALID_LAYOUT', JSON.stringify([shape, options]))
  }
  t.is((t.throws(() => Tensor.from(array, [-1])) as DLPackError).code, 'ERR_DLPACK_SHAPE')
})

test('bad arguments throw DLPackTypeError with a stable code', (t) => {
  const cases: Array<() => unknown> = [
    () => Tensor.empty([2], 'float128' as never),
    () => Tensor.empty([1.5]),
    () => Tensor.empty('3' as never),
    () => Tensor.from(new Float32Array(2), [2], { offset: -1 }),
    () => Tensor.from(new Uint8Array(3), undefined, { dtype: 'float32' }),
    () => fromDLPack(42 as never),
    () => fromDLPack(null as never),
    () => fromDLPack({} as never),
    () => fromDLPack('x' as never),
  ]
  for (const make of cases) {
    const error = t.throws(make)
    t.true(error instanceof DLPackTypeError, String(make))
    t.is((error as DLPackError).code, 'ERR_DLPACK_INVALID_ARGUMENT', String(make))
  }
  const tensor = Tensor.zeros([2])
  t.is(
    (t.throws(() => tensor.__dlpack__({ maxVersion: [1] as never })) as DLPackError).code,
    'ERR_DLPACK_INVALID_ARGUMENT',
  )
  t.is((t.throws(() => tensor.__dlpack__({ copy: 'yes' as never })) as DLPackError).code, 'ERR_DLPACK_INVALID_ARGUMENT')
})

test('dispose releases the tensor and later use throws TensorDisposedError', (t) => {
  const tensor = Tensor.zeros([3])
  t.false(tensor.disposed)
  tensor.dispose()
  t.true(tensor.disposed)
  tensor.dispose() // idempotent
  for (const use of [
    () => tensor.shape,
    () => tensor.dtype,
    () => tensor.data,
    () => tensor.device,
    () => tensor.toArray(),
    () => tensor.__dlpack__(),
    () => tensor.__dlpack_device__(),
    () => tensor.dataPointer,
    () => fromDLPack(tensor),
  ]) {
    const error = t.throws(use)
    t.true(error instanceof TensorDisposedError, String(use))
    t.is((error as DLPackError).code, 'ERR_TENSOR_DISPOSED')
  }
  t.is(tensor.toString(), 'Tensor(disposed)')
})

test('Symbol.dispose disposes', (t) => {
  const tensor = Tensor.zeros([1])
  tensor[Symbol.dispose]()
  t.true(tensor.disposed)
})

test('read-only tensors never hand out a writable view silently', (t) => {
  const array = new Float32Array([1, 2])
  const tensor = Tensor.from(array, undefined, { readonly: true })
  t.true(tensor.readonly)
  const error = t.throws(() => tensor.data)
  t.true(error instanceof ReadOnlyError)
  t.is((error as DLPackError).code, 'ERR_DLPACK_READ_ONLY')
  // Opting in gives the zero-copy view; a copy is always available.
  const view = tensor.getData({ allowReadOnly: true })
  t.is(view.buffer, array.buffer)
  t.throws(() => tensor.data) // still refused after the opt-in view exists
  const copy = tensor.toTypedArray()
  t.not(copy.buffer, array.buffer)
  t.deepEqual(Array.from(copy), [1, 2])
  // The read-only flag travels with exports and imports.
  const imported = fromDLPack(tensor.__dlpack__())
  t.true(imported.readonly)
  t.throws(() => imported.data, { instanceOf: ReadOnlyError })
})

test('a detached ArrayBuffer is never exported or viewed', (t) => {
  const buffer = new ArrayBuffer(16)
  const early = new Float32Array(buffer)
  const tensor = Tensor.from(new Float32Array(buffer))
  const transferred = structuredClone(buffer, { transfer: [buffer] })
  t.is(buffer.byteLength, 0)
  t.is(transferred.byteLength, 16)
  for (const use of [() => tensor.__dlpack__(), () => tensor.toTypedArray(), () => fromDLPack(tensor, { copy: true })]) {
    const error = t.throws(use)
    t.is((error as DLPackError).code, 'ERR_TENSOR_DETACHED', String(use))
  }
  // A view created before the transfer now wraps a detached buffer.
  t.is((t.throws(() => Tensor.from(early, [0])) as DLPackError).code, 'ERR_TENSOR_DETACHED')
})

test('an exported tensor keeps its ArrayBuffer: a transfer list cannot move memory a capsule points into', (t) => {
  // Moving an exported buffer would hand V8 memory to another owner (a Worker) that frees it
  // while the capsule, or native code holding the export, still points into it. Node >= 21,
  // Bun and Deno refuse the transfer (a DataCloneError; Deno's structuredClone a TypeError);
  // Node 20 clones the buffer instead.
  const tryToMove = (buffer: ArrayBuffer, how: 'structuredClone' | 'postMessage') => {
    try {
      if (how === 'structuredClone') structuredClone(buffer, { transfer: [buffer] })
      else {
        const { port1, port2 } = new MessageChannel()
        try {
          port1.postMessage(buffer, [buffer])
        } finally {
          port1.close()
          port2.close()
        }
      }
    } catch (error) {
      // Deno's structuredClone throws a TypeError (the detach key), the rest a DataCloneError.
      t.true(['DataCloneError', 'TypeError'].includes((error as Error).name), `${how}: ${String(error)}`)
    }
  }
  for (const how of ['structuredClone', 'postMessage'] as const) {
    const buffer = new ArrayBuffer(16)
    const tensor = Tensor.from(new Float32Array(buffer).fill(3))
    const capsule = tensor.__dlpack__()
    tryToMove(buffer, how)
    t.is(buffer.byteLength, 16, `${how}: the exported buffer is still attached`)
    const imported = fromDLPack(capsule)
    t.is(imported.dataPointer, tensor.dataPointer)
    t.deepEqual(Array.from(imported.data as Float32Array), [3, 3, 3, 3])
  }
  // Only exports that point into the buffer mark it: a tensor never exported, or exported as
  // a copy, leaves its buffer transferable (and then throws ERR_TENSOR_DETACHED).
  const unexported = new ArrayBuffer(8)
  const plain = Tensor.from(new Float32Array(unexported))
  fromDLPack(plain.__dlpack__({ copy: true })).dispose()
  structuredClone(unexported, { transfer: [unexported] })
  t.is(unexported.byteLength, 0)
  t.is((t.throws(() => plain.data) as DLPackError).code, 'ERR_TENSOR_DETACHED')
})

test('device objects print and compare', (t) => {
  const tensor = Tensor.zeros([1])
  t.is(tensor.device.toString(), 'cpu')
  t.is(JSON.stringify({ device: tensor.device }), '{"device":"cpu"}')
  t.true(tensor.device.equals('cpu'))
  t.true(tensor.device.equals([1, 0]))
  t.false(tensor.device.equals('cuda:0'))
})

test('exporting to another device is refused with BufferError', (t) => {
  const tensor = Tensor.zeros([2])
  const error = t.throws(() => tensor.__dlpack__({ dlDevice: [DLDeviceType.CUDA, 0] }))
  t.true(error instanceof BufferError)
  t.is((error as DLPackError).code, 'ERR_DLPACK_DEVICE')
  t.is((t.throws(() => tensor.__dlpack__({ dlDevice: [2, 0], copy: false })) as DLPackError).code, 'ERR_DLPACK_COPY_REQUIRED')
  // Same device is fine.
  t.truthy(tensor.__dlpack__({ dlDevice: [1, 0] }))
})

test('CPU tensors take no stream', (t) => {
  const tensor = Tensor.zeros([2])
  for (const stream of [0, 1, 2n, -1n]) {
    const error = t.throws(() => tensor.__dlpack__({ stream }))
    t.true(error instanceof BufferError)
    t.is((error as DLPackError).code, 'ERR_DLPACK_STREAM')
  }
  t.truthy(tensor.__dlpack__({ stream: null }))
  t.truthy(tensor.__dlpack__({ stream: undefined }))
})

test('electron mode is what the environment says', (t) => {
  t.is(electronMode, process.env.NAPI_DLPACK_NO_EXTERNAL_BUFFERS === '1')
})
