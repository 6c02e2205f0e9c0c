// The views of docs/views.md (reshape, view, unsqueeze, squeeze, flatten, slice, narrow, select,
// expand) against a JS oracle written independently of the Rust arithmetic
// (napi_dlpack::view_layout): for random strided sources (permuted, negative strides, byte
// offsets) of every dtype, each view's elements are located by index mapping alone, and the
// view must address exactly those bytes (strides and data pointer: zero-copy), read the same
// values, be read-only exactly when it repeats elements, export through DLPack with the same
// layout (fromDLPack round trip and the C consumer), and see writes both ways.
//
// Runs in Electron mode too (NAPI_DLPACK_NO_EXTERNAL_BUFFERS=1): views of JS memory do not
// depend on external buffers; foreign memory is copied at import there.

import test from 'ava'

import {
  type ClampedTensor,
  type DLPackCapsule,
  DTYPE_NAMES,
  DTYPES,
  type DType,
  ReadOnlyError,
  Tensor,
  externalBuffersAllowed,
  fromDLPack,
} from '../../dist/index.js'
import { drainGarbage, gcUntil, random, throwsCode, nativeFixture } from '../harness/helpers.js'

// ---------------------------------------------------------------------------------------------
// The C consumer (__test__/c-addon): what a native addon sees of an export.

type Held = { readonly __held: unique symbol }
interface CAddon {
  makeTensor(options: {
    shape: number[]
    strides?: number[] | null
    byteOffset?: number
    versioned: boolean
    device?: [number, number]
  }): DLPackCapsule
  dataPointer(capsule: DLPackCapsule): bigint
  consume(capsule: DLPackCapsule): Held
  heldInfo(held: Held): {
    flags: number
    shape: number[] | null
    strides: number[] | null
    byteOffset: number
    device: [number, number]
    data: bigint
  }
  heldFloat32(held: Held): Float32Array
  release(held: Held): boolean
  deleterCalls(): number
}
const c = nativeFixture<CAddon>('c-addon', 'c_addon.node').addon
const READ_ONLY = 1
const zeroCopy = externalBuffersAllowed()

// ---------------------------------------------------------------------------------------------
// Random sources

const int = (next: () => number, lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1))

/** A strided layout over a buffer: `offset` is the buffer element of the first element. */
interface Source {
  shape: number[]
  strides: number[]
  offset: number
  /** Buffer elements needed. */
  span: number
}

/**
 * A random non-overlapping layout: a row-major block (size-1 and size-0 dimensions included)
 * with axes stepped by 1 or 2, permuted, some axes flipped (negative strides), preceded by a
 * few elements (a byte offset).
 */
function randomSource(next: () => number): Source {
  const ndim = int(next, 0, 4)
  const base = Array.from({ length: ndim }, () => (next() < 0.04 ? 0 : next() < 0.2 ? 1 : int(next, 2, 4)))
  const steps = base.map(() => (next() < 0.25 ? 2 : 1))
  const rowMajor: number[] = []
  let step = 1
  for (let i = ndim - 1; i >= 0; i--) {
    rowMajor[i] = step * steps[i]!
    step *= Math.max(1, base[i]! * steps[i]!)
  }
  const order = base.map((_, i) => i).sort(() => next() - 0.5)
  const shape = order.map((i) => base[i]!)
  const strides = order.map((i) => rowMajor[i]!)
  const lead = int(next, 0, 3)
  let offset = lead
  const empty = shape.includes(0)
  for (let i = 0; i < ndim; i++) {
    if (next() < 0.3 && !empty) {
      offset += (shape[i]! - 1) * strides[i]!
      strides[i] = -strides[i]!
    }
  }
  return { shape, strides, offset, span: lead + step + int(next, 0, 2) }
}

// ---------------------------------------------------------------------------------------------
// The oracle: each view as index mapping, with no strides arithmetic.

const product = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1)

/** Every index of `shape` in row-major order. */
function indices(shape: readonly number[]): number[][] {
  const out: number[][] = []
  const count = product(shape)
  for (let linear = 0; linear < count; linear++) {
    const index: number[] = new Array(shape.length)
    let rest = linear
    for (let d = shape.length - 1; d >= 0; d--) {
      index[d] = rest % shape[d]!
      rest = Math.floor(rest / shape[d]!)
    }
    out.push(index)
  }
  return out
}

/** The buffer element an index of `source` addresses. */
const at = (source: Source, index: readonly number[]) => index.reduce((sum, i, d) => sum + i * source.strides[d]!, source.offset)

/** What a view must be: its shape and the buffer element of each of its elements (row-major). */
type Expected = { shape: number[]; elements: number[]; mustBeView?: boolean } | { error: string }

const wrap = (i: number, n: number) => (i < 0 ? i + n : i)
const dimOk = (d: number, n: number) => Number.isInteger(d) && d >= -n && d < n

/** Maps a result shape through `toSource` (result index → source index). */
function mapped(source: Source, shape: number[], toSource: (index: number[]) => number[]): Expected {
  return { shape, elements: indices(shape).map((index) => at(source, toSource(index))) }
}

/** Same elements in row-major order under `shape` (reshape, flatten, squeeze, unsqueeze). */
function regrouped(source: Source, shape: number[], mustBeView = false): Expected {
  return { shape, elements: indices(source.shape).map((index) => at(source, index)), mustBeView }
}

/** Python's `range(*slice(start, end, step).indices(size))`, written out. */
function pythonSlice(size: number, start: number | null, end: number | null, step: number): number[] {
  const lo = step > 0 ? 0 : -1
  const hi = step > 0 ? size : size - 1
  const fix = (v: number | null, dflt: number) => (v === null ? dflt : Math.min(hi, Math.max(lo, v < 0 ? v + size : v)))
  const first = fix(start, step > 0 ? 0 : size - 1)
  const stop = fix(end, step > 0 ? size : -1)
  const out: number[] = []
  for (let i = first; step > 0 ? i < stop : i > stop; i += step) out.push(i)
  return out
}

type Op =
  | { op: 'reshape' | 'view' | 'expand'; shape: number[] }
  | { op: 'unsqueeze'; dim: number }
  | { op: 'squeeze'; dim?: number }
  | { op: 'flatten'; start: number; end: number }
  | { op: 'slice'; dim: number; start: number | null; end: number | null; step: number }
  | { op: 'narrow'; dim: number; start: number; length: number }
  | { op: 'select'; dim: number; index: number }

function oracle(source: Source, op: Op): Expected {
  const { shape } = source
  const n = shape.length
  const count = product(shape)
  const bad = { error: 'ERR_DLPACK_INVALID_ARGUMENT' }
  switch (op.op) {
    case 'reshape':
    case 'view': {
      const holes = op.shape.filter((s) => s === -1).length
      if (holes > 1 || op.shape.some((s) => s < -1)) return bad
      const known = product(op.shape.filter((s) => s !== -1))
      if (holes === 1 && (known === 0 || count % known !== 0)) return bad
      if (holes === 0 && known !== count) return bad
      return regrouped(source, op.shape.map((s) => (s === -1 ? count / known : s)))
    }
    case 'unsqueeze': {
      if (!dimOk(op.dim, n + 1)) return bad
      const d = wrap(op.dim, n + 1)
      return regrouped(source, [...shape.slice(0, d), 1, ...shape.slice(d)], true)
    }
    case 'squeeze': {
      if (op.dim === undefined) return regrouped(source, shape.filter((s) => s !== 1), true)
      if (!dimOk(op.dim, n) || shape[wrap(op.dim, n)] !== 1) return bad
      return regrouped(source, shape.filter((_, i) => i !== wrap(op.dim!, n)), true)
    }
    case 'flatten': {
      const m = Math.max(n, 1)
      if (!dimOk(op.start, m) || !dimOk(op.end, m)) return bad
      const [s, e] = [wrap(op.start, m), wrap(op.end, m)]
      if (s > e) return bad
      if (n === 0) return regrouped(source, [1])
      return regrouped(source, [...shape.slice(0, s), product(shape.slice(s, e + 1)), ...shape.slice(e + 1)])
    }
    case 'slice': {
      if (!dimOk(op.dim, n) || op.step === 0) return bad
      const d = wrap(op.dim, n)
      const picked = pythonSlice(shape[d]!, op.start, op.end, op.step)
      const out = shape.slice()
      out[d] = picked.length
      return mapped(source, out, (index) => index.map((i, k) => (k === d ? picked[i]! : i)))
    }
    case 'narrow': {
      if (!dimOk(op.dim, n)) return bad
      const d = wrap(op.dim, n)
      const first = wrap(op.start, shape[d]!)
      if (first < 0 || op.length < 0 || first + op.length > shape[d]!) return bad
      const out = shape.slice()
      out[d] = op.length
      return mapped(source, out, (index) => index.map((i, k) => (k === d ? first + i : i)))
    }
    case 'select': {
      if (!dimOk(op.dim, n)) return bad
      const d = wrap(op.dim, n)
      const i = wrap(op.index, shape[d]!)
      if (i < 0 || i >= shape[d]!) return bad
      return mapped(source, shape.filter((_, k) => k !== d), (index) => [...index.slice(0, d), i, ...index.slice(d)])
    }
    case 'expand': {
      const lead = op.shape.length - n
      if (lead < 0) return bad
      const out: number[] = []
      for (let k = 0; k < op.shape.length; k++) {
        const want = op.shape[k]!
        if (k < lead) {
          if (want < 0) return bad
          out.push(want)
          continue
        }
        const have = shape[k - lead]!
        if (want === -1 || want === have) out.push(have)
        else if (have === 1 && want >= 0) out.push(want)
        else return bad
      }
      return mapped(source, out, (index) => index.slice(lead).map((i, k) => (shape[k] === 1 ? 0 : i)))
    }
  }
}

/**
 * Whether a strided view can show `elements` (row-major) under `shape`: the offsets must be an
 * affine function of the index. Found from the elements alone (the stride of each dimension
 * is the step from index 0 to its unit index), then checked on every element.
 */
function affine(shape: readonly number[], elements: readonly number[]): boolean {
  if (elements.length <= 1) return true
  const all = indices(shape)
  const unit = shape.map((size, d) => {
    if (size < 2) return 0
    const index = shape.map((_, k) => (k === d ? 1 : 0))
    return elements[all.findIndex((i) => i.every((v, k) => v === index[k]))]! - elements[0]!
  })
  return all.every((index, linear) => elements[linear] === index.reduce((sum, i, d) => sum + i * unit[d]!, elements[0]!))
}

/** A random call of each operation, valid or not. */
function randomOps(next: () => number, shape: readonly number[]): Op[] {
  const n = shape.length
  const dim = (extra = 0) => int(next, -n - extra - 1, n + extra)
  const count = product(shape)
  const divisors = (x: number) => Array.from({ length: Math.max(x, 1) }, (_, i) => i + 1).filter((d) => x % d === 0)
  const reshapeTo = (): number[] => {
    if (next() < 0.15) return [count + 1]
    if (next() < 0.1) return [-1, -1]
    const out: number[] = []
    let rest = count
    while (rest > 1 && out.length < 4) {
      const d = divisors(rest)[int(next, 0, divisors(rest).length - 1)]!
      out.push(d)
      rest /= d
    }
    if (count === 0) out.push(0, int(next, 1, 3))
    if (next() < 0.3) out.splice(int(next, 0, out.length), 0, 1)
    if (out.length > 0 && next() < 0.4) out[int(next, 0, out.length - 1)] = -1
    return out
  }
  const bound = () => (next() < 0.25 ? null : int(next, -6, 6))
  const expandTo = (): number[] => {
    const lead = Array.from({ length: int(next, 0, 2) }, () => int(next, next() < 0.1 ? -1 : 0, 3))
    return [...lead, ...shape.map((s) => (next() < 0.2 ? -1 : s === 1 ? int(next, 0, 4) : next() < 0.1 ? s + 1 : s))]
  }
  return [
    { op: 'reshape', shape: reshapeTo() },
    { op: 'view', shape: reshapeTo() },
    { op: 'unsqueeze', dim: dim(1) },
    next() < 0.4 ? { op: 'squeeze' } : { op: 'squeeze', dim: dim() },
    { op: 'flatten', start: dim(), end: next() < 0.5 ? -1 : dim() },
    { op: 'slice', dim: dim(), start: bound(), end: bound(), step: next() < 0.1 ? 0 : int(next, -3, 3) || 1 },
    { op: 'narrow', dim: dim(), start: int(next, -5, 4), length: int(next, -1, 4) },
    { op: 'select', dim: dim(), index: int(next, -5, 4) },
    { op: 'expand', shape: expandTo() },
  ]
}

function apply<D extends DType>(tensor: Tensor<D>, op: Op): Tensor<D> {
  switch (op.op) {
    case 'reshape':
      return next50() ? tensor.reshape(op.shape) : tensor.reshape(...op.shape)
    case 'view':
      return tensor.view(op.shape)
    case 'expand':
      return next50() ? tensor.expand(op.shape) : tensor.expand(...op.shape)
    case 'unsqueeze':
      return tensor.unsqueeze(op.dim)
    case 'squeeze':
      return op.dim === undefined ? tensor.squeeze() : tensor.squeeze(op.dim)
    case 'flatten':
      return tensor.flatten(op.start, op.end)
    case 'slice':
      return tensor.slice(op.dim, op.start, op.end, op.step)
    case 'narrow':
      return tensor.narrow(op.dim, op.start, op.length)
    case 'select':
      return tensor.select(op.dim, op.index)
  }
}
let flip = 0
const next50 = () => (flip++ & 1) === 0

/** The bytes of `elements` of `buffer` (elements of `itemsize` bytes), in order. */
function gather(buffer: Uint8Array, elements: readonly number[], itemsize: number): number[] {
  const out: number[] = []
  for (const e of elements) for (let b = 0; b < itemsize; b++) out.push(buffer[e * itemsize + b]!)
  return out
}

const bytesOf = (view: ArrayBufferView) => Array.from(new Uint8Array(view.buffer, view.byteOffset, view.byteLength))

/** The buffer elements a tensor's layout addresses, from its strides and data pointer. */
function addressed(tensor: Tensor, base: bigint, itemsize: number): number[] {
  const first = Number(tensor.dataPointer - base) / itemsize
  return indices(tensor.shape).map((index) => index.reduce((sum, i, d) => sum + i * tensor.strides[d]!, first))
}

// ---------------------------------------------------------------------------------------------
// The oracle suite

for (const dtype of DTYPE_NAMES) {
  test(`views of ${dtype} tensors match the oracle (values, strides, data pointer, read-only, DLPack)`, (t) => {
    const { itemsize } = DTYPES[dtype]
    const next = random(0x5eed + DTYPE_NAMES.indexOf(dtype))
    let checked = 0
    let refused = 0
    for (let round = 0; round < 40; round++) {
      const source = randomSource(next)
      const buffer = new Uint8Array(source.span * itemsize)
      // bool bytes must be 0 or 1; other dtypes get distinct bytes.
      for (let i = 0; i < buffer.length; i++) buffer[i] = dtype === 'bool' ? (i * 7) % 3 & 1 : (i * 37 + 11) & 0xff
      const tensor = Tensor.from(buffer, source.shape, { dtype, strides: source.strides, offset: source.offset })
      const base = tensor.dataPointer - BigInt(source.offset * itemsize)
      for (const op of randomOps(next, source.shape)) {
        const what = `${JSON.stringify(source)} ${JSON.stringify(op)}`
        const expected = oracle(source, op)
        if ('error' in expected) {
          throwsCode(t, () => apply(tensor, op), expected.error, undefined, what)
          refused++
          continue
        }
        if (!affine(expected.shape, expected.elements)) {
          t.false(expected.mustBeView, `${what}: the oracle says this op always has a view`)
          throwsCode(t, () => apply(tensor, op), 'ERR_DLPACK_NOT_CONTIGUOUS', undefined, what)
          refused++
          continue
        }
        const view = apply(tensor, op)
        t.deepEqual(view.shape, expected.shape, what)
        t.is(view.dtype, dtype)
        if (expected.elements.length > 0) {
          t.deepEqual(addressed(view, base, itemsize), expected.elements, `${what}: strides and data pointer`)
        } else {
          t.is(view.dataPointer, tensor.dataPointer, `${what}: an empty view stays at the source's first element`)
        }
        t.deepEqual(bytesOf(view.toTypedArray()), gather(buffer, expected.elements, itemsize), `${what}: values`)
        const repeats = new Set(expected.elements).size !== expected.elements.length
        t.is(view.readonly, repeats, `${what}: read-only exactly when elements repeat`)
        // DLPack: our own consumer, then the C one.
        const back = fromDLPack(view.__dlpack__())
        t.deepEqual([back.shape, back.strides, back.dataPointer, back.readonly], [view.shape, view.strides, view.dataPointer, view.readonly], what)
        const held = c.consume(view.__dlpack__())
        const info = c.heldInfo(held)
        t.deepEqual(info.shape ?? [], view.shape, what)
        t.deepEqual(info.strides ?? [], view.strides, what)
        // (An empty export may carry any data pointer, NULL included.)
        if (view.numel > 0) t.is(info.data + BigInt(info.byteOffset), view.dataPointer, `${what}: the C consumer's first element`)
        t.is((info.flags & READ_ONLY) !== 0, repeats, `${what}: READ_ONLY exported`)
        c.release(held)
        back.dispose()
        view.dispose()
        checked++
      }
      tensor.dispose()
    }
    t.true(checked > 150 && refused > 30, `${checked} views checked, ${refused} refused`)
  })
}

// ---------------------------------------------------------------------------------------------
// Writes, sharing and lifetimes

test('writes through a view are seen in the base tensor and the other way round', (t) => {
  const base = Tensor.from(new Float32Array(24).map((_, i) => i), [2, 3, 4])
  const column = base.permute(2, 0, 1).slice(0, -1, null, -2).select(2, 1) // [2, 2]: x[3-2k, i, 1]
  t.deepEqual(column.toArray(), [
    [7, 19],
    [5, 17],
  ])
  const data = column.data
  data[column.offset + 1 * column.strides[0]! + 0 * column.strides[1]!] = -1
  t.is(base.data[5], -1, 'written through the view, read in the base')
  base.data[19] = 100
  t.deepEqual(column.toArray(), [
    [7, 100],
    [-1, 17],
  ])
  // A row-major view: .data is the base's memory itself.
  const flat = base.reshape(-1)
  t.is(flat.dataPointer, base.dataPointer)
  flat.data[23] = 42
  t.is(base.toArray() instanceof Array && (base.toArray() as number[][][])[1]![2]![3], 42)
})

test('a view outlives the tensor it was made from, and disposing one leaves the other', (t) => {
  let base: Tensor<'int32'> | undefined = Tensor.from(new Int32Array([1, 2, 3, 4, 5, 6]), [2, 3])
  const row = base.select(0, 1)
  base.dispose()
  base = undefined
  t.deepEqual(row.toArray(), [4, 5, 6])
  const again = row.unsqueeze(0).expand(2, 3)
  row.dispose()
  t.deepEqual(again.toArray(), [
    [4, 5, 6],
    [4, 5, 6],
  ])
  throwsCode(t, () => row.reshape(3), 'ERR_TENSOR_DISPOSED')
})

test('expanded views are read-only; contiguous() gives a writable copy', (t) => {
  const bias = Tensor.from(new Float32Array([1, 2, 3]), [1, 3])
  const rows = bias.expand(4, 3)
  t.deepEqual(rows.strides, [0, 1])
  t.true(rows.readonly)
  t.is(rows.dataPointer, bias.dataPointer)
  throwsCode(t, () => rows.data, 'ERR_DLPACK_READ_ONLY', ReadOnlyError)
  t.deepEqual([...rows.getData({ allowReadOnly: true })], [1, 2, 3], 'the memory is the 3 elements, not 12')
  const dense = rows.contiguous()
  t.false(dense.readonly)
  t.deepEqual(dense.shape, [4, 3])
  dense.data[0] = 9
  t.is(bias.data[0], 1, 'the copy is not the source')
  // Expanding without repeating anything stays writable.
  t.false(bias.expand(1, 3).readonly)
  t.false(bias.expand(1, 1, 3).readonly)
  // A read-only source gives read-only views.
  const frozen = Tensor.from(new Float32Array(6), [2, 3], { readonly: true })
  t.true(frozen.select(0, 0).readonly)
})

// ---------------------------------------------------------------------------------------------
// Errors: each a coded error (the oracle suite covers ranges; these are the argument kinds)

test('bad arguments are coded errors', (t) => {
  const x = Tensor.from(new Float32Array(24), [2, 3, 4])
  const cases: [string, () => unknown, string][] = [
    ['non-integer size', () => x.reshape(2, 1.5, 8), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['NaN size', () => x.view([NaN, 24]), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['string size', () => x.reshape(['24'] as never), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['size mismatch', () => x.reshape(5, 5), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['-1 twice', () => x.reshape(-1, -1, 2), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['-1 that does not divide', () => x.reshape(5, -1), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['negative size', () => x.reshape(-2, -12), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['unsqueeze out of range', () => x.unsqueeze(4), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['unsqueeze non-integer', () => x.unsqueeze(0.5), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['squeeze of a dimension of size 3', () => x.squeeze(1), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['flatten start after end', () => x.flatten(2, 1), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['flatten of a permuted tensor', () => x.permute(1, 0, 2).flatten(), 'ERR_DLPACK_NOT_CONTIGUOUS'],
    ['reshape of a transposed tensor', () => x.transpose(1, 2).reshape(24), 'ERR_DLPACK_NOT_CONTIGUOUS'],
    ['slice step 0', () => x.slice(0, 0, 1, 0), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['slice step 0.5', () => x.slice(0, 0, 1, 0.5), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['slice bad dim', () => x.slice(3), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['slice string bound', () => x.slice(0, '1' as never), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['narrow past the end', () => x.narrow(2, 2, 3), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['narrow negative length', () => x.narrow(2, 0, -1), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['select out of range', () => x.select(1, 3), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['select below range', () => x.select(1, -4), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['select missing index', () => (x.select as (dim: number) => unknown)(1), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['expand of a non-1 dimension', () => x.expand(2, 6, 4), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['expand to fewer dimensions', () => x.expand(3, 4), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['expand with -1 for a new dimension', () => x.expand(-1, 2, 3, 4), 'ERR_DLPACK_INVALID_ARGUMENT'],
    ['65 dimensions', () => x.reshape([...Array(62).fill(1), 2, 3, 4]), 'ERR_DLPACK_NDIM'],
  ]
  for (const [what, fn, code] of cases) throwsCode(t, fn, code, undefined, what)
})

// ---------------------------------------------------------------------------------------------
// Types: Tensor<D> and ClampedTensor are preserved (checked by tsc -p __test__).

test('views keep the dtype type and clamping', (t) => {
  const f: Tensor<'float32'> = Tensor.from(new Float32Array(12), [3, 4]).reshape(2, 6).unsqueeze(0).squeeze().slice(1, 0, 3)
  const data: Float32Array = f.data
  t.is(data.constructor, Float32Array)
  const clamped: ClampedTensor = Tensor.from(new Uint8ClampedArray(24), [2, 3, 4])
  const views: ClampedTensor[] = [
    clamped.reshape(6, 4),
    clamped.view([24]),
    clamped.unsqueeze(0),
    clamped.squeeze(),
    clamped.flatten(1),
    clamped.slice(2, null, null, -1),
    clamped.narrow(0, 1, 1),
    clamped.select(1, 2),
    clamped.reshape(2, 3, 4, 1).expand(2, 3, 4, 5),
  ]
  for (const view of views) {
    t.true(view.clamped)
    const pixels: Uint8ClampedArray = view.getData({ allowReadOnly: true })
    t.is(pixels.constructor, Uint8ClampedArray)
  }
})

// ---------------------------------------------------------------------------------------------
// Foreign memory: views of an imported tensor export the view's first element, not the
// producer's.

test.serial('views of a C producer\'s tensor export their own first element and strides', async (t) => {
  await drainGarbage()
  const before = c.deleterCalls()
  const capsule = c.makeTensor({ shape: [4, 6], byteOffset: 8, versioned: true })
  const pointer = c.dataPointer(capsule)
  const tensor = fromDLPack(capsule) as Tensor<'float32'>
  const view = tensor.slice(1, 1, null, 2).select(0, 2) // elements 13, 15, 17
  t.deepEqual(view.toArray(), [13, 15, 17])
  if (zeroCopy) t.is(view.dataPointer, pointer + BigInt(13 * 4), 'inside the producer memory')
  const held = c.consume(view.__dlpack__())
  const info = c.heldInfo(held)
  t.deepEqual([info.shape, info.strides], [[3], [2]])
  t.is(info.data + BigInt(info.byteOffset), view.dataPointer)
  const reversed = tensor.slice(0, null, null, -1).narrow(1, 4, 2) // rows 3..0, columns 4, 5
  const back = fromDLPack(reversed.__dlpack__())
  t.deepEqual(back.toArray(), [
    [22, 23],
    [16, 17],
    [10, 11],
    [4, 5],
  ])
  t.is(back.dataPointer, reversed.dataPointer)
  for (const each of [back, reversed, view, tensor]) each.dispose()
  // (The intermediate views of the chains above are released by the GC.)
  await gcUntil(() => false, 4)
  t.is(c.deleterCalls(), zeroCopy ? before : before + 1, 'the C consumer still holds the memory')
  c.release(held)
  t.true(await gcUntil(() => c.deleterCalls() === before + 1), 'one deleter call')
})

test.serial('views of a handle-valued device (OpenCL) move the exported byte_offset, never data', async (t) => {
  await drainGarbage()
  // OpenCL (4): `data` is a buffer handle, not an address; the view's start is in byte_offset.
  const capsule = c.makeTensor({ shape: [4, 6], byteOffset: 16, versioned: true, device: [4, 0] })
  const handle = c.dataPointer(capsule)
  const tensor = fromDLPack(capsule, { device: [4, 0] })
  const view = tensor.select(0, 2).slice(0, 1) // row 2 from column 1: 13 elements in
  const held = c.consume(view.__dlpack__())
  const info = c.heldInfo(held)
  t.deepEqual(info.device, [4, 0])
  t.is(info.data + BigInt(info.byteOffset), handle + BigInt(13 * 4))
  t.is(info.byteOffset, 16 + 13 * 4, 'the producer handle is kept as data')
  t.deepEqual([info.shape, info.strides], [[5], [1]])
  c.release(held)
  view.dispose()
  tensor.dispose()
  // A view starting below the producer's handle (its elements reach below data + 0 through a
  // negative stride) has no DLPack byte_offset (unsigned): refused when made.
  const reversed = fromDLPack(c.makeTensor({ shape: [4], strides: [-1], byteOffset: 0, versioned: true, device: [4, 0] }), { device: [4, 0] })
  throwsCode(t, () => reversed.slice(0, null, null, -1), 'ERR_DLPACK_BYTE_OFFSET')
  t.is(reversed.slice(0, 0, 2).byteOffset, 0, 'a view from the first element is fine')
  reversed.dispose()
})
