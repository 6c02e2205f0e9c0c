// napi-dlpack with the two JS ndarray libraries: scijs `ndarray` ({data, shape, stride, offset})
// and stdlib (@stdlib/ndarray-base-ctor: {data, shape, strides, offset}, the real constructor
// of @stdlib/ndarray without its 437 MB umbrella package). Both use strides and offsets in
// elements of `data`, like napi-dlpack's `strides`/`offset`.
//
// - fromDLPack(theirArray): values, zero-copy (address computed from the TypedArray, and writes
//   through the tensor seen by their `.get`), transposes, steps, offsets, negative strides.
// - their ndarray over a tensor's fields (`data`, `shape`, `strides`, `offset`): `.get` values,
//   and writes through their `.set` seen by the tensor.
// All memory here is V8 memory, so everything is zero-copy in both modes, except the re-import
// of a capsule noted below.
import { createRequire } from 'node:module'

import test, { type ExecutionContext } from 'ava'
import ndarray from 'ndarray'

import { DLPackError, DLPackTypeError, Tensor, externalBuffersAllowed, fromDLPack } from '../../dist/index.js'
import { addressOf } from '../harness/helpers.js'

interface StdNdarray {
  readonly data: ArrayBufferView
  readonly shape: number[]
  readonly strides: number[]
  readonly offset: number
  readonly dtype: string
  readonly order: string
  readonly flags: { READONLY: boolean; ROW_MAJOR_CONTIGUOUS: boolean; COLUMN_MAJOR_CONTIGUOUS: boolean }
  get(...indices: number[]): unknown
  set(...args: unknown[]): StdNdarray
}
type StdCtor = new (
  dtype: string,
  buffer: ArrayBufferView,
  shape: readonly number[],
  strides: readonly number[],
  offset: number,
  order: 'row-major' | 'column-major',
) => StdNdarray

const require = createRequire(import.meta.url)
const StdlibNdarray = require('@stdlib/ndarray-base-ctor') as StdCtor

const zeroCopy = externalBuffersAllowed()

// ---------------------------------------------------------------------------------------------
// Helpers

/** Every index tuple of `shape`, in C order. */
function* indices(shape: readonly number[]): Generator<number[]> {
  const n = shape.reduce((a, b) => a * b, 1)
  for (let flat = 0; flat < n; flat++) {
    const index: number[] = []
    let rest = flat
    for (let d = shape.length - 1; d >= 0; d--) {
      index[d] = rest % shape[d]!
      rest = Math.floor(rest / shape[d]!)
    }
    yield index
  }
}

/** Element offset of `index` inside `tensor.data`. */
const dataIndex = (tensor: Tensor, index: number[]) =>
  index.reduce((at, i, d) => at + i * tensor.strides[d]!, tensor.offset)

/** Nested arrays read through `get` (the library's own addressing). */
function nested(shape: readonly number[], get: (index: number[]) => unknown, prefix: number[] = []): unknown {
  if (prefix.length === shape.length) return get(prefix)
  return Array.from({ length: shape[prefix.length]! }, (_, i) => nested(shape, get, [...prefix, i]))
}

interface Layout {
  name: string
  shape: number[]
  strides: number[]
  offset: number
}

// Layouts over a 24-element buffer; every one stays inside it.
const layouts: Layout[] = [
  { name: 'row-major', shape: [4, 6], strides: [6, 1], offset: 0 },
  { name: 'transpose', shape: [6, 4], strides: [1, 6], offset: 0 },
  { name: 'step 2 with offset', shape: [3, 3], strides: [8, 2], offset: 1 },
  { name: 'negative row stride', shape: [4, 6], strides: [-6, 1], offset: 18 },
  { name: 'all negative', shape: [2, 3, 4], strides: [-12, -4, -1], offset: 23 },
  { name: 'negative step -3 in 1-d', shape: [8], strides: [-3], offset: 22 },
  { name: 'mixed, non-zero offset', shape: [2, 5], strides: [-7, 2], offset: 9 },
  { name: 'broadcast (zero stride)', shape: [3, 4], strides: [0, 1], offset: 5 },
  { name: '3-d permuted', shape: [3, 2, 4], strides: [2, 1, 6], offset: 0 },
  { name: 'empty', shape: [0, 4], strides: [4, 1], offset: 0 },
  { name: 'size-1 dims', shape: [1, 24, 1], strides: [24, 1, 1], offset: 0 },
]

function checkZeroCopyImport(
  t: ExecutionContext,
  tensor: Tensor,
  data: Float32Array | Float64Array | Int32Array,
  layout: Layout,
  get: (index: number[]) => unknown,
) {
  t.deepEqual(tensor.shape, layout.shape)
  t.deepEqual(tensor.strides, layout.strides)
  t.false(tensor.isCopy)
  t.deepEqual(tensor.toArray(), nested(layout.shape, get), 'values as the library reads them')
  const numel = layout.shape.reduce((a, b) => a * b, 1)
  if (numel === 0) return
  t.is(
    tensor.dataPointer,
    addressOf(data) + BigInt(layout.offset * data.BYTES_PER_ELEMENT),
    'first element at the address of data[offset]',
  )
  t.is(tensor.data.buffer, data.buffer, 'the view is over their ArrayBuffer')
  // writes through the tensor's view are seen by the library, element by element
  let v = 1000
  for (const index of indices(layout.shape)) {
    const value = v++
    tensor.data[dataIndex(tensor, index)] = value
    // with a zero stride, later writes land on the same element: read right away
    t.is(get(index), value, `index ${index.join(',')}`)
  }
}

// ---------------------------------------------------------------------------------------------
// scijs ndarray -> Tensor

for (const layout of layouts) {
  test(`scijs -> fromDLPack: ${layout.name}`, (t) => {
    const data = new Float32Array(24).map((_, i) => i)
    const array = ndarray(data, layout.shape, layout.strides, layout.offset)
    const tensor = fromDLPack(array)
    t.is(tensor.dtype, 'float32')
    checkZeroCopyImport(t, tensor, data, layout, (index) => array.get(...index))
  })
}

test('scijs -> fromDLPack: views made by the library (transpose, step, lo/hi, pick)', (t) => {
  const data = new Float64Array(30).map((_, i) => i * 0.5)
  const base = ndarray(data, [5, 6])
  const views = {
    transpose: base.transpose(1, 0),
    reversed: base.step(-1, -1),
    everyOther: base.step(2, -2),
    window: base.lo(1, 2).hi(3, 3),
    pickRow: base.pick(2, null),
    pickColumnReversed: base.step(-1).pick(null, 4),
    transposedWindowReversed: base.hi(4, 5).lo(1, 1).transpose(1, 0).step(-1, 1),
  }
  for (const [name, view] of Object.entries(views)) {
    const tensor = fromDLPack(view)
    const layout = { name, shape: view.shape, strides: view.stride, offset: view.offset }
    t.is(tensor.dtype, 'float64', name)
    checkZeroCopyImport(t, tensor, data, layout, (index) => view.get(...index))
  }
})

test('scijs -> fromDLPack: TypedArray with its own byteOffset (subarray)', (t) => {
  const whole = new Int32Array(20).map((_, i) => i)
  const sub = whole.subarray(3, 15)
  const array = ndarray(sub, [3, 2], [-4, 1], 9)
  const tensor = fromDLPack(array)
  t.is(tensor.dtype, 'int32')
  t.deepEqual(tensor.toArray(), [[12, 13], [8, 9], [4, 5]])
  t.is(tensor.dataPointer, addressOf(whole) + BigInt((3 + 9) * 4))
  tensor.data[dataIndex(tensor, [2, 1])] = -5
  t.is(array.get(2, 1), -5)
  t.is(whole[3 + 2], -5, 'sub[9 - 2*4 + 1]')
})

test('scijs -> fromDLPack: copy: true copies, copy: false stays zero-copy', (t) => {
  const data = new Float32Array([1, 2, 3, 4, 5, 6])
  const array = ndarray(data, [3, 2], [-2, 1], 4)
  const copy = fromDLPack(array, { copy: true })
  t.true(copy.isCopy)
  t.not(copy.dataPointer, addressOf(data) + 16n)
  t.deepEqual(copy.toArray(), [[5, 6], [3, 4], [1, 2]])
  copy.data[0] = 100
  t.is(array.get(0, 0), 5, 'writes to the copy stay there')
  const view = fromDLPack(array, { copy: false })
  t.false(view.isCopy)
  t.is(view.dataPointer, addressOf(data) + 16n)
})

for (const [name, Ctor, values] of [
  ['BigInt64Array', BigInt64Array, [-3n, 2n ** 62n, -(2n ** 63n), 7n, 0n, 1n]],
  ['BigUint64Array', BigUint64Array, [3n, 2n ** 64n - 1n, 0n, 2n ** 63n, 5n, 6n]],
] as const) {
  test(`scijs <-> Tensor: ${name} (bigint dtype)`, (t) => {
    const data = new (Ctor as BigInt64ArrayConstructor)(values as unknown as bigint[])
    const array = ndarray(data, [2, 3]).transpose(1, 0).step(-1, 1)
    const tensor = fromDLPack(array)
    t.is(tensor.dtype, name === 'BigInt64Array' ? 'int64' : 'uint64')
    t.deepEqual(tensor.shape, [3, 2])
    t.deepEqual(tensor.strides, [-1, 3])
    t.deepEqual(tensor.toArray(), nested([3, 2], (i) => array.get(...i)))
    t.is(tensor.dataPointer, addressOf(data) + 16n)
    tensor.data[dataIndex(tensor, [1, 1])] = 42n
    t.is(array.get(1, 1), 42n)

    // and back: an ndarray over the tensor's fields
    const again = ndarray(tensor.data as BigInt64Array<ArrayBuffer>, tensor.shape.slice(), tensor.strides.slice(), tensor.offset)
    for (const index of indices(tensor.shape)) t.is(again.get(...index), array.get(...index))
    again.set(2, 0, -9n as unknown as number)
    t.is((tensor.toArray() as bigint[][])[2]![0], name === 'BigInt64Array' ? -9n : 2n ** 64n - 9n)
    t.is(data[0], name === 'BigInt64Array' ? -9n : 2n ** 64n - 9n)
  })
}

// ---------------------------------------------------------------------------------------------
// stdlib ndarray -> Tensor

for (const layout of layouts) {
  test(`stdlib -> fromDLPack: ${layout.name}`, (t) => {
    const data = new Float64Array(24).map((_, i) => i - 0.25)
    const array = new StdlibNdarray('float64', data, layout.shape, layout.strides, layout.offset, 'row-major')
    const tensor = fromDLPack(array)
    t.is(tensor.dtype, 'float64')
    checkZeroCopyImport(t, tensor, data, layout, (index) => array.get(...index))
  })
}

test('stdlib -> fromDLPack: column-major order, int32, and its dtype field', (t) => {
  const data = new Int32Array(12).map((_, i) => i * 10)
  const array = new StdlibNdarray('int32', data, [3, 4], [1, 3], 0, 'column-major')
  const tensor = fromDLPack(array)
  t.is(tensor.dtype, 'int32')
  t.false(tensor.isContiguous)
  checkZeroCopyImport(t, tensor, data, { name: 'F', shape: [3, 4], strides: [1, 3], offset: 0 }, (i) => array.get(...i))
})

test('stdlib -> fromDLPack: dtype "bool" over a Uint8Array becomes a bool tensor', (t) => {
  const data = new Uint8Array([1, 0, 0, 1])
  const array = new StdlibNdarray('bool', data, [2, 2], [-2, 1], 2, 'row-major')
  const tensor = fromDLPack(array)
  t.is(tensor.dtype, 'bool')
  t.deepEqual(tensor.toArray(), [[false, true], [true, false]])
})

test('stdlib -> fromDLPack: a 0-d ndarray (shape [], strides [0])', (t) => {
  // stdlib always gives 0-d arrays one zero stride; a 0-d tensor has no strides.
  const data = new Float32Array([3, 7.5])
  const array = new StdlibNdarray('float32', data, [], [0], 1, 'row-major')
  t.is(array.get(), 7.5)
  const tensor = fromDLPack(array)
  t.deepEqual(tensor.shape, [])
  t.is(tensor.toArray(), 7.5)
  t.is(tensor.dataPointer, addressOf(data) + 4n)
})

test('scijs -> fromDLPack: a 0-d ndarray', (t) => {
  const data = new Float32Array([3, 7.5])
  const array = ndarray(data, [], [], 1)
  const tensor = fromDLPack(array)
  t.deepEqual(tensor.shape, [])
  t.is(tensor.toArray(), 7.5)
  t.is(tensor.dataPointer, addressOf(data) + 4n)
})

test('stdlib <-> Tensor: int64 data through the base constructor (no dtype checks there)', (t) => {
  const data = new BigInt64Array([10n, -20n, 30n, -(2n ** 62n)])
  const array = new StdlibNdarray('int64', data, [2, 2], [-1, -2], 3, 'row-major')
  const tensor = fromDLPack(array)
  t.is(tensor.dtype, 'int64')
  t.deepEqual(tensor.toArray(), nested([2, 2], (i) => array.get(...i)))
  tensor.data[dataIndex(tensor, [0, 0])] = 5n
  t.is(array.get(0, 0), 5n)
  t.is(data[3], 5n)
})

// ---------------------------------------------------------------------------------------------
// Tensor -> their ndarrays (built from t.data, t.shape, t.strides, t.offset)

function tensorLayouts(): { name: string; make: () => { tensor: Tensor; source: Float32Array } }[] {
  return [
    {
      name: 'contiguous Tensor.from',
      make: () => {
        const source = new Float32Array(12).map((_, i) => i)
        return { tensor: Tensor.from(source, [3, 4]), source }
      },
    },
    {
      name: 'Tensor.from with negative strides and an offset',
      make: () => {
        const source = new Float32Array(12).map((_, i) => i)
        return { tensor: Tensor.from(source, [3, 2], { strides: [-4, -2], offset: 10 }), source }
      },
    },
    {
      name: '1-d reversed, imported from a capsule',
      make: () => {
        const n = 7
        const source = new Float32Array(n).map((_, i) => i * 2)
        const reversed = Tensor.from(source, [n], { strides: [-1], offset: n - 1 })
        return { tensor: fromDLPack(reversed.__dlpack__()), source }
      },
    },
    {
      name: '2-d transposed and reversed, imported from a capsule',
      make: () => {
        const source = new Float32Array(15).map((_, i) => 100 - i)
        const view = Tensor.from(source, [5, 3], { strides: [1, -5], offset: 10 })
        return { tensor: fromDLPack(view.__dlpack__()), source }
      },
    },
    {
      name: 'Tensor.empty',
      make: () => {
        const tensor = Tensor.empty([2, 3], 'float32')
        return { tensor, source: tensor.data as Float32Array }
      },
    },
  ]
}

for (const { name, make } of tensorLayouts()) {
  test(`Tensor -> scijs and stdlib ndarrays: ${name}`, (t) => {
    const { tensor, source } = make()
    const expected = tensor.toArray()
    const data = tensor.data as Float32Array
    // V8 memory is zero-copy in both modes; capsules of it come back without a copy too.
    t.false(tensor.isCopy)
    t.is(data.buffer, source.buffer)

    const sci = ndarray(data, tensor.shape.slice(), tensor.strides.slice(), tensor.offset)
    const std = new StdlibNdarray(tensor.dtype, data, tensor.shape, tensor.strides, tensor.offset, 'row-major')
    t.deepEqual(nested(tensor.shape, (i) => sci.get(...i)), expected)
    t.deepEqual(nested(tensor.shape, (i) => std.get(...i)), expected)

    let v = -1
    for (const index of indices(tensor.shape)) {
      sci.set(...index, v)
      t.is(tensor.data[dataIndex(tensor, index)], v)
      std.set(...index, v - 0.5)
      t.is(sci.get(...index), v - 0.5)
      v -= 1
    }
    t.deepEqual(tensor.toArray(), nested(tensor.shape, (i) => std.get(...i)))
  })
}

test('Tensor -> ndarray: a capsule of a negative-stride tensor shares memory with the original', (t) => {
  const n = 6
  const buffer = new Float32Array(n).map((_, i) => i)
  const original = Tensor.from(buffer, [n], { strides: [-1], offset: n - 1 })
  t.deepEqual(original.toArray(), [5, 4, 3, 2, 1, 0])
  const imported = fromDLPack(original.__dlpack__())
  t.deepEqual(imported.shape, [n])
  t.deepEqual(imported.strides, [-1])
  t.is(imported.offset, n - 1)
  t.is(imported.dataPointer, original.dataPointer)
  t.is(imported.dataPointer, addressOf(buffer) + BigInt((n - 1) * 4))
  const sci = ndarray(imported.data as Float32Array, imported.shape.slice(), imported.strides.slice(), imported.offset)
  t.deepEqual(nested([n], (i) => sci.get(...i)), [5, 4, 3, 2, 1, 0])
  sci.set(0, 50)
  t.is(buffer[n - 1], 50)
  t.is((original.toArray() as number[])[0], 50)
  // the other way through scijs, back into a tensor
  const reimported = fromDLPack(sci)
  t.is(reimported.dataPointer, original.dataPointer)
  t.deepEqual(reimported.toArray(), original.toArray())
})

test('Tensor -> ndarray: a copy made for Electron-style imports is still viewable', (t) => {
  const tensor = fromDLPack(Tensor.from(new Float32Array([1, 2, 3, 4]), [2, 2], { strides: [1, 2] }), { copy: true })
  t.true(tensor.isCopy)
  t.deepEqual(tensor.strides, [2, 1], 'copies are row-major')
  const sci = ndarray(tensor.data as Float32Array, tensor.shape.slice(), tensor.strides.slice(), tensor.offset)
  t.deepEqual(nested([2, 2], (i) => sci.get(...i)), [[1, 3], [2, 4]])
  sci.set(1, 1, 9)
  t.is((tensor.toArray() as number[][])[1]![1], 9)
  t.is(externalBuffersAllowed(), zeroCopy)
})

test('Tensor -> ndarrays: a read-only tensor is viewed through getData({ allowReadOnly })', (t) => {
  const source = new Float32Array([1, 2, 3])
  const tensor = Tensor.from(source, [3], { readonly: true })
  const error = t.throws(() => tensor.data) as DLPackError
  t.is(error.code, 'ERR_DLPACK_READ_ONLY')
  const view = tensor.getData({ allowReadOnly: true }) as Float32Array
  t.is(view.buffer, source.buffer, 'still zero-copy')
  // (the base stdlib constructor and scijs have no read-only flag to carry READ_ONLY over)
  const std = new StdlibNdarray(tensor.dtype, view, tensor.shape, tensor.strides, tensor.offset, 'row-major')
  const sci = ndarray(view, tensor.shape.slice(), tensor.strides.slice(), tensor.offset)
  t.deepEqual(nested([3], (i) => std.get(...i)), [1, 2, 3])
  t.deepEqual(nested([3], (i) => sci.get(...i)), [1, 2, 3])
})

// ---------------------------------------------------------------------------------------------
// Bad ndarray-likes

function throwsCode(t: ExecutionContext, fn: () => unknown, code: string, message?: string) {
  const error = t.throws(fn, { instanceOf: DLPackError }, message) as DLPackError | undefined
  t.is(error?.code, code, `${message ?? code}: ${error?.message}`)
}

test('bad ndarray-likes throw DLPackErrors with stable codes', (t) => {
  const data = new Float32Array(6)
  // offset past the end / strides reaching outside the buffer: scijs does not check these
  throwsCode(t, () => fromDLPack(ndarray(data, [2, 3], [3, 1], 1)), 'ERR_DLPACK_INVALID_LAYOUT', 'reaches past the end')
  throwsCode(t, () => fromDLPack(ndarray(data, [2, 3], [-3, 1], 2)), 'ERR_DLPACK_INVALID_LAYOUT', 'reaches below 0')
  throwsCode(t, () => fromDLPack(ndarray(data, [7])), 'ERR_DLPACK_INVALID_LAYOUT', 'shape larger than data')
  const negativeOffset = { data, shape: [2], stride: [1], offset: -1 }
  const err = t.throws(() => fromDLPack(negativeOffset), { instanceOf: DLPackTypeError })
  t.is(err?.code, 'ERR_DLPACK_INVALID_ARGUMENT')
  throwsCode(t, () => fromDLPack({ data, shape: [2], stride: [1.5], offset: 0 }), 'ERR_DLPACK_INVALID_ARGUMENT', 'fractional stride')
  throwsCode(t, () => fromDLPack({ data, shape: [2.5], stride: [1], offset: 0 }), 'ERR_DLPACK_INVALID_ARGUMENT', 'fractional dim')
  throwsCode(t, () => fromDLPack({ data, shape: [-2], stride: [1], offset: 0 }), 'ERR_DLPACK_SHAPE', 'negative dim')
  throwsCode(t, () => fromDLPack({ data, shape: [2, 3], stride: [1], offset: 0 }), 'ERR_DLPACK_INVALID_LAYOUT', 'strides too short')
  throwsCode(t, () => fromDLPack(ndarray([1, 2, 3] as unknown as Float32Array, [3])), 'ERR_DLPACK_INVALID_ARGUMENT', 'plain Array data')
})

test('an ndarray-like whose dtype label disagrees with its TypedArray is refused, not misread', (t) => {
  // stdlib's base constructor does not check the label: this array reads 1, 2, 3, 4 through .get.
  // Strides and offsets count elements of `data` (8 bytes here), so reading the bytes as float32
  // would give other values; the only safe answers are stdlib's values or an error.
  const array = new StdlibNdarray('float32', new Float64Array([1, 2, 3, 4]), [4], [1], 0, 'row-major')
  t.is(array.get(3), 4)
  throwsCode(t, () => fromDLPack(array), 'ERR_DLPACK_INVALID_ARGUMENT', 'float32 label over a Float64Array')
  throwsCode(
    t,
    () => fromDLPack({ data: new Uint8Array(8), shape: [2], strides: [1], offset: 0, dtype: 'float32' }),
    'ERR_DLPACK_INVALID_ARGUMENT',
    'float32 label over a Uint8Array',
  )
})
