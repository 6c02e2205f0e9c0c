// napi-dlpack with apache-arrow: fromDLPack takes Arrow vectors (and single Data chunks) as they
// are, zero-copy over Arrow's own values (pointer identity, writes seen both ways), including a
// column read from IPC bytes; `toArrow` / `arrowParts` build Arrow vectors over a tensor's
// memory. The pitfalls of the issue are explicit cases: arrow-js has already applied `offset`
// to `values`, `values` may be longer than the column, several chunks need a copy, nulls would
// be lost, booleans are bit-packed, float16 needs its label.
import test from 'ava'
import * as arrow from 'apache-arrow'

import { BufferError, DLPackTypeError, Tensor, fromDLPack } from '../../dist/index.js'
import { addressOf, throwsCode } from '../harness/helpers.js'

test('a Float32 vector is imported zero-copy: same address, writes seen both ways', (t) => {
  const values = new Float32Array([1, 2, 3, 4])
  const vector = arrow.makeVector(values)
  const tensor = fromDLPack(vector)
  t.is(tensor.dtype, 'float32')
  t.deepEqual(tensor.shape, [4])
  t.false(tensor.isCopy)
  t.is(tensor.dataPointer, addressOf(values))
  tensor.data[1] = 20
  t.is(vector.get(1), 20, 'Arrow sees the write through the tensor')
  values[2] = 30
  t.is(tensor.data[2], 30, 'the tensor sees the write through Arrow')
})

test('a sliced vector: arrow-js already applied the offset to values (not applied twice)', (t) => {
  const vector = arrow.makeVector(new Float64Array([0, 1, 2, 3, 4, 5, 6, 7]))
  const slice = vector.slice(2, 5)
  t.is(slice.data[0]!.offset, 2, 'the chunk still reports its offset')
  const tensor = fromDLPack(slice)
  t.deepEqual([...tensor.data], [2, 3, 4])
  t.is(tensor.dataPointer, addressOf(slice.data[0]!.values))
})

test('values longer than the column: the tensor covers the column only', (t) => {
  const vector = arrow.vectorFromArray([1, 2, 3], new arrow.Int32())
  t.true(vector.data[0]!.values.length > 3, 'arrow-js pads the values buffer')
  const tensor = fromDLPack(vector)
  t.deepEqual(tensor.shape, [3])
  t.deepEqual([...tensor.data], [1, 2, 3])
  t.is(tensor.dtype, 'int32')
})

test('integer widths and signedness, int64 as BigInt64Array, float16 keeps its label', (t) => {
  t.is(fromDLPack(arrow.makeVector(new Uint16Array([1]))).dtype, 'uint16')
  t.is(fromDLPack(arrow.makeVector(new Int8Array([1]))).dtype, 'int8')
  const big = fromDLPack(arrow.makeVector(new BigInt64Array([1n, -2n])))
  t.is(big.dtype, 'int64')
  t.deepEqual([...(big.data as BigInt64Array)], [1n, -2n])
  const bits = new Uint16Array([0x3c00, 0xc000]) // 1.0, -2.0
  const half = fromDLPack(arrow.makeData({ type: new arrow.Float16(), data: bits, length: 2 }))
  t.is(half.dtype, 'float16', 'not uint16: the Arrow type says float16')
  t.is(half.dataPointer, addressOf(bits))
})

test('a FixedSizeList column is a 2-D tensor; slices and nesting keep the layout', (t) => {
  const values = new Float32Array(12).map((_, i) => i)
  const leaf = arrow.makeData({ type: new arrow.Float32(), data: values, length: 12 })
  const pairs = arrow.makeData({
    type: new arrow.FixedSizeList(2, new arrow.Field('item', new arrow.Float32())),
    length: 6,
    nullCount: 0,
    child: leaf,
  })
  const vector = arrow.makeVector(pairs)
  const matrix = fromDLPack(vector)
  t.deepEqual(matrix.shape, [6, 2])
  t.is(matrix.dataPointer, addressOf(values))
  t.deepEqual(matrix.toArray(), [
    [0, 1],
    [2, 3],
    [4, 5],
    [6, 7],
    [8, 9],
    [10, 11],
  ])
  const rows = fromDLPack(vector.slice(1, 3))
  t.deepEqual(rows.toArray(), [
    [2, 3],
    [4, 5],
  ])
  t.is(rows.dataPointer, addressOf(values) + 8n, 'starts at row 1, zero-copy')

  const nested = arrow.makeData({
    type: new arrow.FixedSizeList(3, new arrow.Field('item', pairs.type)),
    length: 2,
    nullCount: 0,
    child: pairs,
  })
  const cube = fromDLPack(nested)
  t.deepEqual(cube.shape, [2, 3, 2])
  t.is(cube.dataPointer, addressOf(values))
})

test('a column read from IPC bytes is a view of those bytes', (t) => {
  const table = arrow.tableFromArrays({ x: new Float64Array([1.5, 2.5, 3.5]) })
  const bytes = arrow.tableToIPC(table)
  const column = arrow.tableFromIPC(bytes).getChild('x')!
  const tensor = fromDLPack(column)
  t.deepEqual([...tensor.data], [1.5, 2.5, 3.5])
  const start = addressOf(bytes)
  t.true(tensor.dataPointer >= start && tensor.dataPointer < start + BigInt(bytes.byteLength), 'inside the IPC buffer')
  tensor.data[0] = 9
  t.is(arrow.tableFromIPC(bytes).getChild('x')!.get(0), 9, 'the write landed in the IPC bytes')
})

test('several chunks need a copy: refused unless copy: true', (t) => {
  const vector = arrow.makeVector([new Float32Array([1, 2]), new Float32Array([3])])
  t.is(vector.data.length, 2)
  throwsCode(t, () => fromDLPack(vector), 'ERR_DLPACK_COPY_REQUIRED', BufferError)
  const copy = fromDLPack(vector, { copy: true })
  t.deepEqual([...copy.data], [1, 2, 3])
  t.true(copy.isCopy)
})

test('nulls would be lost: ERR_DLPACK_NULLS unless copy: true', (t) => {
  const vector = arrow.vectorFromArray([1, null, 3], new arrow.Float64())
  throwsCode(t, () => fromDLPack(vector), 'ERR_DLPACK_NULLS', BufferError)
  throwsCode(t, () => fromDLPack(vector, { copy: false }), 'ERR_DLPACK_NULLS', BufferError)
  const copy = fromDLPack(vector, { copy: true })
  t.deepEqual(copy.shape, [3])
  t.is(copy.data[0], 1)
  t.is(copy.data[2], 3)
  // A slice without the null is zero-copy again.
  t.deepEqual([...fromDLPack(vector.slice(2)).data], [3])
})

test('booleans are bit-packed: refused unless copy: true, then one byte per element', (t) => {
  const flags = [true, false, true, true, false, false, true, false, true, true]
  const vector = arrow.vectorFromArray(flags)
  throwsCode(t, () => fromDLPack(vector), 'ERR_DLPACK_COPY_REQUIRED', BufferError)
  const bools = fromDLPack(vector, { copy: true })
  t.is(bools.dtype, 'bool')
  t.deepEqual(bools.toArray(), flags)
  // A slice starting mid-byte: arrow-js keeps the bit offset.
  t.deepEqual(fromDLPack(vector.slice(3, 9), { copy: true }).toArray(), flags.slice(3, 9))
})

test('non-numeric Arrow types are refused with ERR_DLPACK_UNSUPPORTED_DTYPE', (t) => {
  throwsCode(t, () => fromDLPack(arrow.vectorFromArray(['a', 'b'])), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
})

test('toArrow: a Vector over the tensor memory (1-D primitive, N-D nested FixedSizeList)', (t) => {
  const tensor = Tensor.from(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2])
  const vector = tensor.toArrow(arrow) as arrow.Vector<arrow.FixedSizeList<arrow.Float32>>
  t.is(vector.length, 3)
  t.is(String(vector.type), 'FixedSizeList[2]<Float32>')
  t.is(vector.data[0]!.children[0]!.values.buffer, tensor.data.buffer, 'Arrow holds our memory')
  t.deepEqual([...vector.get(1)!], [3, 4])
  tensor.data[2] = 30
  t.deepEqual([...vector.get(1)!], [30, 4], 'writes through the tensor are seen by Arrow')
  // and back: the same address
  t.is(fromDLPack(vector).dataPointer, tensor.dataPointer)

  const flat = Tensor.from(new BigInt64Array([5n, 6n]))
  const ints = flat.toArrow(arrow) as arrow.Vector<arrow.Int64>
  t.is(String(ints.type), 'Int64')
  t.is(ints.get(1), 6n)
  // It serialises like any Arrow column.
  const table = new arrow.Table({ x: ints })
  t.is(arrow.tableFromIPC(arrow.tableToIPC(table)).getChild('x')!.get(0), 5n)
})

test('toArrow of a strided view is a dense copy; parts name the leaf type', (t) => {
  const stored = Tensor.from(new Int16Array([1, 2, 3, 4, 5, 6]), [2, 3])
  const transposed = fromDLPack({ data: stored.data, shape: [3, 2], strides: [1, 3] })
  const parts = transposed.arrowParts()
  t.is(parts.type, 'Int16')
  t.is(parts.rows, 3)
  t.deepEqual(parts.listSizes, [2])
  t.not(parts.values.buffer, stored.data.buffer, 'a copy: Arrow has no strides')
  t.deepEqual([...(parts.values as Int16Array)], [1, 4, 2, 5, 3, 6])
  throwsCode(t, () => Tensor.from(new Float32Array(4), [2], { dtype: 'complex64' }).arrowParts(), 'ERR_DLPACK_UNSUPPORTED_DTYPE', DLPackTypeError)
})

test('nulls inside FixedSizeList rows are refused too', (t) => {
  const leaf = arrow.vectorFromArray([1, null, 3, 4], new arrow.Float32()).data[0]!
  const pairs = arrow.makeData({
    type: new arrow.FixedSizeList(2, new arrow.Field('item', new arrow.Float32(), true)),
    length: 2,
    nullCount: 0,
    child: leaf,
  })
  throwsCode(t, () => fromDLPack(pairs), 'ERR_DLPACK_NULLS', BufferError)
  t.deepEqual(fromDLPack(pairs, { copy: true }).shape, [2, 2])
})

test('toArrow of float16 stores the bits as apache-arrow does (Uint16Array over the same memory)', (t) => {
  const bits = new Uint16Array([0x3c00, 0x4000])
  const half = Tensor.from(bits, undefined, { dtype: 'float16' })
  const vector = half.toArrow(arrow) as arrow.Vector<arrow.Float16>
  t.is(String(vector.type), 'Float16')
  const values = vector.data[0]!.values
  t.true(values instanceof Uint16Array)
  t.is(addressOf(values), half.dataPointer)
  t.is(vector.get(1), 2)
})

test('empty columns: one empty chunk, or no chunk at all, are [0] tensors', (t) => {
  const schema = new arrow.Schema([new arrow.Field('x', new arrow.Float32())])
  const column = new arrow.Table(schema).getChild('x')!
  const empty = fromDLPack(column)
  t.deepEqual(empty.shape, [0])
  t.is(empty.dtype, 'float32')
  const noChunks = fromDLPack({ type: new arrow.Int16(), data: [] })
  t.deepEqual(noChunks.shape, [0])
  t.is(noChunks.dtype, 'int16')
})
