// The dense-copy engine (napi_dlpack::convert::copy_dense) through every public copy of a host
// tensor: contiguous(), toTypedArray(), __dlpack__({ copy: true }), astype() to its own dtype.
// Transposed sources are copied tile by tile (64 bytes a side, whole tiles
// through local buffers, bytes 8x8 in registers): the sizes below sit at and around the tile
// sides of every element width (8, 16, 32, 64 elements) and the tile groups (8 tiles a side),
// with negative strides and first elements away from the buffer's start. Every result is
// compared byte for byte with a JS walk of the source's strides.
import test from 'ava'

import { type DType, Tensor, fromDLPack } from '../../dist/index.js'

type Case = { dtype: DType; itemsize: number; shape: number[]; strides: number[]; offset: number; span: number }

const bytesOf = (view: ArrayBufferView) => new Uint8Array(view.buffer, view.byteOffset, view.byteLength)

/** Distinct bytes (period 251); bool elements get 0 or 1 so that every byte is a valid bool. */
function pattern(len: number, dtype: DType): Uint8Array {
  const out = new Uint8Array(len)
  for (let i = 0; i < len; i++) out[i] = dtype === 'bool' ? (i % 3) & 1 : (i * 7 + 3) % 251
  return out
}

/** The bytes a row-major copy of `c` over `bytes` holds: the reference walk, element by element. */
function expected(bytes: Uint8Array, c: Case): Uint8Array {
  const numel = c.shape.reduce((a, b) => a * b, 1)
  const out = new Uint8Array(numel * c.itemsize)
  for (let linear = 0; linear < numel; linear++) {
    let rest = linear
    let at = c.offset
    for (let axis = c.shape.length - 1; axis >= 0; axis--) {
      at += (rest % c.shape[axis]) * c.strides[axis]
      rest = Math.floor(rest / c.shape[axis])
    }
    out.set(bytes.subarray(at * c.itemsize, (at + 1) * c.itemsize), linear * c.itemsize)
  }
  return out
}

/** Every element width, sub-byte (padded to a byte) and bool among them. */
const WIDTHS: [DType, number][] = [
  ['bool', 1],
  ['float4_e2m1fn', 1],
  ['uint8', 1],
  ['float16', 2],
  ['float32', 4],
  ['int64', 8],
  ['complex128', 16],
]
const SIZES = [1, 7, 8, 9, 16, 17, 63, 64, 65, 130]

/** The transposes of rows x cols matrices: plain, reversed along both axes, and one starting
 * `lead` elements into its buffer. */
function transposeCases(dtype: DType, itemsize: number, rows: number, cols: number): Case[] {
  const span = rows * cols
  const lead = 3
  return [
    { dtype, itemsize, shape: [cols, rows], strides: [1, cols], offset: 0, span },
    { dtype, itemsize, shape: [cols, rows], strides: [-1, -cols], offset: span - 1, span },
    { dtype, itemsize, shape: [cols, rows], strides: [1, cols], offset: lead, span: span + lead },
  ]
}

function check(t: import('ava').ExecutionContext, c: Case, label: string) {
  const bytes = pattern(c.span * c.itemsize, c.dtype)
  const source = Tensor.from(bytes, c.shape, { dtype: c.dtype, strides: c.strides, offset: c.offset })
  const want = expected(bytes, c)
  const same = (got: Uint8Array, how: string) => {
    // One assertion per copy (a deepEqual of 270 KB would print the whole array on failure).
    const ok = got.length === want.length && got.every((byte, i) => byte === want[i])
    t.true(ok, `${how} ${label}`)
  }
  const dense = source.contiguous()
  t.true(dense.isContiguous)
  same(bytesOf(dense.toTypedArray()), 'contiguous()')
  same(bytesOf(source.toTypedArray()), 'toTypedArray()')
  const copied = fromDLPack(source.__dlpack__({ copy: true }))
  t.true(copied.isContiguous)
  same(bytesOf(copied.toTypedArray()), '__dlpack__({ copy: true })')
  if (!['float4_e2m1fn', 'complex128', 'float16'].includes(c.dtype)) {
    const converted = source.astype(c.dtype)
    same(bytesOf(converted.toTypedArray()), 'astype(same dtype)')
    converted.dispose()
  }
  for (const tensor of [source, dense, copied]) tensor.dispose()
}

test('transposes of every element width are copied exactly at and around the tile sides', (t) => {
  for (const [dtype, itemsize] of WIDTHS) {
    for (const rows of SIZES) {
      for (const cols of SIZES) {
        for (const c of transposeCases(dtype, itemsize, rows, cols)) {
          check(t, c, `${dtype} ${rows}x${cols} strides ${c.strides} offset ${c.offset}`)
        }
      }
    }
  }
})

test('transposes larger than a tile group (8 tiles a side) are copied whole', (t) => {
  for (const [dtype, itemsize, rows, cols] of [
    ['uint8', 1, 520, 515],
    ['float32', 4, 257, 130],
    ['float64', 8, 129, 67],
  ] as const) {
    for (const c of transposeCases(dtype, itemsize, rows, cols)) check(t, c, `${dtype} ${rows}x${cols} ${c.strides}`)
  }
})

test('permutations of 3-d and 4-d tensors, steps and broadcast dimensions are copied exactly', (t) => {
  for (const [dtype, itemsize] of WIDTHS) {
    // A 9x10x11 row-major block seen through each permutation of its axes.
    const strides3 = [110, 11, 1]
    const shape3 = [9, 10, 11]
    for (const axes of [
      [0, 2, 1],
      [1, 0, 2],
      [1, 2, 0],
      [2, 0, 1],
      [2, 1, 0],
    ]) {
      const c = { dtype, itemsize, shape: axes.map((a) => shape3[a]), strides: axes.map((a) => strides3[a]), offset: 0, span: 990 }
      check(t, c, `${dtype} permute ${axes}`)
    }
    check(t, { dtype, itemsize, shape: [11, 5, 3], strides: [1, 220, 44], offset: 0, span: 990 }, `${dtype} stepped`)
    check(t, { dtype, itemsize, shape: [11, 9, 4], strides: [-1, 110, 0], offset: 10, span: 990 }, `${dtype} broadcast`)
    check(t, { dtype, itemsize, shape: [6, 5, 4, 3], strides: [1, 6, 30, 120], offset: 0, span: 360 }, `${dtype} 4-d reversed axes`)
  }
})
