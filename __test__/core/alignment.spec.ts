// Misaligned JS memory (issue 10, item 2): a view whose first element is not aligned to the
// element size (a Buffer or DataView at an odd byte offset) cannot back a TypedArray, and a
// typed consumer may not be handed such a pointer. Tensor.from used to wrap it anyway (odd
// dataPointer, isCopy false; `.data` threw an uncoded RangeError and exports were misaligned).
// Now it copies the tensor's span into aligned V8 memory and says so (isCopy), as imports of
// misaligned foreign memory do; aligned memory stays zero-copy. Exports are checked through the
// plain C addon.

import test, { type ExecutionContext } from 'ava'

import { type DLPackCapsule, Tensor, fromDLPack } from '../../dist/index.js'
import { nativeFixture } from '../harness/helpers.js'

type Held = { readonly __held: unique symbol }

interface CAddon {
  consume(capsule: DLPackCapsule): Held
  heldInfo(held: Held): { data: bigint; strides: number[] | null }
  heldReadU8(held: Held, byteIndex: number): number
  heldWriteU8(held: Held, byteIndex: number, value: number): void
  release(held: Held): boolean
}

const c = nativeFixture<CAddon>('c-addon', 'c_addon.node').addon

/** Little-endian uint16 values as bytes. */
const u16Bytes = (values: number[]) => values.flatMap((v) => [v & 0xff, v >> 8])

/**
 * Checks a tensor made from `source` against its expected elements and alignment: `.data`,
 * `toArray()`, and an export consumed by the C addon (aligned pointer, the same one as
 * `dataPointer`, elements where the layout says). Returns nothing; asserts.
 */
function checkExchange(t: ExecutionContext, tensor: Tensor, expected: number[], alignment: bigint) {
  t.is(tensor.dataPointer % alignment, 0n, 'dataPointer is aligned')
  t.deepEqual(tensor.toArray(), expected, 'toArray')
  const data = tensor.data as ArrayLike<number>
  const viaData = tensor.shape.length === 0 ? [] : expected.map((_, i) => data[tensor.offset + i * tensor.strides[0]!])
  t.deepEqual(viaData, expected, '.data indexed with offset and strides')
  const held = c.consume(tensor.__dlpack__())
  const info = c.heldInfo(held)
  t.is(info.data % alignment, 0n, 'the consumer gets an aligned pointer')
  t.is(info.data, tensor.dataPointer, 'the export is the tensor, not another copy')
  c.release(held)
}

test('Tensor.from of a uint16 view at an odd byte offset copies, flagged isCopy; .data, toArray and export are aligned', (t) => {
  const bytes = Buffer.alloc(9)
  const view = bytes.subarray(1)
  view.set(u16Bytes([1, 2, 3, 4]))
  const tensor = Tensor.from(view, [4], { dtype: 'uint16' })
  t.true(tensor.isCopy, 'misaligned memory is copied, and says so')
  t.true(tensor.data instanceof Uint16Array)
  checkExchange(t, tensor, [1, 2, 3, 4], 2n)
  view[0] = 9
  t.is(tensor.data[0], 1, 'a copy: later writes to the source are not seen')
  // The copy itself is exchanged zero-copy: a C write through an export is seen.
  const held = c.consume(tensor.__dlpack__())
  c.heldWriteU8(held, 2, 7)
  t.is(tensor.data[1], 7)
  c.release(held)
})

test('Tensor.from of an aligned view stays zero-copy: writes are seen both ways', (t) => {
  const bytes = Buffer.alloc(10)
  const view = bytes.subarray(2)
  view.set(u16Bytes([1, 2, 3, 4]))
  const tensor = Tensor.from(view, [4], { dtype: 'uint16' })
  t.false(tensor.isCopy)
  checkExchange(t, tensor, [1, 2, 3, 4], 2n)
  view[0] = 9
  t.is(tensor.data[0], 9, 'the source write is seen')
  const held = c.consume(tensor.__dlpack__())
  c.heldWriteU8(held, 6, 5)
  t.is(view[6], 5, "C's write lands in the source buffer")
  c.release(held)
})

test('the offset option: alignment is that of the first element, wherever offset puts it', (t) => {
  // Odd view + offset 1 element (2 bytes): the first element is still at an odd address.
  const odd = Buffer.alloc(11).subarray(1)
  odd.set(u16Bytes([0, 1, 2, 3, 4]))
  const copied = Tensor.from(odd, [4], { dtype: 'uint16', offset: 1 })
  t.true(copied.isCopy)
  checkExchange(t, copied, [1, 2, 3, 4], 2n)

  const even = Buffer.alloc(10)
  even.set(u16Bytes([0, 1, 2, 3, 4]))
  const viewed = Tensor.from(even, [4], { dtype: 'uint16', offset: 1 })
  t.false(viewed.isCopy)
  checkExchange(t, viewed, [1, 2, 3, 4], 2n)

  // Negative strides: offset points at the highest element; the copy keeps the layout.
  const reversed = Tensor.from(odd, [4], { dtype: 'uint16', strides: [-1], offset: 4 })
  t.true(reversed.isCopy)
  t.deepEqual(reversed.strides, [-1])
  t.is(reversed.offset, 3)
  checkExchange(t, reversed, [4, 3, 2, 1], 2n)
})

test('DataView and ArrayBuffer sources: aligned for the dtype is zero-copy, otherwise a flagged copy', (t) => {
  const floats = new ArrayBuffer(16)
  new Float32Array(floats, 4, 2).set([1.5, 2.5])
  const float32At4 = Tensor.from(new DataView(floats, 4, 8), [2], { dtype: 'float32' })
  t.false(float32At4.isCopy)
  checkExchange(t, float32At4, [1.5, 2.5], 4n)
  float32At4.data[1] = 6
  t.is(new Float32Array(floats, 4, 2)[1], 6, 'zero-copy')

  // float64 wants 8-byte alignment: byte 4 is not.
  const doubles = new ArrayBuffer(24)
  const bytes = new Uint8Array(doubles)
  bytes.set(new Uint8Array(new Float64Array([3.5, 4.5]).buffer), 4)
  const float64At4 = Tensor.from(new DataView(doubles, 4, 16), [2], { dtype: 'float64' })
  t.true(float64At4.isCopy)
  checkExchange(t, float64At4, [3.5, 4.5], 8n)

  const float32At3 = Tensor.from(new DataView(floats, 3, 8), [2], { dtype: 'float32' })
  t.true(float32At3.isCopy)
  t.is(float32At3.dataPointer % 4n, 0n)

  const whole = Tensor.from(doubles, [3], { dtype: 'float64' })
  t.false(whole.isCopy, 'an ArrayBuffer starts aligned')
  t.is(whole.dataPointer % 8n, 0n)
  whole.data[0] = 8
  t.is(new Float64Array(doubles)[0], 8, 'zero-copy')

  // Bytes are always aligned: fromDLPack of a DataView at an odd offset is zero-copy, even
  // with copy: false.
  const dv = fromDLPack(new DataView(floats, 3, 5), { copy: false })
  t.false(dv.isCopy)
  t.is(dv.dtype, 'uint8')
})

test('misaligned SharedArrayBuffer memory and empty misaligned tensors copy too', (t) => {
  const shared = new Uint8Array(new SharedArrayBuffer(9), 1)
  shared.set(u16Bytes([5, 6, 7, 8]))
  const tensor = Tensor.from(shared, [2, 2], { dtype: 'int16' })
  t.true(tensor.isCopy)
  t.deepEqual(tensor.toArray(), [
    [5, 6],
    [7, 8],
  ])
  t.is(tensor.dataPointer % 2n, 0n)

  const empty = Tensor.from(Buffer.alloc(3).subarray(1, 1), [0], { dtype: 'uint16' })
  t.true(empty.isCopy)
  t.is(empty.data.length, 0)
  t.deepEqual(empty.toArray(), [])
})
